"""How long the Trainer trains: a step count when one is given (``--train-steps``), else a
budget of rows seen from the training split's size, within which the epoch-end schedule
(``models/callbacks.py``) stops training. docs/model.md ("How long it trains") has the
rules and the measurements behind the constants. Pure Python: the Trainer, the Tuner and
the scaffold all ask the same function.
"""

from __future__ import annotations

import dataclasses
import math

MIN_ROWS_SEEN = 200_000
MAX_ROWS_SEEN = 1_000_000
MAX_PASSES = 20
MIN_EPOCH_STEPS = 100
MAX_EPOCH_PASSES = 20
MIN_EPOCHS = 4
WARMUP_SHARE = 4


@dataclasses.dataclass(frozen=True)
class Budget:
    """At most ``epochs`` epochs of ``steps_per_epoch`` global batches, and why."""

    epochs: int
    steps_per_epoch: int
    reason: str
    # The training split's rows, when the budget came from them.
    train_rows: int | None = None
    # The most rows its steps read (steps x global batch).
    rows_seen: int | None = None
    # The cap on rows seen, when it bound the budget.
    capped_at: int | None = None

    @property
    def max_steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    @property
    def warmup_epochs(self) -> int:
        """Epochs before the schedule may stop training or lower the rate: the first quarter
        of the budget (a metric that has not begun to improve is no plateau)."""
        return self.epochs // WARMUP_SHARE

    def to_record(self) -> dict:
        """What the training record (``training.json``) and the run report show."""
        return {
            "max_epochs": self.epochs,
            "steps_per_epoch": self.steps_per_epoch,
            "max_steps": self.max_steps,
            "warmup_epochs": self.warmup_epochs,
            "train_rows": self.train_rows,
            "rows_seen": self.rows_seen,
            "capped_at": self.capped_at,
            "reason": self.reason,
        }


def from_steps(train_steps: int, epochs: int, global_batch: int | None = None) -> Budget:
    """``train_steps`` steps of one global batch in ``epochs`` epochs (at most one epoch per
    step, and fewer than ``epochs`` extra steps)."""
    if not train_steps or train_steps < 1:
        raise ValueError(
            f"--train-steps must be a positive number of steps, got {train_steps!r}: omit it for a budget from the data"
        )
    epochs = max(1, min(epochs, train_steps))
    steps = math.ceil(train_steps / epochs)
    rows_seen = epochs * steps * global_batch if global_batch else None
    return Budget(epochs, steps, f"{train_steps} steps, as given (--train-steps)", rows_seen=rows_seen)


def from_data(train_rows: int, global_batch: int, max_rows_seen: int = MAX_ROWS_SEEN) -> Budget:
    """The budget for a training split of ``train_rows`` rows cut into ``global_batch`` rows
    per step, seeing at most ``max_rows_seen`` rows."""
    if train_rows < 1:
        raise ValueError(
            f"the training split has {train_rows} rows: there is nothing to train on (check the data's split)"
        )
    if global_batch < 1:
        raise ValueError(f"the global batch must be positive, got {global_batch}")
    if max_rows_seen < global_batch:
        raise ValueError(
            f"max_rows_seen={max_rows_seen} is less than one global batch ({global_batch} rows): a budget of zero "
            f"steps; set --hparam max_rows_seen to at least {global_batch}"
        )
    rows_seen = min(max(MIN_ROWS_SEEN, MAX_PASSES * train_rows), max_rows_seen)
    max_steps = math.ceil(rows_seen / global_batch)
    pass_steps = math.ceil(train_rows / global_batch)
    epoch_steps = min(
        max(pass_steps, min(MIN_EPOCH_STEPS, MAX_EPOCH_PASSES * pass_steps)), math.ceil(max_steps / MIN_EPOCHS)
    )
    epochs = math.ceil(max_steps / epoch_steps)
    passes = rows_seen / train_rows
    passes_text = f"{passes:,.0f} passes" if passes >= 10 else f"{passes:.2g} pass{'es' if passes != 1 else ''}"
    capped = rows_seen == max_rows_seen and rows_seen < MAX_PASSES * train_rows
    if capped:
        why = f"large data, so at most {max_rows_seen:,} rows seen ({passes_text}; --hparam max_rows_seen)"
    elif rows_seen == MIN_ROWS_SEEN:
        why = f"small data, so at least {MIN_ROWS_SEEN:,} rows seen ({passes_text})"
    else:
        why = f"{MAX_PASSES} passes"
    return Budget(
        epochs,
        epoch_steps,
        f"until the validation metric stops improving, at most {epochs} epochs of {epoch_steps} steps "
        f"({train_rows:,} training rows; {why})",
        train_rows,
        rows_seen=epochs * epoch_steps * global_batch,
        capped_at=max_rows_seen if capped else None,
    )


def choose(
    train_steps: int | None, epochs: int, global_batch: int, count_train_rows, max_rows_seen: int = MAX_ROWS_SEEN
) -> Budget:
    """The given step count, or (``train_steps`` None) the data's budget, counting the
    training rows with ``count_train_rows()`` only then."""
    if train_steps is not None:
        return from_steps(train_steps, epochs, global_batch)
    return from_data(count_train_rows(), global_batch, max_rows_seen)


def rows_read(training_record: dict) -> int | None:
    """The rows a training record's (``run_fn``'s ``training.json``) epochs read: epochs run
    x steps per epoch x global batch. None when the record does not tell."""
    per_epoch = training_record.get("steps_per_epoch", 0) * training_record.get("global_batch", 0)
    if not per_epoch or training_record.get("last_epoch") is None:
        return None
    return (training_record["last_epoch"] + 1) * per_epoch


def data_seen(training_record: dict) -> str | None:
    """What a training record says of the data the model saw: the rows its epochs read
    against the training split's, and, where the cap on rows seen bound the budget, the
    setting that sees more. None when the record does not tell."""
    budget = training_record.get("budget") or {}
    rows, seen = budget.get("train_rows"), rows_read(training_record)
    if not rows or not seen:
        return None
    if seen < rows:
        text = f"the model saw {seen:,} of the {rows:,} training rows ({seen / rows:.0%})"
    else:
        text = f"the model saw {seen:,} rows, {seen / rows:.2g} passes over the {rows:,} training rows"
    if budget.get("capped_at"):
        text += f" (capped at {budget['capped_at']:,}); --hparam max_rows_seen={rows} would show it every row once"
    return text
