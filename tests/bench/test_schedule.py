"""The schedule benchmark's harness, without training: its configurations are valid
hyperparameters, and the table is built from the runs it is given."""

from __future__ import annotations

from bench import schedule
from models.hparams import HParams


def test_every_configuration_is_valid_and_off_turns_everything_off():
    for steps, overrides in schedule.CONFIGS.values():
        assert steps >= HParams(**overrides).epochs
    off = HParams(**schedule.CONFIGS["off"][1])
    assert (off.early_stopping_patience, off.reduce_lr_patience, off.keep_best_epoch) == (0, 0, False)
    assert schedule.CONFIGS["defaults"][1] == {}


def test_the_table_shows_medians_ranges_and_what_the_schedule_did():
    runs = {
        "defaults": [
            {"seconds": 20.0, "auc": 0.94, "last_epoch": 3, "stopped_early_at_epoch": None, "best_epoch": 3},
            {"seconds": 30.0, "auc": 0.95, "last_epoch": 2, "stopped_early_at_epoch": 2, "best_epoch": 0},
            {"seconds": 25.0, "auc": 0.93, "last_epoch": 3, "stopped_early_at_epoch": None, "best_epoch": 2},
        ]
    }
    (row,) = schedule.summarise(runs)
    assert row["median_seconds"] == 25.0 and row["median_auc"] == 0.94
    assert (row["min_auc"], row["max_auc"]) == (0.93, 0.95)
    assert row["epochs_run"] == [4, 3, 4] and row["early_stops"] == 1 and row["best_epochs"] == [3, 0, 2]
    table = schedule.markdown([row])
    assert "| defaults | 25.0 | 0.9400 | 0.9300-0.9500 | [4, 3, 4] | 1/3 | [3, 0, 2] |" in table
