"""The training schedule's callbacks: early stopping on the validation metric
(``model.monitored_metric``), a lower learning rate on a plateau, and the best epoch's
weights kept. Keras' own callbacks, but their decision state lives in a variable that
BackupAndRestore saves, so a restarted Trainer continues the same schedule (docs/model.md).
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf
import tf_keras as keras
from absl import logging

from models.hparams import Schedule

# The validation metric the schedule watches unless told (the binary models').
MONITOR, MODE = "val_auc", "max"
# Names of the schedule's state variable and of the best epoch's weights on the optimizer
# (which the checkpoints track).
STATE_ATTRIBUTE = "training_schedule_state"
BEST_WEIGHTS_ATTRIBUTE = "training_schedule_best_weights"


class _Saved:
    """Keeps the named attributes of a Keras callback in ``state[offset:offset + n]``.

    Slot 0 of the state counts completed epochs: 0 means nothing saved yet (a fresh run),
    so the callback keeps the values its own ``on_train_begin`` set.
    """

    saved_attributes: tuple[str, ...] = ()

    def bind(self, state: tf.Variable, offset: int) -> int:
        self._state, self._offset = state, offset
        return offset + len(self.saved_attributes)

    def _load(self) -> None:
        values = self._state.numpy()
        if values[0] > 0:
            for index, name in enumerate(self.saved_attributes):
                setattr(self, name, _from_slot(values[self._offset + index]))

    def _store(self) -> dict[int, float]:
        return {self._offset + i: float(getattr(self, name)) for i, name in enumerate(self.saved_attributes)}


def _from_slot(value: float) -> float | int:
    return int(value) if math.isfinite(value) and float(value).is_integer() else float(value)


class EarlyStopping(_Saved, keras.callbacks.EarlyStopping):
    """Keras' EarlyStopping, resumable; the best weights come back through ``BestEpoch``."""

    saved_attributes = ("wait", "best", "best_epoch", "stopped_epoch")


class ReduceLROnPlateau(_Saved, keras.callbacks.ReduceLROnPlateau):
    """Keras' ReduceLROnPlateau, resumable (the learning rate itself is an optimizer
    variable, which the backup already holds), and like EarlyStopping idle for the first
    ``start_from_epoch`` epochs."""

    saved_attributes = ("wait", "best", "cooldown_counter")

    def __init__(self, start_from_epoch: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.start_from_epoch = start_from_epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch >= self.start_from_epoch:
            super().on_epoch_end(epoch, logs)


class BestEpoch(_Saved, keras.callbacks.Callback):
    """Keeps the best epoch's weights, which at the end of training replace the final
    weights when a later epoch validated worse.

    The copy lives in variables beside the model's (``attach_state``), tracked by the
    optimizer like the schedule's state: every backup holds the copy, the state that names
    its epoch and the weights together, so a resumed Trainer restores all three at once
    whichever epochs were backed up, and keeping a new best is an in-memory copy instead
    of a file written (about a fifth of a second each on a small model).

    The final weights include the optimizer's moving average, applied when ``fit`` ends;
    validation saw the raw weights, so those are the ones compared and kept.
    """

    saved_attributes = ("best", "best_epoch", "last_epoch")

    def __init__(self, min_auc_gain: float, monitor: str = MONITOR, mode: str = MODE):
        super().__init__()
        self.monitor, self.min_auc_gain = monitor, min_auc_gain
        self.sign = 1.0 if mode == "max" else -1.0
        self.best, self.best_epoch, self.last_epoch = -self.sign * np.inf, -1, -1
        self._kept: list[tf.Variable] = []

    def set_model(self, model):
        super().set_model(model)
        kept = getattr(model.optimizer, BEST_WEIGHTS_ATTRIBUTE, None)
        if kept is None or len(kept) != len(model.weights):
            raise ValueError("keep_best_epoch needs the copy attach_state(model, keep_best_epoch=True) makes")
        self._kept = list(kept)

    def on_epoch_end(self, epoch, logs=None):
        self.last_epoch = epoch
        current = (logs or {}).get(self.monitor)
        if current is None:
            logging.warning(
                "%s is not in the epoch's logs (%s): the best epoch is not tracked", self.monitor, sorted(logs)
            )
            return
        if self.best_epoch < 0 or self.sign * (current - self.best) > self.min_auc_gain:
            self.best, self.best_epoch = float(current), epoch
            for kept, weight in zip(self._kept, self.model.weights, strict=True):
                kept.assign(weight)

    def on_train_end(self, logs=None):
        if 0 <= self.best_epoch < self.last_epoch:
            for weight, kept in zip(self.model.weights, self._kept, strict=True):
                weight.assign(kept)
            logging.info(
                "Restored the weights of epoch %d (%s %.5f): the last epoch, %d, validated worse",
                self.best_epoch,
                self.monitor,
                self.best,
                self.last_epoch,
            )


class SaveSchedule(keras.callbacks.Callback):
    """Loads the schedule callbacks' state before they decide, and stores it after, each
    epoch: it wraps them so a backup taken at this epoch's end includes their decisions."""

    def __init__(self, state: tf.Variable, schedule: list[_Saved]):
        super().__init__()
        self._state, self._schedule = state, schedule

    def set_model(self, model):
        super().set_model(model)
        for callback in self._schedule:
            callback.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        for callback in self._schedule:
            callback.set_params(params)

    def on_train_begin(self, logs=None):
        for callback in self._schedule:
            callback.on_train_begin(logs)

    def on_epoch_end(self, epoch, logs=None):
        values = self._state.numpy().copy()
        for callback in self._schedule:
            callback._load()
            callback.on_epoch_end(epoch, logs)
            for index, value in callback._store().items():
                values[index] = value
        values[0] = epoch + 1
        self._state.assign(values)

    def on_train_end(self, logs=None):
        for callback in self._schedule:
            callback.on_train_end(logs)


def attach_state(model: keras.Model, keep_best_epoch: bool = True) -> tf.Variable:
    """The schedule's state variable, and with ``keep_best_epoch`` a copy of the model's
    weights for ``BestEpoch``, made attributes of the optimizer so every checkpoint of the
    model (BackupAndRestore's included) holds them. Create them under the strategy's scope,
    like the model."""
    # Slot 0 counts completed epochs, then each callback's attributes.
    size = 1 + sum(len(cls.saved_attributes) for cls in (EarlyStopping, ReduceLROnPlateau, BestEpoch))
    state = tf.Variable(tf.zeros([size], tf.float32), trainable=False, name=STATE_ATTRIBUTE)
    setattr(model.optimizer, STATE_ATTRIBUTE, state)
    if keep_best_epoch:
        kept = [
            tf.Variable(tf.zeros(w.shape, w.dtype), trainable=False, name=f"best_epoch_{i}")
            for i, w in enumerate(model.weights)
        ]
        setattr(model.optimizer, BEST_WEIGHTS_ATTRIBUTE, kept)
    return state


def schedule_callbacks(
    schedule: Schedule,
    state: tf.Variable,
    monitored: tuple[str, str] = (MONITOR, MODE),
    warmup_epochs: int = 0,
) -> list[keras.callbacks.Callback]:
    """The callbacks ``schedule`` asks for, wrapped so their state is saved; [] if none.
    ``monitored``: the validation metric they watch and its mode ("max" or "min").
    ``warmup_epochs``: epochs before early stopping and the lower rate start to watch (a
    metric that has not begun to improve yet, as on a rare class's first epochs, is no
    plateau)."""
    monitor, mode = monitored
    chosen: list[_Saved] = []
    if schedule.early_stopping_patience:
        chosen.append(
            EarlyStopping(
                monitor=monitor,
                mode=mode,
                patience=schedule.early_stopping_patience,
                min_delta=schedule.min_auc_gain,
                start_from_epoch=warmup_epochs,
            )
        )
    if schedule.reduce_lr_patience:
        chosen.append(
            ReduceLROnPlateau(
                start_from_epoch=warmup_epochs,
                monitor=monitor,
                mode=mode,
                patience=schedule.reduce_lr_patience,
                factor=schedule.reduce_lr_factor,
                min_delta=schedule.min_auc_gain,
                min_lr=schedule.min_learning_rate,
            )
        )
    if schedule.keep_best_epoch:
        chosen.append(BestEpoch(schedule.min_auc_gain, monitor, mode))
    offset = 1
    for callback in chosen:
        offset = callback.bind(state, offset)
    return [SaveSchedule(state, chosen)] if chosen else []


def outcome(callbacks: list[keras.callbacks.Callback], history: keras.callbacks.History) -> dict:
    """What the schedule did, for the training record: the last epoch run, where training
    stopped early, the best epoch kept, and the final learning rate."""
    record: dict = {"last_epoch": history.epoch[-1] if history.epoch else None}
    for wrapper in callbacks:
        for callback in getattr(wrapper, "_schedule", []):
            if isinstance(callback, EarlyStopping):
                record["stopped_early_at_epoch"] = int(callback.stopped_epoch) or None
            if isinstance(callback, BestEpoch):
                record["best_epoch"] = int(callback.best_epoch)
                record["best_" + callback.monitor] = float(callback.best)
                record["monitored"] = callback.monitor
    record["final_learning_rate"] = float(keras.backend.get_value(history.model.optimizer.learning_rate))
    return record
