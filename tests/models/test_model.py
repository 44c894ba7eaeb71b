"""The Keras model builder, on its own (no TFX, no data files)."""

from __future__ import annotations

import numpy as np
import pytest

from models import features
from models import model as model_lib
from models.hparams import HParams

VOCAB_SIZES = {features.transformed_name(k): 5 for k in features.VOCAB_FEATURES}


def _sizes() -> dict[str, int]:
    return {**model_lib.fixed_categorical_sizes(), **VOCAB_SIZES}


def _batch(sizes: dict[str, int], n: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    batch = {k: rng.normal(size=(n, 1)).astype("float32") for k in model_lib.dense_feature_keys()}
    batch.update({k: rng.integers(0, sizes[k], size=(n, 1)) for k in model_lib.categorical_feature_keys()})
    return batch


def test_model_takes_every_transformed_input_and_outputs_a_probability():
    model = model_lib.build_keras_model(_sizes(), HParams(hidden_units=(8,)))
    assert set(model.input) == set(model_lib.dense_feature_keys()) | set(model_lib.categorical_feature_keys())
    out = model.predict(_batch(_sizes()), verbose=0)
    assert out.shape == (8, 1)
    assert ((out >= 0) & (out <= 1)).all()


def test_model_learns_a_separable_signal():
    """A categorical feature that decides the label: a few epochs must pick it up."""
    sizes = _sizes()
    batch = _batch(sizes, n=512, seed=1)
    key = features.transformed_name("payment_type")
    labels = (batch[key] == 1).astype("float32")
    model = model_lib.build_keras_model(sizes, HParams(hidden_units=(8,), learning_rate=0.05))
    history = model.fit(batch, labels, epochs=15, batch_size=64, verbose=0)
    assert history.history["auc"][-1] > 0.95


def test_model_rejects_missing_category_sizes():
    sizes = _sizes()
    sizes.pop(features.transformed_name("company"))
    with pytest.raises(ValueError, match="company_xf"):
        model_lib.build_keras_model(sizes)


def test_steps_per_execution_reaches_keras():
    """The Trainer asks a TPU for an epoch's steps per host call (no host work between steps)."""
    assert int(model_lib.build_keras_model(_sizes())._steps_per_execution.numpy()) == 1
    assert int(model_lib.build_keras_model(_sizes(), steps_per_execution=100)._steps_per_execution.numpy()) == 100
