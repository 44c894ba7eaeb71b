from __future__ import annotations

import json

import pytest

from models.hparams import HParams


def test_round_trips_through_custom_config_json():
    hparams = HParams(per_replica_batch_size=64, hidden_units=(16, 8), strategy="mirrored")
    assert HParams.from_custom_config(json.loads(json.dumps(hparams.to_custom_config()))) == hparams


def test_empty_custom_config_gives_defaults():
    assert HParams.from_custom_config(None) == HParams()


def test_unknown_keys_are_rejected_with_the_known_ones():
    with pytest.raises(ValueError, match=r"Unknown Trainer custom_config keys \['batchsize'\].*per_replica_batch_size"):
        HParams.from_custom_config({"batchsize": 3})


@pytest.mark.parametrize(
    "bad",
    [
        ({"epochs": 0}, "epochs"),
        ({"per_replica_batch_size": -1}, "per_replica_batch_size"),
        ({"hidden_units": ()}, "hidden_units"),
        ({"dropout": 1.0}, "dropout"),
        ({"ema_momentum": 1.0}, "ema_momentum"),
        ({"early_stopping_patience": -1}, "0 turns each off"),
        ({"reduce_lr_patience": -2}, "0 turns each off"),
        ({"reduce_lr_factor": 1.0}, "reduce_lr_factor"),
        ({"min_learning_rate": 0.01}, "min_learning_rate"),
        ({"min_auc_gain": -0.1}, "min_auc_gain"),
        ({"in_memory_max_mb": -1}, r"in_memory_max_mb must be >= 0 \(0: always stream the files\)"),
        ({"max_rows_seen": 0}, r"max_rows_seen must be at least one batch \(256 rows\): a budget of zero steps"),
        ({"max_rows_seen": 10, "per_replica_batch_size": 32}, r"at least one batch \(32 rows\)"),
    ],
)
def test_invalid_values_are_rejected_naming_the_field(bad):
    values, named = bad
    with pytest.raises(ValueError, match=named):
        HParams(**values)


def test_the_schedule_carries_the_callback_settings():
    schedule = HParams(early_stopping_patience=3, reduce_lr_patience=0, keep_best_epoch=False).schedule()
    assert (schedule.early_stopping_patience, schedule.reduce_lr_patience, schedule.keep_best_epoch) == (3, 0, False)
    assert schedule.min_auc_gain == HParams().min_auc_gain


def test_weight_averaging_is_kept_for_long_trainings_only():
    hparams = HParams(ema_momentum=0.99)
    assert hparams.ema_momentum_for(400) == 0.99  # 0.99**400 = 1.8% of the initial weights left
    assert hparams.ema_momentum_for(40) == 0.0  # 0.99**40 = 67%: the average would be mostly init
    assert HParams(ema_momentum=0.0).ema_momentum_for(10_000) == 0.0


def test_backup_dir_round_trips_and_rejects_empty():
    hparams = HParams(backup_dir="gs://bucket/backup")
    assert HParams.from_custom_config(json.loads(json.dumps(hparams.to_custom_config()))) == hparams
    with pytest.raises(ValueError, match="backup_dir"):
        HParams(backup_dir=" ")
