"""The Keras model builder, on its own (no TFX, no data files)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import model as model_lib
from models.hparams import HParams
from models.problem import Task, transformed_name
from tests.support.problems import SHIPPED, TAXI


def _sizes(problem=TAXI) -> dict[str, int]:
    vocabularies = {transformed_name(k): 5 for k in problem.features.categorical}
    return {**model_lib.fixed_categorical_sizes(problem), **vocabularies}


def _batch(sizes: dict[str, int], n: int = 8, seed: int = 0, problem=TAXI) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    batch = {k: rng.normal(size=(n, 1)).astype("float32") for k in model_lib.dense_feature_keys(problem)}
    batch.update({k: rng.integers(0, sizes[k], size=(n, 1)) for k in model_lib.categorical_feature_keys(problem)})
    return batch


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_model_takes_every_transformed_input_and_outputs_what_the_task_needs(name):
    problem = SHIPPED[name]
    sizes = _sizes(problem)
    model = model_lib.build_keras_model(problem, sizes, HParams(hidden_units=(8,)))
    inputs = set(model_lib.dense_feature_keys(problem)) | set(model_lib.categorical_feature_keys(problem))
    assert set(model.input) == inputs
    out = model.predict(_batch(sizes, problem=problem), verbose=0)
    if problem.task == Task.BINARY:
        assert out.shape == (8, 1) and ((out >= 0) & (out <= 1)).all()
    elif problem.task == Task.MULTICLASS:
        assert out.shape == (8, problem.num_classes)
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    else:
        assert out.shape == (8, 1)


def _first_categorical(problem) -> str:
    return transformed_name(problem.features.categories[0])


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_model_learns_a_separable_signal(name):
    """A categorical feature that decides the label: a few epochs must pick it up, for
    every task's head."""
    problem = SHIPPED[name]
    sizes = _sizes(problem)
    batch = _batch(sizes, n=512, seed=1, problem=problem)
    decides = batch[_first_categorical(problem)]
    if problem.task == Task.REGRESSION:
        labels = (1000.0 + 500.0 * decides).astype("float32")
        scale = model_lib.TargetScale(float(labels.mean()), float(labels.std()))
    else:
        labels, scale = (decides % problem.num_classes).astype("int64"), model_lib.TargetScale()
    model = model_lib.build_keras_model(
        problem, sizes, HParams(hidden_units=(8,), learning_rate=0.05), target_scale=scale
    )
    history = model.fit(batch, labels, epochs=15, batch_size=64, verbose=0)
    if problem.task == Task.BINARY:
        assert history.history["auc"][-1] > 0.95
    elif problem.task == Task.MULTICLASS:
        assert history.history["accuracy"][-1] > 0.95
    else:
        assert history.history["rmse"][-1] < 0.1 * labels.std()


def test_a_regression_model_predicts_in_the_targets_units():
    """The last layer scales z-score outputs back: an untrained model predicts near the mean."""
    problem = SHIPPED["penguin-body-mass"]
    sizes = _sizes(problem)
    scale = model_lib.TargetScale(mean=4200.0, std=800.0)
    model = model_lib.build_keras_model(problem, sizes, HParams(hidden_units=(8,)), target_scale=scale)
    out = model.predict(_batch(sizes, n=64, problem=problem), verbose=0)
    assert abs(float(out.mean()) - 4200.0) < 3 * 800.0 and float(out.std()) > 1.0


def _one_hot_columns(batch: dict[str, np.ndarray], sizes: dict[str, int], problem=TAXI) -> np.ndarray:
    """The wide part's columns one-hot encoded side by side, as a dense layer over them
    would see them: each categorical, each number's z-score bucket, then each cross of the
    spec (a number cut at the same z-score boundaries)."""
    boundaries = model_lib.Z_SCORE_BOUNDARIES
    columns = [(batch[k][:, 0], sizes[k]) for k in model_lib.categorical_feature_keys(problem)]
    columns += [
        (np.digitize(batch[k][:, 0], boundaries), len(boundaries) + 1) for k in model_lib.dense_feature_keys(problem)
    ]
    for pair in problem.features.crosses:
        parts = []
        for key in map(transformed_name, pair):
            if key in sizes:
                parts.append((batch[key][:, 0], sizes[key]))
            else:
                parts.append((np.digitize(batch[key][:, 0], boundaries), len(boundaries) + 1))
        (first, first_size), (second, second_size) = parts
        columns.append((first * second_size + second, first_size * second_size))
    return np.concatenate([np.eye(size)[values] for values, size in columns], axis=1)


def test_the_wide_part_is_a_linear_function_of_the_one_hot_columns():
    """One weight per category of each column: the wide logit is the one-hot columns times
    the weight table, as a dense layer over the encodings computed it."""
    sizes = _sizes()
    model = model_lib.build_keras_model(TAXI, sizes, HParams(hidden_units=(8,)))
    batch = _batch(sizes, n=64, seed=3)
    weights = model.get_layer("wide_weights").embeddings.numpy()
    one_hot = _one_hot_columns(batch, sizes)
    assert weights.shape == (one_hot.shape[1], 1)
    wide = keras.Model(model.input, model.get_layer("logit").input[0])
    np.testing.assert_allclose(wide.predict(batch, verbose=0), one_hot @ weights, rtol=1e-5, atol=1e-6)


def test_numbers_leave_the_wide_part_when_told():
    sizes = _sizes()
    with_numbers = model_lib.build_keras_model(TAXI, sizes, HParams(hidden_units=(8,)))
    without = model_lib.build_keras_model(TAXI, sizes, HParams(hidden_units=(8,), wide_numbers=False))
    buckets = len(model_lib.Z_SCORE_BOUNDARIES) + 1
    rows = [m.get_layer("wide_weights").embeddings.shape[0] for m in (with_numbers, without)]
    assert rows[0] - rows[1] == buckets * len(model_lib.dense_feature_keys(TAXI)) > 0


def test_the_multi_class_wide_part_has_a_weight_per_category_and_class():
    problem = SHIPPED["penguins"]
    sizes = _sizes(problem)
    model = model_lib.build_keras_model(problem, sizes, HParams(hidden_units=(8,)))
    batch = _batch(sizes, n=64, seed=3, problem=problem)
    weights = model.get_layer("wide_weights").embeddings.numpy()
    one_hot = _one_hot_columns(batch, sizes, problem)
    assert weights.shape == (one_hot.shape[1], problem.num_classes)
    wide = keras.Model(model.input, model.get_layer("logit").input[0])
    np.testing.assert_allclose(wide.predict(batch, verbose=0), one_hot @ weights, rtol=1e-5, atol=1e-6)


def test_model_rejects_missing_category_sizes():
    sizes = _sizes()
    missing = transformed_name(TAXI.features.categorical[1])
    sizes.pop(missing)
    with pytest.raises(ValueError, match=missing):
        model_lib.build_keras_model(TAXI, sizes)


def test_steps_per_execution_reaches_keras():
    """The Trainer asks a TPU for an epoch's steps per host call (no host work between steps)."""
    assert int(model_lib.build_keras_model(TAXI, _sizes())._steps_per_execution.numpy()) == 1
    assert int(model_lib.build_keras_model(TAXI, _sizes(), steps_per_execution=100)._steps_per_execution.numpy()) == 100


def _fit(model, sizes: dict[str, int]) -> None:
    batch = _batch(sizes, n=256, seed=2)
    labels = (batch[_first_categorical(TAXI)] == 1).astype("float32")
    model.fit(batch, labels, epochs=2, batch_size=64, shuffle=False, verbose=0)


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_the_training_step_is_traced_once(strategy):
    """The optimizer's variables exist before fit: no second trace of the training step
    (tf.function traces again after a first call that created variables)."""
    scope = tf.distribute.MirroredStrategy() if strategy == "mirrored" else tf.distribute.get_strategy()
    with scope.scope():
        model = model_lib.build_keras_model(TAXI, _sizes(), HParams(hidden_units=(8,)))
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
        models.append(model_lib.build_keras_model(TAXI, sizes, hparams))
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


def test_date_parts_enter_the_model_as_numbers():
    from models.problem import Problem

    problem = Problem.from_dict(
        {
            "name": "dated",
            "task": "binary",
            "label": {"column": "answer", "positive": "yes"},
            "features": {"numeric": ["x"], "dates": {"opened": "%Y-%m-%d %H:%M"}},
            "evaluation": {"threshold": 0.6},
        }
    )
    parts = ["opened_days", "opened_year", "opened_month", "opened_weekday", "opened_hour"]
    assert model_lib.dense_feature_keys(problem) == [transformed_name(k) for k in ["x", *parts]]
    model = model_lib.build_keras_model(problem, {}, HParams(hidden_units=(4,)))
    assert {k: model.input[k].dtype for k in model.input} == {transformed_name(k): tf.float32 for k in ["x", *parts]}
    assert model.predict(_batch({}, n=4, problem=problem), verbose=0).shape == (4, 1)
