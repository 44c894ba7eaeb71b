"""AutoGraph leaves Keras 2's own code alone, as it does for the ``keras`` package."""

from __future__ import annotations

import tf_keras as keras
from tensorflow.python.autograph.core import config
from tensorflow.python.autograph.impl import conversion

import models.model  # noqa: F401  (adds the rule on import)
from runtime.speedups.autograph import PACKAGE, keep_autograph_out_of_tf_keras


def _rules_for_tf_keras() -> int:
    return sum(isinstance(rule, config.DoNotConvert) and rule.matches(PACKAGE) for rule in config.CONVERSION_RULES)


def test_keras_internals_are_not_converted_once_the_model_module_is_imported():
    assert conversion.is_allowlisted(keras.layers.Dense.call)
    assert conversion.is_allowlisted(keras.Model.train_step)
    assert not conversion.is_allowlisted(models.model.build_keras_model)  # our own code still is


def test_the_rule_is_added_once():
    assert keep_autograph_out_of_tf_keras() and keep_autograph_out_of_tf_keras()
    assert _rules_for_tf_keras() == 1


def test_without_the_rule_keras_internals_would_be_converted(monkeypatch):
    without = tuple(
        rule
        for rule in config.CONVERSION_RULES
        if not (isinstance(rule, config.DoNotConvert) and rule.matches(PACKAGE))
    )
    monkeypatch.setattr(config, "CONVERSION_RULES", without)
    assert not conversion.is_allowlisted(keras.layers.Dense.call)  # what TensorFlow 2.16 does alone
    assert keep_autograph_out_of_tf_keras() and conversion.is_allowlisted(keras.layers.Dense.call)


def test_a_component_told_to_run_as_shipped_takes_the_rule_away(monkeypatch):
    from runtime import speedups

    monkeypatch.setattr(config, "CONVERSION_RULES", config.CONVERSION_RULES)
    monkeypatch.setenv(speedups.ENV_VAR, "1")
    speedups.follow({speedups.PARAMETER: 1})
    speedups.follow(None)
    assert _rules_for_tf_keras() == 1 and speedups.enabled()
    speedups.follow({speedups.PARAMETER: 0})
    assert _rules_for_tf_keras() == 0 and not speedups.enabled()
    assert not conversion.is_allowlisted(keras.layers.Dense.call)
