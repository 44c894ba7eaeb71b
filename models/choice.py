"""The ``choose`` family: the Trainer measures which family suits the problem, then trains it.

The training split's rows (at most ``HParams.choice_rows`` of them, every k-th row of a larger
split) are cut into a fit part and a validation part (every fifth row); the network and the
trees are each trained on the fit part and scored on the validation part with the problem's
blessing metric, and the better one is then trained on the whole training split. The eval
split, whose metric the run reports and blesses on, plays no part in the choice (docs/model.md,
"Two model families").
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from collections.abc import Sequence

import numpy as np

from models.problem import BLESSING_METRICS, ModelFamily, Problem, Task

# Every VALIDATION_EVERY-th row of the training split is the validation part.
VALIDATION_EVERY = 5
# The families in the order a tie is broken: the network first.
FAMILIES = (ModelFamily.NETWORK, ModelFamily.TREES)
# Rows per call of a trial model's signatures while scoring.
SCORE_BATCH_ROWS = 4096
# What a user runs to choose once, on one machine, and keep the family in the spec.
CHOOSE_COMMAND = "python -m authoring.choose_model --problem DIR"


@dataclasses.dataclass(frozen=True)
class Trial:
    """One family trained on the fit part: its metric on the validation part, and the seconds
    its training, export and scoring took."""

    family: ModelFamily
    metric: float
    seconds: float


@dataclasses.dataclass(frozen=True)
class Choice:
    """What the Trainer trains and why: the trials when it chose, else the reason it did not."""

    family: ModelFamily
    metric: str
    reason: str = ""
    trials: tuple[Trial, ...] = ()
    fit_rows: int = 0
    validation_rows: int = 0
    # The training split's rows the sample was drawn from (0: not sampled, every row used).
    sampled_from: int = 0

    @property
    def chose(self) -> bool:
        return bool(self.trials)

    def to_record(self) -> dict:
        record = dataclasses.asdict(self)
        record["family"] = self.family.value
        record["trials"] = [{**dataclasses.asdict(t), "family": t.family.value} for t in self.trials]
        return record

    @classmethod
    def from_record(cls, record: dict) -> Choice:
        trials = tuple(Trial(ModelFamily(t["family"]), t["metric"], t["seconds"]) for t in record.get("trials", ()))
        fields = {f.name for f in dataclasses.fields(cls)} - {"family", "trials"}
        return cls(
            family=ModelFamily(record["family"]), trials=trials, **{k: v for k, v in record.items() if k in fields}
        )

    def describe(self) -> str:
        """One line for the run's summary and report."""
        if self.chose:
            figures = ", ".join(f"{t.family.value} {t.metric:.4f}" for t in self.trials)
            cost = sum(t.seconds for t in self.trials)
            rows = f"{self.fit_rows + self.validation_rows:,}"
            sample = f"its {rows} rows"
            if self.sampled_from:
                sample = f"a sample of {rows} of its {self.sampled_from:,} rows"
            return (
                f"the {self.family.value}, chosen by {self.metric} on a validation part of the training split "
                f"({self.validation_rows:,} of {sample}, not the eval split): {figures}; choosing took {cost:.0f} s"
            )
        return f"the {self.family.value} ({self.reason})"


def reason_not_to_choose(train_rows: int, choice_rows: int, single_process: bool, tuned: bool) -> str:
    """Why the Trainer trains the network without choosing ("" when it chooses)."""
    if choice_rows == 0:
        return "choice_rows is 0: the choice is off"
    if tuned:
        return "a Tuner chose the network's hyperparameters"
    if not single_process:
        return (
            "the choice runs in one process and this Trainer trains across several; "
            f"{CHOOSE_COMMAND} chooses once on one machine and writes the family into problem.toml"
        )
    if min(train_rows, choice_rows) < 2 * VALIDATION_EVERY:
        return f"{train_rows} training rows are too few to hold a validation part out"
    return ""


def not_chosen(problem: Problem, reason: str) -> Choice:
    """The network, trained without a choice for ``reason``."""
    return Choice(ModelFamily.NETWORK, problem.blessing.metric, reason=reason)


def sample_step(train_rows: int, choice_rows: int) -> int:
    """Every how many rows of the training split the choice reads one: 1 up to ``choice_rows``."""
    return max(1, math.ceil(train_rows / choice_rows))


def split_training_rows(train_files: Sequence[str], folder: str, step: int = 1) -> tuple[str, str, int, int]:
    """Writes every ``step``-th row of the training split into a fit part and a validation part
    (every ``VALIDATION_EVERY``-th of those) under ``folder``: their paths and row counts."""
    import tensorflow as tf

    from models.data import raw_records

    os.makedirs(folder, exist_ok=True)
    fit_path, validation_path = os.path.join(folder, "fit.gz"), os.path.join(folder, "validation.gz")
    counts = [0, 0]
    with (
        tf.io.TFRecordWriter(fit_path, options="GZIP") as fit,
        tf.io.TFRecordWriter(validation_path, options="GZIP") as validation,
    ):
        records = raw_records(train_files).as_numpy_iterator()
        for index, record in enumerate(itertools.islice(records, 0, None, step)):
            held_out = index % VALIDATION_EVERY == VALIDATION_EVERY - 1
            (validation if held_out else fit).write(record)
            counts[held_out] += 1
    return fit_path, validation_path, counts[0], counts[1]


def metric_value(problem: Problem, labels: np.ndarray, predictions: np.ndarray) -> float:
    """The problem's blessing metric of ``predictions`` (what the serving signature answers:
    the positive class's probability, every class's probabilities, or the value) against
    ``labels`` (the label signature's: 0/1, the class's index, or the value)."""
    metric = problem.blessing.metric
    labels = np.asarray(labels).reshape(len(labels), -1)[:, 0]
    predictions = np.asarray(predictions, dtype=np.float64).reshape(len(labels), -1)
    if metric == "auc":
        return _auc(labels.astype(bool), predictions[:, 0])
    if metric == "accuracy":
        chosen = predictions.argmax(axis=1) if problem.task == Task.MULTICLASS else predictions[:, 0] > 0.5
        return float(np.mean(chosen == labels.astype(np.int64)))
    errors = predictions[:, 0] - labels.astype(np.float64)
    if metric == "rmse":
        return float(np.sqrt(np.mean(errors**2)))
    if metric == "mae":
        return float(np.mean(np.abs(errors)))
    raise ValueError(f"no way to measure {metric!r}; known: {sorted(set().union(*BLESSING_METRICS.values()))}")


def _auc(positive: np.ndarray, scores: np.ndarray) -> float:
    """The area under the ROC curve: the chance a positive outscores a negative (ties half)."""
    count = int(positive.sum())
    if count in (0, len(positive)):
        raise ValueError("the validation part holds one class only: no AUC to compare the families by")
    _, inverse, ties = np.unique(scores, return_inverse=True, return_counts=True)
    # Each distinct score's mean rank (1-based), given to every row holding it.
    ends = np.cumsum(ties)
    ranks = (ends - (ties - 1) / 2.0)[inverse]
    return float((ranks[positive].sum() - count * (count + 1) / 2.0) / (count * (len(positive) - count)))


def score(serving_dir: str, validation_file: str, problem: Problem) -> float:
    """The blessing metric of the model exported at ``serving_dir`` on the validation rows,
    through the signatures serving and the Evaluator use."""
    import tensorflow as tf

    from models import signatures
    from models.data import raw_records

    model = tf.saved_model.load(serving_dir)
    serve = model.signatures[signatures.SERVING_SIGNATURE]
    label = model.signatures[signatures.LABEL_SIGNATURE]
    key = signatures.prediction_key(problem)
    labels, predictions = [], []
    for batch in raw_records([validation_file]).batch(SCORE_BATCH_ROWS):
        predictions.append(serve(examples=batch)[key].numpy())
        (value,) = label(examples=batch).values()
        labels.append(value.numpy())
    return metric_value(problem, np.concatenate(labels), np.concatenate(predictions))


def better(problem: Problem, trials: Sequence[Trial]) -> Trial:
    """The trial with the better metric (higher for AUC and accuracy, lower for RMSE and MAE);
    the network on a tie."""
    sign = 1 if problem.higher_is_better else -1
    return max(trials, key=lambda t: (sign * t.metric, -FAMILIES.index(t.family)))
