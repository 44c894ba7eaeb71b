"""Keeps AutoGraph out of Keras 2's own code (``tf_keras``), as TensorFlow does for ``keras``:
every trace of a Keras model otherwise re-parses Keras's internals (docs/speedups.md).
Written against tensorflow 2.16.2; every process that builds the model installs it.
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


def let_autograph_convert_tf_keras() -> None:
    """Takes the rule away again: AutoGraph converts Keras's internals as TensorFlow ships it."""
    try:
        from tensorflow.python.autograph.core import config
    except ImportError:
        return
    rules, rule_class = getattr(config, "CONVERSION_RULES", None), getattr(config, "DoNotConvert", None)
    if rules is not None and rule_class is not None:
        config.CONVERSION_RULES = tuple(r for r in rules if not (isinstance(r, rule_class) and r.matches(PACKAGE)))
