"""The Keras model builder, on its own (no TFX, no data files)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

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


def _one_hot_columns(batch: dict[str, np.ndarray], sizes: dict[str, int]) -> np.ndarray:
    """The wide part's columns one-hot encoded side by side, as a dense layer over them
    would see them: each categorical, the two coordinate crosses, payment x fare bucket."""
    columns = [(batch[k][:, 0], sizes[k]) for k in model_lib.categorical_feature_keys()]
    for lat, lon in model_lib.COORDINATE_CROSSES:
        lat_key, lon_key = features.transformed_name(lat), features.transformed_name(lon)
        columns.append((batch[lat_key][:, 0] * sizes[lon_key] + batch[lon_key][:, 0], sizes[lat_key] * sizes[lon_key]))
    pay_key, fare_key = features.transformed_name("payment_type"), features.transformed_name("fare")
    buckets = len(model_lib.FARE_BUCKET_BOUNDARIES) + 1
    fare_bucket = np.digitize(batch[fare_key][:, 0], model_lib.FARE_BUCKET_BOUNDARIES)
    columns.append((batch[pay_key][:, 0] * buckets + fare_bucket, sizes[pay_key] * buckets))
    return np.concatenate([np.eye(size)[values] for values, size in columns], axis=1)


def test_the_wide_part_is_a_linear_function_of_the_one_hot_columns():
    """One weight per category of each column: the wide logit is the one-hot columns times
    the weight table, as a dense layer over the encodings computed it."""
    sizes = _sizes()
    model = model_lib.build_keras_model(sizes, HParams(hidden_units=(8,)))
    batch = _batch(sizes, n=64, seed=3)
    weights = model.get_layer("wide_weights").embeddings.numpy()
    one_hot = _one_hot_columns(batch, sizes)
    assert weights.shape == (one_hot.shape[1], 1)
    wide = keras.Model(model.input, model.get_layer("logit").input[0])
    np.testing.assert_allclose(wide.predict(batch, verbose=0), one_hot @ weights, rtol=1e-5, atol=1e-6)


def test_model_rejects_missing_category_sizes():
    sizes = _sizes()
    sizes.pop(features.transformed_name("company"))
    with pytest.raises(ValueError, match="company_xf"):
        model_lib.build_keras_model(sizes)


def test_steps_per_execution_reaches_keras():
    """The Trainer asks a TPU for an epoch's steps per host call (no host work between steps)."""
    assert int(model_lib.build_keras_model(_sizes())._steps_per_execution.numpy()) == 1
    assert int(model_lib.build_keras_model(_sizes(), steps_per_execution=100)._steps_per_execution.numpy()) == 100


def _fit(model, sizes: dict[str, int]) -> None:
    batch = _batch(sizes, n=256, seed=2)
    labels = (batch[features.transformed_name("payment_type")] == 1).astype("float32")
    model.fit(batch, labels, epochs=2, batch_size=64, shuffle=False, verbose=0)


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_the_training_step_is_traced_once(strategy):
    """The optimizer's variables exist before fit: no second trace of the training step
    (tf.function traces again after a first call that created variables)."""
    scope = tf.distribute.MirroredStrategy() if strategy == "mirrored" else tf.distribute.get_strategy()
    with scope.scope():
        model = model_lib.build_keras_model(_sizes(), HParams(hidden_units=(8,)))
    assert len(model.optimizer.variables) > 1  # more than its step counter
    _fit(model, _sizes())
    assert model.train_function.experimental_get_tracing_count() == 1


def test_training_matches_an_optimizer_built_in_the_first_step():
    """The same weights and moving averages as Keras' default, where the first training
    step builds the optimizer (a fresh optimizer of the same configuration)."""
    sizes, hparams = _sizes(), HParams(hidden_units=(8,), dropout=0.0)
    models = []
    for _ in range(2):  # the same layer names and initial weights
        keras.backend.clear_session()
        keras.utils.set_random_seed(0)
        models.append(model_lib.build_keras_model(sizes, hparams))
    built, lazy = models
    lazy.compile(
        optimizer=type(lazy.optimizer).from_config(lazy.optimizer.get_config()),
        loss=lazy.loss,
        metrics=[type(m).from_config(m.get_config()) for m in built.compiled_metrics._user_metrics],  # noqa: SLF001
    )
    assert len(lazy.optimizer.variables) < len(built.optimizer.variables)
    _fit(built, sizes)
    _fit(lazy, sizes)
    assert lazy.train_function.experimental_get_tracing_count() == 2
    for mine, keras_own in zip(built.get_weights(), lazy.get_weights(), strict=True):
        np.testing.assert_allclose(mine, keras_own, rtol=1e-6, atol=1e-7)
    assert [v.name for v in built.optimizer.variables] == [v.name for v in lazy.optimizer.variables]
