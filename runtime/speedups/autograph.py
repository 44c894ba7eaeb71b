"""Keeps AutoGraph out of Keras 2's own code, as TensorFlow intends.

Inside a ``tf.function``, AutoGraph rewrites every Python function it calls unless the
function's module is on its do-not-convert list. That list names ``keras``, the package
Keras 2 shipped as, but not ``tf_keras``, the package it ships as now (this project's
Keras, see ``models/__init__.py``). So every trace of a Keras model (fit's train and
test steps, predict, ``model.save``) re-parses and rewrites Keras's internals, which are
written to run without it: measured here, AutoGraph's rewriting was most of the first
training step's time, and the rule cuts that step several-fold. The rule is what
TensorFlow applies to ``keras``; the functions traced by ``tf.function`` itself (a
Keras train function, the export signatures) are still converted as before.

Written against tensorflow 2.16.2 (``runtime.speedups`` checks where it keeps its rules);
every process that builds the model installs it (``models/model.py``), Vertex's included.
"""

from __future__ import annotations

from absl import logging

PACKAGE = "tf_keras"


def keep_autograph_out_of_tf_keras() -> bool:
    """Adds a do-not-convert rule for ``tf_keras`` to AutoGraph (once). False if this
    TensorFlow keeps its rules elsewhere: then nothing changes but speed."""
    try:
        from tensorflow.python.autograph.core import config
    except ImportError:
        config = None
    rules = getattr(config, "CONVERSION_RULES", None)
    rule_class = getattr(config, "DoNotConvert", None)
    if rules is None or rule_class is None:
        logging.warning(
            "AutoGraph's conversion rules are not where TensorFlow 2.16 keeps them: Keras "
            "internals will be converted on every trace (slower, not wrong)."
        )
        return False
    if not any(isinstance(rule, rule_class) and rule.matches(PACKAGE) for rule in rules):
        config.CONVERSION_RULES = (rule_class(PACKAGE),) + tuple(rules)
    return True
