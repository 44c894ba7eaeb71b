"""IntervalBackup on a tiny Keras model: which epochs it backs up for a given interval, and
that a run stopped after a skipped backup resumes from the last epoch backed up."""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras

from models.backup import IntervalBackup

EPOCH_SECONDS = 4.0


class _Clock:
    """Time that passes only as epochs begin: each epoch takes ``EPOCH_SECONDS``."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Epochs(keras.callbacks.Callback):
    def __init__(self, clock: _Clock, stop_at: int | None = None):
        super().__init__()
        self.clock, self.stop_at, self.begun = clock, stop_at, []

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.stop_at:
            raise KeyboardInterrupt(f"stopped as epoch {epoch} begins")
        self.begun.append(epoch)
        self.clock.now += EPOCH_SECONDS


def _fit(backup_dir: str, every_seconds: float, stop_at: int | None = None) -> tuple[IntervalBackup, _Epochs]:
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer="adam", loss="mse")
    clock = _Clock()
    backup, epochs = IntervalBackup(backup_dir, every_seconds, clock), _Epochs(clock, stop_at)
    x = np.ones((8, 2), np.float32)
    try:
        # The epoch counter first, so its time has passed when the backup looks at the clock.
        model.fit(x, x[:, :1], epochs=6, verbose=0, callbacks=[epochs, backup])
    except KeyboardInterrupt:
        pass
    return backup, epochs


@pytest.mark.parametrize(("every_seconds", "expected"), [(0, [0, 1, 2, 3, 4, 5]), (10, [2, 5]), (30, [])])
def test_epochs_are_backed_up_once_the_interval_has_passed(tmp_path, every_seconds, expected):
    backup, _ = _fit(str(tmp_path / "backup"), every_seconds)
    assert backup.backed_up == expected
    # Deleted once training completed.
    assert not [p for p in (tmp_path / "backup").rglob("*") if p.is_file()]


def test_a_stopped_run_resumes_after_the_last_epoch_backed_up(tmp_path):
    # Backed up at epoch 2 (12 s), not at 3 (16 s): stopped as epoch 4 begins.
    first, begun = _fit(str(tmp_path / "backup"), 10, stop_at=4)
    assert first.backed_up == [2] and begun.begun == [0, 1, 2, 3]
    _, resumed = _fit(str(tmp_path / "backup"), 10)
    assert resumed.begun == [3, 4, 5]


def test_a_negative_interval_is_refused(tmp_path):
    with pytest.raises(ValueError, match="every_seconds"):
        IntervalBackup(str(tmp_path), -1)
