"""The Keras model: wide (a weight per category and per coordinate-cross cell) and deep
(embeddings plus numeric z-scores), one sigmoid output for "big tipper".

It takes the transformed features (``<name>_xf``, each [batch, 1]) and knows nothing of
TFX; the category counts come in as a dict so it can be built and tested on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import tensorflow as tf
import tf_keras as keras

from models import features
from models.hparams import HParams
from runtime import speedups

# Every process that builds, trains or exports this model traces Keras code.
speedups.install(speedups.Stage.MODEL)

# Pickup and drop-off coordinate buckets crossed into one grid cell each.
COORDINATE_CROSSES: tuple[tuple[str, str], ...] = (
    ("pickup_latitude", "pickup_longitude"),
    ("dropoff_latitude", "dropoff_longitude"),
)
# Whether a card payer tips over 20% depends sharply and non-monotonically on the fare, so
# the wide part also gets payment type crossed with buckets of the z-scored log fare.
FARE_BUCKET_BOUNDARIES: tuple[float, ...] = tuple(-2.5 + 0.25 * i for i in range(21))


def dense_feature_keys() -> list[str]:
    return [features.transformed_name(k) for k in features.LOG_NUMERIC_FEATURES + features.NUMERIC_FEATURES]


def categorical_feature_keys() -> list[str]:
    raw = features.VOCAB_FEATURES + tuple(features.RANGE_CATEGORICAL_FEATURES) + features.BUCKET_FEATURES
    return [features.transformed_name(k) for k in raw]


def fixed_categorical_sizes() -> dict[str, int]:
    """Category counts known without looking at data (ranges and coordinate buckets)."""
    sizes = {features.transformed_name(k): features.categorical_size(k) for k in features.RANGE_CATEGORICAL_FEATURES}
    sizes.update({features.transformed_name(k): features.bucket_size() for k in features.BUCKET_FEATURES})
    return sizes


def _embedding_dim(num_categories: int) -> int:
    return max(2, min(16, int(round(2 * math.pow(num_categories, 0.25)))))


def _wide_logit(columns: list[tuple[tf.Tensor, int]], regularizer) -> tf.Tensor:
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
    weights = keras.layers.Embedding(
        offset, 1, embeddings_initializer="glorot_uniform", embeddings_regularizer=regularizer, name="wide_weights"
    )(keras.layers.concatenate(shifted, name="wide_cells"))
    return tf.reduce_sum(keras.layers.Flatten()(weights), axis=1, keepdims=True)


def build_keras_model(
    categorical_sizes: Mapping[str, int], hparams: HParams = HParams(), steps_per_execution: int = 1
) -> keras.Model:
    """Builds and compiles the wide-and-deep classifier.

    ``categorical_sizes`` maps every categorical transformed feature to its number of
    categories (vocabulary size + OOV buckets for vocabularies). ``steps_per_execution``
    steps run per call from the host (Keras calls step-level callbacks once per call).
    """
    missing = sorted(set(categorical_feature_keys()) - set(categorical_sizes))
    if missing:
        raise ValueError(f"categorical_sizes lacks {missing}")

    dense_inputs = {k: keras.layers.Input(shape=(1,), name=k, dtype=tf.float32) for k in dense_feature_keys()}
    cat_inputs = {k: keras.layers.Input(shape=(1,), name=k, dtype=tf.int64) for k in categorical_feature_keys()}

    regularizer = keras.regularizers.L2(hparams.l2) if hparams.l2 else None
    deep_parts = list(dense_inputs.values())
    # The wide part's columns: (category index, number of categories).
    wide_columns = []
    for key, layer_input in cat_inputs.items():
        size = int(categorical_sizes[key])
        embedded = keras.layers.Embedding(
            size, _embedding_dim(size), embeddings_regularizer=regularizer, name=f"embed_{key}"
        )(layer_input)
        deep_parts.append(keras.layers.Flatten()(embedded))
        wide_columns.append((layer_input, size))
    for lat, lon in COORDINATE_CROSSES:
        lat_key, lon_key = features.transformed_name(lat), features.transformed_name(lon)
        lon_size = int(categorical_sizes[lon_key])
        wide_columns.append(
            (cat_inputs[lat_key] * lon_size + cat_inputs[lon_key], int(categorical_sizes[lat_key]) * lon_size)
        )

    pay_key, fare_key = features.transformed_name("payment_type"), features.transformed_name("fare")
    fare_buckets = len(FARE_BUCKET_BOUNDARIES) + 1
    fare_bucket = keras.layers.Discretization(
        bin_boundaries=list(FARE_BUCKET_BOUNDARIES), output_mode="int", name="fare_bucket"
    )(dense_inputs[fare_key])
    pay_fare = cat_inputs[pay_key] * fare_buckets + tf.cast(fare_bucket, tf.int64)
    wide_columns.append((pay_fare, int(categorical_sizes[pay_key]) * fare_buckets))

    deep = keras.layers.concatenate(deep_parts)
    for units in hparams.hidden_units:
        deep = keras.layers.Dense(units, activation="relu")(deep)
        if hparams.dropout:
            deep = keras.layers.Dropout(hparams.dropout)(deep)
    wide_logit = _wide_logit(wide_columns, regularizer)
    deep_logit = keras.layers.Dense(1, name="deep_logit")(deep)
    logit = keras.layers.Add(name="logit")([wide_logit, deep_logit])
    output = keras.layers.Activation("sigmoid", name="big_tipper_probability")(logit)

    model = keras.Model(inputs={**dense_inputs, **cat_inputs}, outputs=output)
    model.compile(
        optimizer=keras.optimizers.Adam(
            learning_rate=hparams.learning_rate,
            # fit() swaps the moving average into the weights at the end of training.
            use_ema=hparams.ema_momentum > 0,
            ema_momentum=hparams.ema_momentum or 0.99,
        ),
        loss=keras.losses.BinaryCrossentropy(),
        metrics=[keras.metrics.AUC(name="auc"), keras.metrics.BinaryAccuracy(name="accuracy")],
        steps_per_execution=steps_per_execution,
    )
    # The optimizer's variables (Adam's moments, the moving averages) made now, under the
    # caller's strategy scope: made inside the first training step instead, they had
    # tf.function trace that whole step a second time, as it does after any step that
    # creates variables. Same variables, names and initial values (Keras' own build call,
    # in its name scope, moved out of the step).
    with tf.name_scope(model.optimizer.name):
        model.optimizer.build(model.trainable_variables)
    return model


def categorical_sizes(tf_transform_output) -> dict[str, int]:
    """Category counts: fixed ones from ``features``, vocabularies from Transform output
    (a ``tft.TFTransformOutput``)."""
    sizes = fixed_categorical_sizes()
    for key in features.VOCAB_FEATURES:
        sizes[features.transformed_name(key)] = (
            tf_transform_output.vocabulary_size_by_name(key) + features.VOCAB_OOV_BUCKETS
        )
    return sizes
