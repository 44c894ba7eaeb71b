"""Keras' BackupAndRestore, backing up an epoch's end only once ``every_seconds`` have
passed since the last backup (or since training began): on short epochs a backup costs more
than the training (docs/model.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import tf_keras as keras


class IntervalBackup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore whose epoch-end backups are ``every_seconds`` apart at least (0:
    every epoch, as Keras does). Processes that train one model together must all back up
    at the same epochs: give them 0."""

    def __init__(self, backup_dir: str, every_seconds: float, clock: Callable[[], float] = time.monotonic):
        super().__init__(backup_dir)
        if every_seconds < 0:
            raise ValueError(f"every_seconds must be >= 0, got {every_seconds}")
        self.every_seconds = every_seconds
        self._clock = clock
        self._last = clock()
        self.backed_up: list[int] = []

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._last = self._clock()

    def on_epoch_end(self, epoch, logs=None):
        now = self._clock()
        if now - self._last >= self.every_seconds:
            super().on_epoch_end(epoch, logs)
            self.backed_up.append(epoch)
            self._last = self._clock()
