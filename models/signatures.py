"""Export of the trained model with the signatures serving and evaluation need.

- ``serving_default``: serialized raw ``tf.Example``s in (no label needed; the
  Transform graph is inside), ``probability`` and ``big_tipper`` (0/1) out.
- ``transform_features``: serialized raw examples in, transformed features out
  (label included).
- ``serving_raw``: the raw columns by name, each a string as it reads in the CSV (``""``
  for a missing value), ``probability`` and ``big_tipper`` out: what a JSON request to
  an endpoint carries (``{"instances": [{"fare": "12.5", "company": "", ...}]}``), so a
  client needs no protobuf library. Strings, because a JSON request cannot leave out a
  named input nor say "missing" for a number; numbers are parsed inside the graph.
  Same Transform graph and model as ``serving_default``, so the same probabilities.
- ``label``: serialized raw examples in, the label out, from ``preprocessing.label``
  (the function ``preprocessing_fn`` uses) without the rest of the Transform graph. The
  Evaluator gets its labels from it: through ``transform_features`` it would run the
  whole Transform graph a second time for every example, beside ``serving_default``.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from models import features, preprocessing

SERVING_SIGNATURE = "serving_default"
RAW_SIGNATURE = "serving_raw"
TRANSFORM_SIGNATURE = "transform_features"
LABEL_SIGNATURE = "label"
PREDICTION_KEY = "probability"
CLASS_KEY = "big_tipper"
DECISION_THRESHOLD = 0.5


def make_signatures(model: keras.Model, tf_transform_output: tft.TFTransformOutput) -> dict:
    """Builds the exported signatures; the Transform layer is tracked on the model."""
    model.tft_layer = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()
    # The label's source is unknown at serving time; outputs depending on it are pruned.
    serving_spec = {key: spec for key, spec in raw_spec.items() if key != features.TIPS}
    label_spec = {key: raw_spec[key] for key in (features.TIPS, features.FARE)}
    transformed_spec = {
        key: tf.TensorSpec(tensor.shape, tensor.dtype, name=key)
        for key, tensor in zip(model.input_names, model.inputs, strict=True)
    }
    model_inputs = list(transformed_spec)

    # Both serving signatures call this one function: traced inline in each, the model's
    # graph was traced, saved and loaded twice (docs/model.md, Export).
    @tf.function(input_signature=[transformed_spec], autograph=False)
    def predict(transformed):
        probability = model(transformed)
        return {
            PREDICTION_KEY: probability,
            CLASS_KEY: tf.cast(probability > DECISION_THRESHOLD, tf.int64),
        }

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")], autograph=False)
    def serve_tf_examples(serialized):
        transformed = model.tft_layer(tf.io.parse_example(serialized, serving_spec))
        return predict({k: transformed[k] for k in model_inputs})

    raw_columns = sorted(serving_spec)

    @tf.function(
        input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name=key) for key in raw_columns], autograph=False
    )
    def serve_raw_columns(*columns):
        raw = {key: _from_strings(key, text, serving_spec[key]) for key, text in zip(raw_columns, columns, strict=True)}
        transformed = model.tft_layer(raw)
        return predict({k: transformed[k] for k in model_inputs})

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")], autograph=False)
    def transform_features(serialized):
        return model.tft_layer(tf.io.parse_example(serialized, raw_spec))

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")], autograph=False)
    def label(serialized):
        return preprocessing.label(tf.io.parse_example(serialized, label_spec))

    return {
        SERVING_SIGNATURE: serve_tf_examples,
        RAW_SIGNATURE: serve_raw_columns,
        TRANSFORM_SIGNATURE: transform_features,
        LABEL_SIGNATURE: label,
    }


def _from_strings(key: str, text: tf.Tensor, spec) -> tf.Tensor | tf.SparseTensor:
    """One column of CSV text as ``tf.io.parse_example`` would give it from a tf.Example:
    dense for a required column (a missing value fails the request, naming the column),
    sparse for a column that may be missing."""
    present = tf.strings.length(text) > 0
    values = text if spec.dtype == tf.string else tf.strings.to_number(tf.where(present, text, "0"), spec.dtype)
    if isinstance(spec, tf.io.FixedLenFeature):
        check = tf.debugging.assert_equal(
            tf.reduce_all(present), True, message=f"column {key!r} is required and was empty"
        )
        with tf.control_dependencies([check]):
            return tf.reshape(values, [-1, *spec.shape])
    rows = tf.where(present)[:, 0]
    return tf.SparseTensor(
        indices=tf.stack([rows, tf.zeros_like(rows)], axis=1),
        values=tf.gather(values, rows),
        dense_shape=tf.stack([tf.shape(text, out_type=tf.int64)[0], tf.constant(1, tf.int64)]),
    )


def export_serving_model(model: keras.Model, tf_transform_output: tft.TFTransformOutput, export_dir: str) -> None:
    """Saves ``model`` as a SavedModel at ``export_dir`` with its signatures.

    Without Keras' traced call functions of every layer (``save_traces=False``): they were
    half of the export's time and are only needed to reload custom layers that have no
    config. Every layer here is a built-in one, so ``keras.models.load_model``
    still rebuilds the model from the layers' configs; serving and TFMA use the signatures.
    """
    model.save(export_dir, save_format="tf", signatures=make_signatures(model, tf_transform_output), save_traces=False)
