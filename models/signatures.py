"""Export of the trained model with the signatures serving and evaluation need:
``serving_default`` (raw ``tf.Example``s in), ``serving_raw`` (each raw column as CSV text,
by feature name), ``transform_features`` and ``label`` (docs/model.md, "Export").
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from models import preprocessing
from models.problem import Problem, Task, is_feature_name

SERVING_SIGNATURE = "serving_default"
RAW_SIGNATURE = "serving_raw"
TRANSFORM_SIGNATURE = "transform_features"
LABEL_SIGNATURE = "label"
# Binary: the positive class's probability, and the class (0/1) under the name of the label.
PROBABILITY_KEY = "probability"
# Multi-class: every class's probability (in ``label.classes`` order), and the class's name.
PROBABILITIES_KEY = "probabilities"
DECISION_THRESHOLD = 0.5


def prediction_key(problem: Problem) -> str:
    """The output the Evaluator judges: the probability (binary), the probabilities
    (multi-class), the predicted value under the label's name (regression)."""
    return {Task.BINARY: PROBABILITY_KEY, Task.MULTICLASS: PROBABILITIES_KEY}.get(problem.task, problem.label.name)


def prediction_outputs(problem: Problem) -> tuple[str, ...]:
    """Every output of the serving signatures, for the README, the report and clients."""
    if problem.task == Task.REGRESSION:
        return (problem.label.name,)
    return (prediction_key(problem), problem.label.name)


def _outputs(problem: Problem, prediction: tf.Tensor) -> dict[str, tf.Tensor]:
    if problem.task == Task.BINARY:
        return {
            PROBABILITY_KEY: prediction,
            problem.label.name: tf.cast(prediction > DECISION_THRESHOLD, tf.int64),
        }
    if problem.task == Task.MULTICLASS:
        names = tf.constant(list(problem.label.classes))
        return {PROBABILITIES_KEY: prediction, problem.label.name: tf.gather(names, tf.argmax(prediction, axis=1))}
    return {problem.label.name: prediction}


def check_input_names(columns: list[str], problem: Problem) -> None:
    """Refuses raw columns TensorFlow cannot keep as signature input names (a name that is
    no graph node name fails the export after training; 'a.b' would silently become
    'a_b'), naming the ``[columns]`` entries that fix it."""
    if bad := [c for c in columns if not is_feature_name(c)]:
        from models.problem import feature_names

        fixes = ", ".join(f"{name} = {column!r}" for column, name in feature_names(bad).items())
        raise ValueError(
            f"column(s) {', '.join(repr(c) for c in bad)} of problem '{problem.name}' cannot name the serving "
            "signature's inputs (letters, digits and '_', starting with a letter; no Python keyword). Map them to "
            f"feature names in problem.toml's [columns] table ({fixes}), or drop them from the data and its contract."
        )


def make_signatures(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    problem: Problem,
    inputs: Mapping[str, tf.TensorSpec] | None = None,
) -> dict:
    """Builds the exported signatures; the Transform layer is tracked on the model.
    ``inputs``: the transformed features the model takes, by name (default: the functional
    model's own inputs; a subclassed model such as the trees has none to read)."""
    model.tft_layer = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()
    # Columns only the label is computed from are unknown at serving time (outputs depending
    # on them are pruned), and unused ones are never read: a request leaves both out.
    serving_spec = {key: spec for key, spec in raw_spec.items() if key not in problem.not_served_columns}
    label_spec = {key: raw_spec[key] for key in problem.label.sources}
    if inputs is None:
        inputs = {key: tf.TensorSpec(t.shape, t.dtype) for key, t in zip(model.input_names, model.inputs, strict=True)}
    transformed_spec = {key: tf.TensorSpec(spec.shape, spec.dtype, name=key) for key, spec in inputs.items()}
    model_inputs = list(transformed_spec)

    # Both serving signatures call this one function: traced inline in each, the model's
    # graph was traced, saved and loaded twice (docs/model.md, Export).
    @tf.function(input_signature=[transformed_spec], autograph=False)
    def predict(transformed):
        return _outputs(problem, model(transformed))

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")], autograph=False)
    def serve_tf_examples(serialized):
        transformed = model.tft_layer(tf.io.parse_example(serialized, serving_spec))
        return predict({k: transformed[k] for k in model_inputs})

    raw_columns = sorted(serving_spec)
    check_input_names(raw_columns, problem)

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
        return preprocessing.label(tf.io.parse_example(serialized, label_spec), problem)

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


def export_serving_model(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    export_dir: str,
    problem: Problem,
    inputs: Mapping[str, tf.TensorSpec] | None = None,
) -> None:
    """Saves ``model`` as a SavedModel at ``export_dir`` with its signatures.

    Without Keras' traced call functions of every layer (``save_traces=False``): they were
    half of the export's time and are only needed to reload custom layers that have no
    config. Every layer here is a built-in one, so ``keras.models.load_model``
    still rebuilds the model from the layers' configs; serving and TFMA use the signatures.
    """
    signatures = make_signatures(model, tf_transform_output, problem, inputs)
    model.save(export_dir, save_format="tf", signatures=signatures, save_traces=False)
