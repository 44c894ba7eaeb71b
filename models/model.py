"""The Keras model: wide (a weight per category and per crossed cell) and deep (embeddings
plus numeric z-scores), with the head the problem's task needs: one sigmoid output
(binary), a softmax over the classes (multi-class), or one number (regression).

It takes the transformed features (``<name>_xf``, each [batch, 1]) and knows nothing of
TFX; the category counts come in as a dict so it can be built and tested on its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import tensorflow as tf
import tf_keras as keras

from models.data import untuned
from models.hparams import HParams
from models.problem import Problem, Task, transformed_name
from runtime import speedups

# Every process that builds, trains or exports this model traces Keras code.
speedups.install(speedups.Stage.MODEL)

# A number crossed with a category in the wide part is cut at these points of its z-score
# (a fixed grid: the z-score already puts the data's bulk within a few units of 0).
Z_SCORE_BOUNDARIES: tuple[float, ...] = tuple(-2.5 + 0.25 * i for i in range(21))


# The validation AUC's thresholds, as many as TFMA's: Keras' default 200, evenly spaced in
# [0, 1], put every prediction of a rare class's model (all below a few percent) into a few
# buckets, and the AUC the schedule watched was far from the Evaluator's. Evenly spaced
# thresholds are counted by bucketing, so their number costs little.
AUC_THRESHOLDS = 10_000


@dataclasses.dataclass(frozen=True)
class TargetScale:
    """A regression target's mean and standard deviation over the training data: the model
    predicts in z-score units and its last layer scales back, so the same learning rate and
    initialisation suit a target in grams or in millions."""

    mean: float = 0.0
    std: float = 1.0


def target_scale(train_ds: tf.data.Dataset, batches: int = 64) -> TargetScale:
    """A regression target's scale from the first ``batches`` of the (shuffled) training
    dataset: a scale, so a sample serves. The unit scale where the dataset is built on each
    worker (ParameterServerStrategy's ``DatasetCreator``)."""
    if not isinstance(train_ds, tf.data.Dataset):
        return TargetScale()
    labels = [label for _, label in untuned(train_ds.take(batches))]
    if not labels:
        return TargetScale()
    values = tf.concat([tf.reshape(tf.cast(label, tf.float64), [-1]) for label in labels], axis=0)
    std = float(tf.math.reduce_std(values))
    return TargetScale(mean=float(tf.reduce_mean(values)), std=std if std > 0 else 1.0)


def monitored_metric(problem: Problem) -> tuple[str, str]:
    """The validation metric that drives the training schedule and the Tuner, and its mode."""
    return {
        Task.BINARY: ("val_auc", "max"),
        Task.MULTICLASS: ("val_accuracy", "max"),
        Task.REGRESSION: ("val_rmse", "min"),
    }[problem.task]


def dense_feature_keys(problem: Problem) -> list[str]:
    """The numbers the model reads: the numeric columns' z-scores, then each date's parts'."""
    return [transformed_name(k) for k in problem.features.numbers]


def categorical_feature_keys(problem: Problem) -> list[str]:
    return [transformed_name(k) for k in problem.features.categories]


def fixed_categorical_sizes(problem: Problem) -> dict[str, int]:
    """Category counts known without looking at data (integer ranges and buckets)."""
    spec = problem.features
    sizes = {transformed_name(k): largest + 2 for k, largest in spec.integer_categorical.items()}
    sizes.update({transformed_name(k): spec.num_buckets + 1 for k in spec.bucketized})
    return sizes


def _embedding_dim(num_categories: int) -> int:
    return max(2, min(16, int(round(2 * math.pow(num_categories, 0.25)))))


def _wide_logit(columns: list[tuple[tf.Tensor, int]], regularizer, outputs: int = 1) -> tf.Tensor:
    """The wide part's logit: one weight per category of each column, summed over the
    columns. The same linear function of the columns' one-hot encodings that a dense layer
    over them computes (the same weights, initialisation and regularisation; its bias is
    the deep part's), looked up in one table where each column has its own rows: one-hot
    encodings made every trace of the model several times larger (tracing the training
    step, validation and the export signatures), and each step multiplied mostly zeros.
    Indices are in range by construction (Transform's vocabularies, clipping and buckets;
    the sizes read from the same transform output); one out of range fails the step on CPU
    in the deep part's lookup of the same index."""
    offset, shifted = 0, []
    for column, size in columns:
        shifted.append(column + offset if offset else column)
        offset += size
    cells = keras.layers.concatenate(shifted, name="wide_cells") if len(shifted) > 1 else shifted[0]
    weights = keras.layers.Embedding(
        offset,
        outputs,
        embeddings_initializer="glorot_uniform",
        embeddings_regularizer=regularizer,
        name="wide_weights",
    )(cells)
    if outputs == 1:
        return tf.reduce_sum(keras.layers.Flatten()(weights), axis=1, keepdims=True)
    # [batch, columns, outputs]: one logit per output, summed over the columns.
    return tf.reduce_sum(weights, axis=1)


def _z_score_bucket(key: str, dense_input: tf.Tensor, name: str) -> tuple[tf.Tensor, int]:
    """A number as a wide column: its bucket on ``Z_SCORE_BOUNDARIES``, and the buckets."""
    bucket = keras.layers.Discretization(bin_boundaries=list(Z_SCORE_BOUNDARIES), output_mode="int", name=name)(
        dense_input
    )
    return tf.cast(bucket, tf.int64), len(Z_SCORE_BOUNDARIES) + 1


def _crossed(
    pair: tuple[str, str], dense_inputs: dict, cat_inputs: dict, categorical_sizes: Mapping[str, int]
) -> tuple[tf.Tensor, int]:
    """One wide column from two inputs: (the cell index, the number of cells). A numeric
    input enters as its bucket on ``Z_SCORE_BOUNDARIES``."""
    parts = []
    for key in map(transformed_name, pair):
        if key in cat_inputs:
            parts.append((cat_inputs[key], int(categorical_sizes[key])))
        else:
            parts.append(_z_score_bucket(key, dense_inputs[key], f"{key}_bucket"))
    (first, first_size), (second, second_size) = parts
    return first * second_size + second, first_size * second_size


def build_keras_model(
    problem: Problem,
    categorical_sizes: Mapping[str, int],
    hparams: HParams = HParams(),
    steps_per_execution: int = 1,
    target_scale: TargetScale = TargetScale(),
    evaluation_shards: int = 0,
) -> keras.Model:
    """Builds and compiles the wide-and-deep model for ``problem``'s task.

    ``categorical_sizes`` maps every categorical transformed feature to its number of
    categories (vocabulary size + OOV buckets for vocabularies). ``steps_per_execution``
    steps run per call from the host (Keras calls step-level callbacks once per call).
    ``target_scale``: a regression target's scale (``TargetScale``). ``evaluation_shards``:
    under ParameterServerStrategy, Keras' exact evaluation in that many shards
    (``models/parameter_server.py``); 0, and under every other strategy, none.
    """
    missing = sorted(set(categorical_feature_keys(problem)) - set(categorical_sizes))
    if missing:
        raise ValueError(f"categorical_sizes lacks {missing}")
    dense_inputs = {k: keras.layers.Input(shape=(1,), name=k, dtype=tf.float32) for k in dense_feature_keys(problem)}
    cat_inputs = {k: keras.layers.Input(shape=(1,), name=k, dtype=tf.int64) for k in categorical_feature_keys(problem)}
    regularizer = keras.regularizers.L2(hparams.l2) if hparams.l2 else None
    deep_parts, wide_columns = _deep_parts_and_wide_columns(
        problem, dense_inputs, cat_inputs, categorical_sizes, hparams, regularizer
    )
    outputs = 1 if problem.task != Task.MULTICLASS else problem.num_classes
    deep_logit = _deep_logit(deep_parts, hparams, outputs)
    if wide_columns:
        wide_logit = _wide_logit(wide_columns, regularizer, outputs)
        logit = keras.layers.Add(name="logit")([wide_logit, deep_logit])
    else:
        logit = deep_logit
    output, loss, metrics = _head(problem, logit, target_scale)
    model = keras.Model(inputs={**dense_inputs, **cat_inputs}, outputs=output)
    _compile(model, hparams, loss, metrics, steps_per_execution, evaluation_shards)
    return model


def _deep_parts_and_wide_columns(
    problem: Problem,
    dense_inputs: dict,
    cat_inputs: dict,
    categorical_sizes: Mapping[str, int],
    hparams: HParams,
    regularizer,
) -> tuple[list[tf.Tensor], list[tuple[tf.Tensor, int]]]:
    """The deep part's inputs (the numbers, each category's embedding) and the wide part's
    columns, as (category index, number of categories): the categories, the numbers' z-score
    buckets (``hparams.wide_numbers``) and the spec's crosses."""
    deep_parts = list(dense_inputs.values())
    wide_columns = []
    for key, layer_input in cat_inputs.items():
        size = int(categorical_sizes[key])
        embedded = keras.layers.Embedding(
            size, _embedding_dim(size), embeddings_regularizer=regularizer, name=f"embed_{key}"
        )(layer_input)
        deep_parts.append(keras.layers.Flatten()(embedded))
        wide_columns.append((layer_input, size))
    if hparams.wide_numbers:
        for key, layer_input in dense_inputs.items():
            wide_columns.append(_z_score_bucket(key, layer_input, f"{key}_wide_bucket"))
    for pair in problem.features.crosses:
        wide_columns.append(_crossed(pair, dense_inputs, cat_inputs, categorical_sizes))
    return deep_parts, wide_columns


def _deep_logit(deep_parts: list[tf.Tensor], hparams: HParams, outputs: int) -> tf.Tensor:
    """The deep part: its inputs through the hidden layers to ``outputs`` logits."""
    deep = keras.layers.concatenate(deep_parts) if len(deep_parts) > 1 else deep_parts[0]
    # Named, so a warm start finds each layer again (models/warm_start.py).
    for index, units in enumerate(hparams.hidden_units):
        deep = keras.layers.Dense(units, activation="relu", name=f"hidden_{index}")(deep)
        if hparams.dropout:
            deep = keras.layers.Dropout(hparams.dropout)(deep)
    return keras.layers.Dense(outputs, name="deep_logit")(deep)


def _head(problem: Problem, logit: tf.Tensor, target_scale: TargetScale) -> tuple[tf.Tensor, keras.losses.Loss, list]:
    """The task's output layer on the logit, its loss and its metrics."""
    name = problem.label.name
    if problem.task == Task.BINARY:
        output = keras.layers.Activation("sigmoid", name=f"{name}_probability")(logit)
        metrics = [
            keras.metrics.AUC(name="auc", num_thresholds=AUC_THRESHOLDS),
            keras.metrics.BinaryAccuracy(name="accuracy"),
        ]
        return output, keras.losses.BinaryCrossentropy(), metrics
    if problem.task == Task.MULTICLASS:
        output = keras.layers.Activation("softmax", name=f"{name}_probabilities")(logit)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        return output, keras.losses.SparseCategoricalCrossentropy(), metrics
    output = keras.layers.Rescaling(target_scale.std, offset=target_scale.mean, name=name)(logit)
    metrics = [keras.metrics.RootMeanSquaredError(name="rmse"), keras.metrics.MeanAbsoluteError(name="mae")]
    return output, keras.losses.MeanSquaredError(), metrics


def _compile(
    model: keras.Model,
    hparams: HParams,
    loss: keras.losses.Loss,
    metrics: list,
    steps_per_execution: int,
    evaluation_shards: int,
) -> None:
    """Compiles ``model`` with Adam (weight averaging when ``hparams.ema_momentum``) and
    builds the optimizer's variables."""
    model.compile(
        optimizer=keras.optimizers.Adam(
            learning_rate=hparams.learning_rate,
            # fit() swaps the moving average into the weights at the end of training.
            use_ema=hparams.ema_momentum > 0,
            ema_momentum=hparams.ema_momentum or 0.99,
        ),
        loss=loss,
        metrics=metrics,
        steps_per_execution=steps_per_execution,
        pss_evaluation_shards=evaluation_shards,
    )
    # The optimizer's variables (Adam's moments, the moving averages) made now, under the
    # caller's strategy scope: made inside the first training step instead, they had
    # tf.function trace that whole step a second time, as it does after any step that
    # creates variables. Same variables, names and initial values (Keras' own build call,
    # in its name scope, moved out of the step).
    with tf.name_scope(model.optimizer.name):
        model.optimizer.build(model.trainable_variables)


def categorical_sizes(problem: Problem, tf_transform_output) -> dict[str, int]:
    """Category counts: fixed ones from the spec, vocabularies from Transform output
    (a ``tft.TFTransformOutput``)."""
    sizes = fixed_categorical_sizes(problem)
    for key in problem.features.categorical:
        sizes[transformed_name(key)] = (
            tf_transform_output.vocabulary_size_by_name(key) + problem.features.vocab_oov_buckets
        )
    return sizes
