"""Training hyperparameters, passed to ``run_fn`` through the Trainer's ``custom_config``.

A dataclass with defaults that reach the accuracy targets on the default data; the
pipeline configuration holds one and serialises it with ``to_custom_config``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from models.budget import MAX_ROWS_SEEN
from runtime import speedups

# Trainer custom_config keys beside the hyperparameters: start from the latest blessed
# model's weights (``fn_args.base_model``; models/warm_start.py), if that model is under
# this pipeline's root (``PIPELINE_ROOT_KEY``).
WARM_START_KEY = "warm_start"
PIPELINE_ROOT_KEY = "pipeline_root"
# Keys that travel in the Trainer's custom_config for others: these two, the problem spec
# (models/preprocessing.py's PROBLEM_KEY) and the speedups switch.
_TRAVELLING = frozenset({WARM_START_KEY, PIPELINE_ROOT_KEY, "problem", speedups.PARAMETER})


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The epoch-end callbacks' settings (``models/callbacks.py``), from ``HParams``."""

    early_stopping_patience: int
    reduce_lr_patience: int
    reduce_lr_factor: float
    min_learning_rate: float
    min_auc_gain: float
    keep_best_epoch: bool


@dataclasses.dataclass(frozen=True)
class HParams:
    """What ``run_fn`` needs beyond TFX's own ``train_steps``/``eval_steps``."""

    per_replica_batch_size: int = 256
    # The epochs a given step count (--train-steps) is cut into; without one, the data's
    # budget sets them (models/budget.py).
    epochs: int = 4
    learning_rate: float = 0.001
    hidden_units: tuple[int, ...] = (64, 32)
    dropout: float = 0.2
    # L2 penalty on the wide weights and embeddings: the crosses' cells overfit otherwise.
    l2: float = 1e-4
    # Every number also enters the wide part as its bucket of z-score (a weight per bucket: a
    # step function of the number, as a tree's splits make), beside its z-score in the deep part
    # (docs/quality.md measures it).
    wide_numbers: bool = True
    # Exponential moving average of the weights (0 disables): steadies the final model.
    ema_momentum: float = 0.99
    # "auto" (TPU_NAME, then TF_CONFIG, then mirrored), or force "tpu"/"multi_worker"/"mirrored".
    strategy: str = "auto"
    # Where BackupAndRestore keeps the training state so a killed Trainer resumes from its
    # last completed epoch. None: <model_run>/backup, which survives restarts of the same
    # execution (a worker or job retry); set a fixed location (shared by all workers, gs://
    # on a cluster) to resume across executions too.
    backup_dir: str | None = None
    # A backup is taken at the end of an epoch once this many seconds have passed since the
    # last one (0: every epoch). A backup costs about a quarter of a second on a small model
    # locally, more than a short epoch's training, and a restart repeats at most this much
    # training. With several workers every epoch is backed up: all must decide alike.
    backup_every_seconds: float = 30.0
    # The rows a split's passes read (all of it, or a uniform sample of what training reads),
    # when they come from at most this many MB of its ExampleGen files (raw examples), are
    # parsed and transformed once into memory, and batches are cut from them (reading,
    # parsing and transforming would otherwise hold the training steps back); more streams
    # from the files. 0: always stream; a limit below one batch's share of the files fails.
    # The files are gzipped: the transformed rows take about twice their size here, and
    # training holds its rows twice (a permuted copy per epoch) plus the eval rows.
    in_memory_max_mb: int = 256
    # Without --train-steps, the most rows training sees (steps x global batch), however large
    # the training split (models/budget.py; docs/performance.md measures it at 15M rows).
    max_rows_seen: int = MAX_ROWS_SEEN
    # The training schedule, decided at each epoch's end on the validation AUC
    # (models/callbacks.py; docs/model.md has the measurements behind these defaults).
    # Epochs without a gain of min_auc_gain before training stops (0: never stops early).
    early_stopping_patience: int = 2
    # Epochs without a gain before the learning rate is multiplied by reduce_lr_factor
    # (0: never), down to min_learning_rate.
    reduce_lr_patience: int = 1
    reduce_lr_factor: float = 0.5
    min_learning_rate: float = 1e-5
    min_auc_gain: float = 1e-4
    # Keep a copy of the best epoch's weights (backed up with the rest) and end with them
    # when a later epoch validated worse.
    keep_best_epoch: bool = True
    # A problem whose spec says ``[model] family = "choose"`` has the Trainer compare both
    # families on at most this many rows of the training split (every k-th row of a larger
    # one: the choice's cost stays bounded) and train the better (models/choice.py; 0: never
    # choose, train the network).
    choice_rows: int = 100_000

    def __post_init__(self) -> None:
        if self.per_replica_batch_size <= 0:
            raise ValueError(f"per_replica_batch_size must be positive, got {self.per_replica_batch_size}")
        if self.epochs <= 0:
            raise ValueError(f"epochs must be positive, got {self.epochs}")
        if not self.hidden_units or any(u <= 0 for u in self.hidden_units):
            raise ValueError(f"hidden_units must be positive sizes, got {self.hidden_units}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not 0.0 <= self.ema_momentum < 1.0:
            raise ValueError(f"ema_momentum must be in [0, 1), got {self.ema_momentum}")
        if self.in_memory_max_mb < 0:
            raise ValueError(f"in_memory_max_mb must be >= 0 (0: always stream the files), got {self.in_memory_max_mb}")
        if self.max_rows_seen < self.per_replica_batch_size:
            raise ValueError(
                f"max_rows_seen must be at least one batch ({self.per_replica_batch_size} rows): a budget of "
                f"zero steps, got {self.max_rows_seen}"
            )
        if self.early_stopping_patience < 0 or self.reduce_lr_patience < 0:
            raise ValueError(
                "early_stopping_patience and reduce_lr_patience are epochs (0 turns each off), got "
                f"{self.early_stopping_patience} and {self.reduce_lr_patience}"
            )
        if not 0.0 < self.reduce_lr_factor < 1.0:
            raise ValueError(f"reduce_lr_factor must be in (0, 1), got {self.reduce_lr_factor}")
        if not 0.0 <= self.min_learning_rate <= self.learning_rate:
            raise ValueError(
                f"min_learning_rate must be in [0, learning_rate={self.learning_rate}], got {self.min_learning_rate}"
            )
        if self.min_auc_gain < 0:
            raise ValueError(f"min_auc_gain must be >= 0, got {self.min_auc_gain}")
        if self.choice_rows < 0:
            raise ValueError(f"choice_rows must be >= 0 (0: never choose), got {self.choice_rows}")
        if self.backup_every_seconds < 0:
            raise ValueError(f"backup_every_seconds must be >= 0 (0: every epoch), got {self.backup_every_seconds}")
        if self.backup_dir is not None and (not isinstance(self.backup_dir, str) or not self.backup_dir.strip()):
            raise ValueError(f"backup_dir must be a non-empty path or None, got {self.backup_dir!r}")

    def ema_momentum_for(self, train_steps: int) -> float:
        """The moving average only helps once it has forgotten the random initial weights:
        kept when momentum ** steps <= 5%, off (0) for shorter trainings."""
        if self.ema_momentum and self.ema_momentum**train_steps <= 0.05:
            return self.ema_momentum
        return 0.0

    def schedule(self) -> Schedule:
        """The epoch-end callbacks' settings (``models.callbacks``)."""
        return Schedule(**{field.name: getattr(self, field.name) for field in dataclasses.fields(Schedule)})

    def to_custom_config(self) -> dict[str, Any]:
        """A JSON-serialisable dict for ``Trainer(custom_config=...)``."""
        config = dataclasses.asdict(self)
        config["hidden_units"] = list(self.hidden_units)
        return config

    @classmethod
    def from_custom_config(cls, custom_config: Mapping[str, Any] | None) -> HParams:
        """Reads the ``custom_config`` dict back; unknown keys are an error, not ignored."""
        custom_config = dict(custom_config or {})
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in custom_config.items() if k in known}
        # Keys other components own (e.g. Vertex AI training args) live beside ours.
        # The problem spec travels beside them too (models/preprocessing.py's PROBLEM_KEY).
        unknown = sorted(
            k for k in custom_config if k not in known and not k.startswith("ai_platform") and k not in _TRAVELLING
        )
        if unknown:
            raise ValueError(f"Unknown Trainer custom_config keys {unknown}; known keys: {sorted(known)}")
        if "hidden_units" in values:
            values["hidden_units"] = tuple(int(u) for u in values["hidden_units"])
        return cls(**values)
