"""The trees family: gradient-boosted trees grown by YDF (``ydf.GradientBoostedTreesLearner``)
when a problem's spec says ``[model] family = "trees"``, sized to the training split
(``forest_size``). They read what the network reads, vocabulary and bucket ids as categories,
and are exported through YDF's TensorFlow function (TF-DF's inference ops) with the network's
signatures; what they do not do (strategies, warm start, Tuner, steps) and where they serve:
docs/model.md.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from absl import logging

from models import data, signatures
from models.model import categorical_feature_keys, fixed_categorical_sizes
from models.problem import Problem, Task

# Rows per batch read from the Transform output: the batch size changes nothing of the
# model, only how many steps the one pass over the data takes.
READ_BATCH_ROWS = 8192
# Below this many training rows nothing is held out: the forest grows on every row, as many
# trees as ``forest_size`` gives (scikit-learn's HistGradientBoosting stops early only above
# 10,000 rows, for the same reason: a tenth of a small split is too few rows to stop on, and
# too many to lose).
HOLD_OUT_MIN_ROWS = 10_000
# Held out for early stopping above it (YDF's default), and the most trees grown there.
HOLD_OUT_RATIO = 0.1
MAX_TREES = 500
# Trees per boosting round below the threshold: a square root of the rows, within bounds.
MIN_SMALL_TREES = 50
MAX_SMALL_TREES = 300


@dataclasses.dataclass(frozen=True)
class ForestSize:
    """What depends on the training split's size: the rounds of boosting, the share of
    rows held out to stop early on (0: none, all rounds are grown), and the learning rate."""

    num_trees: int
    validation_ratio: float
    shrinkage: float = 0.1

    def learner_args(self) -> dict:
        """The matching ``GradientBoostedTreesLearner`` arguments."""
        early = "LOSS_INCREASE" if self.validation_ratio > 0 else "NONE"
        return {
            "num_trees": self.num_trees,
            "validation_ratio": self.validation_ratio,
            "early_stopping": early,
            "shrinkage": self.shrinkage,
        }


def forest_size(train_rows: int) -> ForestSize:
    """The forest for ``train_rows`` training rows: above ``HOLD_OUT_MIN_ROWS``, up to
    ``MAX_TREES`` rounds stopped early on a held-out tenth; below, no hold-out and a round
    count growing as the rows' square root (more rows bear more rounds before overfitting)."""
    if train_rows >= HOLD_OUT_MIN_ROWS:
        return ForestSize(num_trees=MAX_TREES, validation_ratio=HOLD_OUT_RATIO)
    rounds = int(round(2 * np.sqrt(max(train_rows, 1))))
    return ForestSize(num_trees=min(MAX_SMALL_TREES, max(MIN_SMALL_TREES, rounds)), validation_ratio=0.0)


def model_inputs(problem: Problem, tf_transform_output: tft.TFTransformOutput) -> dict[str, tf.TensorSpec]:
    """The transformed features the trees split on (every one but the label), [batch, 1] each."""
    spec = tf_transform_output.transformed_feature_spec()
    return {
        key: tf.TensorSpec([None, *feature.shape], feature.dtype)
        for key, feature in sorted(spec.items())
        if key != problem.label_key
    }


def categorical_inputs(problem: Problem, inputs: dict[str, tf.TensorSpec]) -> list[str]:
    """The inputs that are ids (vocabulary, integer range, bucket): split on as categories."""
    categories = set(categorical_feature_keys(problem)) | set(fixed_categorical_sizes(problem))
    return sorted(key for key in inputs if key in categories)


def read_split(
    files, tf_transform_output: tft.TFTransformOutput, problem: Problem, in_memory_bytes: int, categorical: list[str]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One pass over the split through the Transform graph: each feature as one column
    (categories as their ids' text, which YDF and the exported function both look up in the
    forest's dictionary), and the label."""
    dataset = data.input_fn(
        files,
        tf_transform_output,
        READ_BATCH_ROWS,
        training=False,
        drop_remainder=False,
        in_memory_max_bytes=in_memory_bytes,
        label_key=problem.label_key,
    )
    batches, labels = [], []
    for features, label in data.one_pass(dataset).as_numpy_iterator():
        batches.append(features)
        labels.append(label.reshape(-1))
    columns = {key: np.concatenate([b[key].reshape(-1) for b in batches]) for key in batches[0]}
    for key in categorical:
        columns[key] = columns[key].astype(np.bytes_)
    return columns, np.concatenate(labels)


def grow(
    problem: Problem, columns: dict[str, np.ndarray], labels: np.ndarray, categorical: list[str], size: ForestSize
):
    """YDF's gradient-boosted trees on the columns, the categorical ones told as such."""
    import ydf

    semantics = [(key, ydf.Semantic.CATEGORICAL if key in categorical else ydf.Semantic.NUMERICAL) for key in columns]
    task = ydf.Task.REGRESSION if problem.task == Task.REGRESSION else ydf.Task.CLASSIFICATION
    label = problem.label_key
    learner = ydf.GradientBoostedTreesLearner(
        label=label, task=task, features=semantics, **size.learner_args(), num_threads=os.cpu_count()
    )
    return learner.train({**columns, label: labels}, verbose=0)


def class_columns(problem: Problem, label_classes: list[str]) -> list[int]:
    """Where each class of the network's head (binary: the positive class; multi-class: each
    of ``label.classes`` in order) is among the forest's outputs, which YDF orders by its own
    dictionary of the label's ids. A class missing from the training split is refused."""
    wanted = ["1"] if problem.task == Task.BINARY else [str(i) for i in range(problem.num_classes)]
    if missing := [int(c) for c in wanted if c not in label_classes]:
        names = problem.label.classes if problem.task == Task.MULTICLASS else ["the positive class"]
        raise ValueError(
            f"the trees never saw {', '.join(repr(names[i % len(names)]) for i in missing)} of problem "
            f"'{problem.name}' ({len(label_classes)} class(es) learnt): "
            "every class of label.classes must occur in the training split (ExampleGen's train split)"
        )
    return [label_classes.index(c) for c in wanted]


class ForestModule(tf.Module):
    """The forest as the network's head answers: from the transformed features ([batch, 1]
    each), one column (binary: the positive class's probability; regression: the value) or
    one per class in ``label.classes`` order."""

    def __init__(self, problem: Problem, forest, categorical: list[str], temp_dir: str):
        super().__init__()
        self.forest = forest.to_tensorflow_function(temp_dir=temp_dir, squeeze_binary_classification=False)
        self._categorical = frozenset(categorical)
        self._inputs = forest.input_feature_names()
        self._columns = None if problem.task == Task.REGRESSION else class_columns(problem, forest.label_classes())

    def __call__(self, transformed: dict[str, tf.Tensor]) -> tf.Tensor:
        features = {}
        for key in self._inputs:
            column = tf.reshape(transformed[key], [-1])
            if key not in self._categorical:
                features[key] = tf.cast(column, tf.float32)
            else:
                features[key] = column if column.dtype == tf.string else tf.strings.as_string(column)
        predictions = self.forest(features)
        if self._columns is None:
            return tf.reshape(predictions, [-1, 1])
        return tf.gather(predictions, self._columns, axis=1)


def check_outputs(problem: Problem, predictions: tf.Tensor) -> None:
    """The forest's output must be what the network's head gives: one column (binary: the
    positive class's probability; regression: the value), or one per class in the spec's
    order."""
    expected = problem.num_classes if problem.task == Task.MULTICLASS else 1
    if predictions.shape[-1] != expected:
        raise ValueError(
            f"the trees predict {predictions.shape[-1]} column(s) where problem '{problem.name}' needs {expected}: "
            "every class of label.classes must occur in the training split (ExampleGen's train split)"
        )


def export(module: ForestModule, tf_transform_output, serving_dir: str, problem: Problem, inputs) -> None:
    """Saves the forest with the network's four signatures (``models/signatures.py``) as a
    plain SavedModel: the signatures are the same functions, the module holds no Keras."""
    served = signatures.make_signatures(module, tf_transform_output, problem, inputs)
    tf.saved_model.save(module, serving_dir, signatures=served)


def train_and_export(fn_args, problem: Problem, in_memory_bytes: int, serving_dir: str) -> dict:
    """Grows the forest on the training split, exports it with the network's signatures
    to ``serving_dir``, and returns what the training record says of it."""
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    inputs = model_inputs(problem, tf_transform_output)
    categorical = categorical_inputs(problem, inputs)
    columns, labels = read_split(fn_args.train_files, tf_transform_output, problem, in_memory_bytes, categorical)
    size = forest_size(len(labels))
    started = time.monotonic()
    forest = grow(problem, columns, labels, categorical, size)
    trained = time.monotonic() - started
    with tempfile.TemporaryDirectory() as temp_dir:
        module = ForestModule(problem, forest, categorical, temp_dir)
        check_outputs(problem, module({key: tf.zeros([1, 1], spec.dtype) for key, spec in inputs.items()}))
        export(module, tf_transform_output, serving_dir, problem, inputs)
    logging.info("Trees: %d grown in %.1f s; serving model at %s", forest.num_trees(), trained, serving_dir)
    return {
        "family": "trees",
        "trees": forest.num_trees(),
        "trained_seconds": round(trained, 1),
        "training_logs": _held_out(forest),
        "features": len(inputs),
        "rows": len(labels),
        "size": dataclasses.asdict(size),
    }


def _held_out(forest) -> dict:
    """The held-out loss (and accuracy, for classes) where the early stopping ended; none
    when nothing was held out."""
    evaluation = forest.validation_evaluation()
    if evaluation is None:
        return {}
    found = {"loss": evaluation.loss, "accuracy": evaluation.accuracy, "rmse": evaluation.rmse}
    return {key: float(value) for key, value in found.items() if value is not None}
