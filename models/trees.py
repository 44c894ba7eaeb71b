"""The trees family: gradient-boosted trees (TensorFlow Decision Forests, TF-DF's defaults)
trained in the Trainer when a problem's spec says ``[model] family = "trees"``. They read
what the network reads and are exported with the same signatures; what they do not do
(strategies, warm start, Tuner, steps) and where they serve: docs/model.md.
"""

from __future__ import annotations

import time

import tensorflow as tf
import tensorflow_transform as tft
from absl import logging

from models import data, signatures
from models.model import categorical_feature_keys, fixed_categorical_sizes
from models.problem import Problem, Task

# Rows per batch read into YDF: the batch size changes nothing of the model, only how many
# calls the one pass over the data takes.
READ_BATCH_ROWS = 8192


def model_inputs(problem: Problem, tf_transform_output: tft.TFTransformOutput) -> dict[str, tf.TensorSpec]:
    """The transformed features the trees split on (every one but the label), [batch, 1] each."""
    spec = tf_transform_output.transformed_feature_spec()
    return {
        key: tf.TensorSpec([None, *feature.shape], feature.dtype)
        for key, feature in sorted(spec.items())
        if key != problem.label_key
    }


def build(problem: Problem, inputs: dict[str, tf.TensorSpec]):
    """TF-DF's gradient-boosted trees with its defaults, told which inputs are categories."""
    import tensorflow_decision_forests as tfdf

    categories = set(categorical_feature_keys(problem)) | set(fixed_categorical_sizes(problem))
    features = [
        tfdf.keras.FeatureUsage(
            key,
            tfdf.keras.FeatureSemantic.CATEGORICAL if key in categories else tfdf.keras.FeatureSemantic.NUMERICAL,
        )
        for key in inputs
    ]
    task = tfdf.keras.Task.REGRESSION if problem.task == Task.REGRESSION else tfdf.keras.Task.CLASSIFICATION
    # check_dataset: TF-DF looks for a batch operation among the dataset's last ones; the
    # in-memory split is batched earlier in its graph (models/data.py).
    return tfdf.keras.GradientBoostedTreesModel(
        task=task, features=features, exclude_non_specified_features=True, check_dataset=False, verbose=0
    )


def _one_pass(files, tf_transform_output, problem: Problem, in_memory_bytes: int) -> tf.data.Dataset:
    return data.input_fn(
        files,
        tf_transform_output,
        READ_BATCH_ROWS,
        training=False,
        drop_remainder=False,
        in_memory_max_bytes=in_memory_bytes,
        label_key=problem.label_key,
    )


def check_outputs(problem: Problem, predictions: tf.Tensor) -> None:
    """The forest's output must be what the network's head gives: one column (binary: the
    positive class's probability; regression: the value), or one per class in the spec's
    order. A class missing from the training split would leave TF-DF one column short."""
    expected = problem.num_classes if problem.task == Task.MULTICLASS else 1
    if predictions.shape[-1] != expected:
        raise ValueError(
            f"the trees predict {predictions.shape[-1]} column(s) where problem '{problem.name}' needs {expected}: "
            "every class of label.classes must occur in the training split (ExampleGen's train split)"
        )


def train_and_export(fn_args, problem: Problem, in_memory_bytes: int, serving_dir: str) -> dict:
    """Trains the forest on the training split, exports it with the network's signatures
    to ``serving_dir``, and returns what the training record says of it."""
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    inputs = model_inputs(problem, tf_transform_output)
    model = build(problem, inputs)
    train_ds = _one_pass(fn_args.train_files, tf_transform_output, problem, in_memory_bytes)
    started = time.monotonic()
    model.fit(train_ds)
    trained = time.monotonic() - started
    inspector = model.make_inspector()
    check_outputs(problem, model.predict(train_ds.take(1), verbose=0))
    signatures.export_serving_model(model, tf_transform_output, serving_dir, problem, inputs)
    logging.info("Trees: %d grown in %.1f s; serving model at %s", inspector.num_trees(), trained, serving_dir)
    return {
        "family": "trees",
        "trees": inspector.num_trees(),
        "trained_seconds": round(trained, 1),
        "training_logs": _last_log(inspector),
        "features": len(inputs),
    }


def _last_log(inspector) -> dict:
    """The held-out loss (and accuracy, for classes) where the early stopping ended."""
    logs = inspector.training_logs()
    if not logs:
        return {}
    last = logs[-1].evaluation
    return {
        key: float(value)
        for key, value in (("loss", last.loss), ("accuracy", last.accuracy), ("rmse", last.rmse))
        if value is not None
    }
