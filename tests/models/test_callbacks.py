"""The training schedule's callbacks on a tiny Keras model, fed the validation AUCs an
epoch would log: their decisions, that none works per step, and that their state survives
a checkpoint (what BackupAndRestore saves) into a new run."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import callbacks
from models.hparams import HParams

# Never gains (0.5 AUC per epoch is impossible): every epoch after the first is a plateau.
PLATEAU = HParams(early_stopping_patience=2, reduce_lr_patience=1, min_auc_gain=0.5)


def _model() -> keras.Model:
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _start(
    model: keras.Model, hparams: HParams, warmup_epochs: int = 0
) -> tuple[keras.callbacks.Callback, tf.Variable]:
    state = callbacks.attach_state(model, hparams.keep_best_epoch)
    (wrapper,) = callbacks.schedule_callbacks(hparams.schedule(), state, warmup_epochs=warmup_epochs)
    wrapper.set_model(model)
    wrapper.set_params({"epochs": 4, "steps": 1, "verbose": 0})
    wrapper.on_train_begin()
    return wrapper, state


def _epoch(model: keras.Model, wrapper, epoch: int, val_auc: float) -> float:
    """An epoch whose training moved the weights to ``epoch + 1``, validated at ``val_auc``:
    the learning rate the next epoch will use."""
    model.layers[0].kernel.assign(np.full((2, 1), epoch + 1.0, np.float32))
    wrapper.on_epoch_end(epoch, {"loss": 0.1, "val_auc": val_auc})
    return float(model.optimizer.learning_rate.numpy())


def test_nothing_runs_per_step():
    """ParameterServerStrategy refuses per-step callbacks; on a TPU they would stop the host."""
    wrapper, _ = _start(_model(), HParams())
    assert not wrapper._implements_train_batch_hooks()
    assert not wrapper._implements_test_batch_hooks()
    assert not wrapper._implements_predict_batch_hooks()
    assert all(not c._implements_train_batch_hooks() for c in wrapper._schedule)


def test_during_the_warm_up_a_plateau_neither_stops_nor_lowers_the_rate():
    model = _model()
    wrapper, _ = _start(model, PLATEAU, warmup_epochs=3)
    rates = [_epoch(model, wrapper, epoch, auc) for epoch, auc in enumerate([0.40, 0.33, 0.38])]
    assert rates == pytest.approx([0.001] * 3) and not model.stop_training
    # After it, the same plateau lowers the rate, then stops.
    rates = [_epoch(model, wrapper, epoch, 0.5) for epoch in (3, 4, 5)]
    assert rates == pytest.approx([0.001, 0.0005, 0.00025]) and model.stop_training


def test_a_plateau_lowers_the_rate_stops_and_ends_with_the_best_epochs_weights():
    model = _model()
    wrapper, _ = _start(model, PLATEAU)
    rates = []
    for epoch, auc in enumerate([0.80, 0.90, 0.85]):
        rates.append(_epoch(model, wrapper, epoch, auc))
        if model.stop_training:
            break
    # Epoch 0 is the best (nothing later gained 0.5); the rate halves after each plateau epoch.
    assert rates == pytest.approx([0.001, 0.0005, 0.00025])
    assert model.stop_training and epoch == 2
    wrapper.on_train_end()
    np.testing.assert_array_equal(model.layers[0].kernel.numpy(), np.full((2, 1), 1.0))
    history = keras.callbacks.History()
    history.set_model(model)
    history.on_train_begin()
    for epoch in range(len(rates)):
        history.on_epoch_end(epoch, {})
    record = callbacks.outcome([wrapper], history)
    assert record["stopped_early_at_epoch"] == 2 and record["best_epoch"] == 0
    assert record["best_val_auc"] == pytest.approx(0.80)
    assert record["last_epoch"] == 2 and record["final_learning_rate"] == pytest.approx(0.00025)


def test_the_last_epoch_stays_when_it_is_the_best():
    model = _model()
    wrapper, _ = _start(model, HParams())
    for epoch, auc in enumerate([0.80, 0.85, 0.90]):
        _epoch(model, wrapper, epoch, auc)
    assert not model.stop_training
    wrapper.on_train_end()
    # Not reloaded: the final weights (with the optimizer's moving average, in a real fit) stand.
    np.testing.assert_array_equal(model.layers[0].kernel.numpy(), np.full((2, 1), 3.0))


def test_a_restarted_run_continues_the_same_schedule(tmp_path):
    """Run 1 is interrupted after epoch 1; its checkpoint (model and optimizer, as
    BackupAndRestore writes it) is restored into run 2, which then decides as run 1 would."""
    uninterrupted = _model()
    wrapper, _ = _start(uninterrupted, PLATEAU)
    expected = [
        (_epoch(uninterrupted, wrapper, e, auc), uninterrupted.stop_training)
        for e, auc in enumerate([0.80, 0.90, 0.85])
    ]

    first = _model()
    wrapper, _ = _start(first, PLATEAU)
    got = [(_epoch(first, wrapper, e, auc), first.stop_training) for e, auc in enumerate([0.80, 0.90])]
    saved = tf.train.Checkpoint(model=first).save(str(tmp_path / "backup" / "ckpt"))

    second = _model()
    wrapper, state = _start(second, PLATEAU)
    tf.train.Checkpoint(model=second).restore(saved).assert_existing_objects_matched()
    assert state.numpy()[0] == 2  # two epochs' decisions came back with the weights
    got.append((_epoch(second, wrapper, 2, 0.85), second.stop_training))
    assert got == expected
    wrapper.on_train_end()
    np.testing.assert_array_equal(second.layers[0].kernel.numpy(), np.full((2, 1), 1.0))


def test_without_a_schedule_there_are_no_callbacks():
    off = HParams(early_stopping_patience=0, reduce_lr_patience=0, keep_best_epoch=False)
    state = callbacks.attach_state(_model(), off.keep_best_epoch)
    assert callbacks.schedule_callbacks(off.schedule(), state) == []
