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
# At and above this many training rows a tenth is held out and the forest stops growing when
# the loss on it rises (YDF's default, as scikit-learn's HistGradientBoosting does above
# 10,000 rows). Below, a tenth is too few rows to stop on and too many to lose: the number of
# rounds is chosen by early stopping on each of ``FOLDS`` folds in turn, and the forest then
# grows that many rounds on every row, with trees shallower and leaves larger (a small split
# bears fewer, coarser splits: on caravan's 3,900 training rows of 84 categorical columns, depth 6
# scored an eval AUC of 0.73, depth 3 0.77).
HOLD_OUT_MIN_ROWS = 10_000
HOLD_OUT_RATIO = 0.1
FOLDS = 5
# The most rounds of boosting (one tree per round, one per class and round for several classes).
MAX_ROUNDS = 300
# YDF's defaults (depth 6, leaves of 5 rows or more) above the threshold; below it:
SMALL_MAX_DEPTH = 3
SMALL_MIN_EXAMPLES = 20
# The most categories a column keeps (the commonest; the others share the out-of-dictionary
# one): YDF splits a column of more than 300 categories (its ``arity_limit_for_random``) with
# its RANDOM algorithm, up to 5,000 random subsets tried per node, where CART sorts them once.
# On flights' two columns of 1,000 categories that made 5 trees take 13 s instead of 1.5 s; the
# same code ran under TF-DF's Keras API, whose forest took 1,123 s there.
MAX_CATEGORIES = 256


@dataclasses.dataclass(frozen=True)
class ForestSize:
    """What depends on the training split's size: the most rounds of boosting, the folds that
    choose the rounds (0: none, a tenth held out stops the growth), and the trees' depth and
    smallest leaf."""

    max_rounds: int
    folds: int
    max_depth: int
    min_examples: int
    # Numbers cut into 255 bins before training, as HistGradientBoosting always does: on a
    # large split the exact sorts are most of the training's time (docs/quality.md).
    binned: bool = False

    def learner_args(self, rounds: int | None = None) -> dict:
        """``GradientBoostedTreesLearner`` arguments: stopped early on a held-out tenth (or on
        the validation rows given to ``train``, which YDF then takes instead), or exactly
        ``rounds`` rounds on every row."""
        fixed = rounds is not None
        return {
            "num_trees": rounds if fixed else self.max_rounds,
            "validation_ratio": 0.0 if fixed else HOLD_OUT_RATIO,
            "early_stopping": "NONE" if fixed else "LOSS_INCREASE",
            "max_depth": self.max_depth,
            "min_examples": self.min_examples,
            "max_vocab_count": MAX_CATEGORIES,
            "discretize_numerical_columns": self.binned,
        }


def forest_size(train_rows: int) -> ForestSize:
    """The forest for ``train_rows`` training rows (``HOLD_OUT_MIN_ROWS`` says why)."""
    if train_rows >= HOLD_OUT_MIN_ROWS:
        return ForestSize(MAX_ROUNDS, folds=0, max_depth=6, min_examples=5, binned=True)
    return ForestSize(MAX_ROUNDS, folds=FOLDS, max_depth=SMALL_MAX_DEPTH, min_examples=SMALL_MIN_EXAMPLES)


def rounds_from_folds(best_rounds: list[int], folds: int) -> int:
    """The rounds to grow on every row, from those each fold's early stopping kept: their
    mean, scaled up for the fold's share of rows the full split adds (k / (k - 1))."""
    return max(1, int(round(np.mean(best_rounds) * folds / (folds - 1))))


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
    for features, label in data.untuned(dataset).as_numpy_iterator():
        batches.append(features)
        labels.append(label.reshape(-1))
    columns = {key: np.concatenate([b[key].reshape(-1) for b in batches]) for key in batches[0]}
    for key in categorical:
        columns[key] = columns[key].astype(np.bytes_)
    return columns, np.concatenate(labels)


def grow(
    problem: Problem, columns: dict[str, np.ndarray], labels: np.ndarray, categorical: list[str], size: ForestSize
):
    """YDF's gradient-boosted trees on the columns, the categorical ones told as such, sized by
    ``size``; and the rounds each fold's early stopping kept (empty without folds)."""
    import ydf

    # Quiet, which also keeps YDF from asking whether the sys.stdout of its import is a
    # terminal: a runner that redirected the output to a log it has since closed fails there.
    ydf.verbose(0)
    label = problem.label_key
    rows = {**columns, label: labels}
    # A feature given as NUMERICAL stays exact whatever discretize_numerical_columns says.
    number = ydf.Semantic.DISCRETIZED_NUMERICAL if size.binned else ydf.Semantic.NUMERICAL
    semantics = [(key, ydf.Semantic.CATEGORICAL if key in categorical else number) for key in columns]
    task = ydf.Task.REGRESSION if problem.task == Task.REGRESSION else ydf.Task.CLASSIFICATION

    def learner(rounds: int | None = None):
        args = size.learner_args(rounds)
        return ydf.GradientBoostedTreesLearner(
            label=label, task=task, features=semantics, num_threads=os.cpu_count(), **args
        )

    if not size.folds:
        return learner().train(rows, verbose=0), []
    best_rounds = []
    for held_out in np.array_split(np.random.default_rng(0).permutation(len(labels)), size.folds):
        kept = np.ones(len(labels), bool)
        kept[held_out] = False
        fold = learner().train(_take(rows, kept), valid=_take(rows, ~kept), verbose=0)
        best_rounds.append(fold.num_trees() // fold.num_trees_per_iteration())
    return learner(rounds_from_folds(best_rounds, size.folds)).train(rows, verbose=0), best_rounds


def _take(rows: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {key: values[mask] for key, values in rows.items()}


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
    """Grows the forest on the training split (``fn_args.train_files``, through
    ``fn_args.transform_output``), exports it with the network's signatures to
    ``serving_dir``, and returns what the training record says of it."""
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    return grow_and_export(fn_args.train_files, tf_transform_output, problem, in_memory_bytes, serving_dir)


def grow_and_export(files, tf_transform_output, problem: Problem, in_memory_bytes: int, serving_dir: str) -> dict:
    """``train_and_export`` given the Transform output itself."""
    inputs = model_inputs(problem, tf_transform_output)
    categorical = categorical_inputs(problem, inputs)
    columns, labels = read_split(files, tf_transform_output, problem, in_memory_bytes, categorical)
    size = forest_size(len(labels))
    started = time.monotonic()
    forest, rounds_by_fold = grow(problem, columns, labels, categorical, size)
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
        "rounds_by_fold": rounds_by_fold,
    }


def _held_out(forest) -> dict:
    """The held-out loss (and accuracy, for classes) where the early stopping ended; none
    when nothing was held out."""
    evaluation = forest.validation_evaluation()
    if evaluation is None:
        return {}
    found = {"loss": evaluation.loss, "accuracy": evaluation.accuracy, "rmse": evaluation.rmse}
    return {key: float(value) for key, value in found.items() if value is not None}
