"""models/iterator_release.py: fit's input iterators end on a background thread, and fit
trains as it does without the wrapper."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.iterator_release import ReleaseInBackground, releasing


def _model() -> keras.Model:
    inputs = keras.Input(shape=(3,))
    outputs = keras.layers.Dense(1, kernel_initializer="ones")(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def _data(rows: int = 64) -> tf.data.Dataset:
    features = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) / (rows * 3)
    labels = features.sum(axis=1, keepdims=True) * 2.0
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(8)


class _Tracked:
    """Stands for an iterator: records the thread it is deleted on."""

    def __init__(self, deleted_on: list[str]):
        weakref.finalize(self, lambda: deleted_on.append(threading.current_thread().name))


def _join(release: ReleaseInBackground) -> None:
    for thread in release.threads:
        thread.join(timeout=30)
        assert not thread.is_alive()


def test_fit_trains_as_without_the_wrapper():
    plain, wrapped = _model(), _model()
    release = ReleaseInBackground.attach(wrapped)
    train, validation = _data(), _data(16)
    expected = plain.fit(train, validation_data=validation, epochs=3, verbose=0).history
    got = wrapped.fit(train, validation_data=validation, epochs=3, verbose=0).history
    release.release()
    _join(release)
    assert got == expected
    for ours, theirs in zip(wrapped.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_fits_iterators_are_deleted_on_the_background_thread():
    model = _model()
    release = ReleaseInBackground.attach(model)
    deleted_on: list[str] = []
    model.fit(_data().repeat(), steps_per_epoch=4, validation_data=_data(16), epochs=2, verbose=0)
    held = dict(release._held)
    assert set(held) == {"make_train_function", "make_test_function"}
    for iterator in held.values():
        weakref.finalize(iterator, lambda: deleted_on.append(threading.current_thread().name))
    del held, iterator
    release.release()
    _join(release)
    assert deleted_on == ["release-input-iterators"] * 2
    assert release._held == {}


def test_a_superseded_iterator_is_dropped_on_a_background_thread():
    release = ReleaseInBackground()
    make = release._wrap_factory("make_test_function", lambda: lambda iterator: None)
    function = make()
    deleted_on: list[str] = []
    first = _Tracked(deleted_on)
    function(first)
    function(first)  # the same iterator again (the next step of one pass): kept, not dropped
    assert release.threads == []
    del first
    function(_Tracked(deleted_on))
    _join(release)
    assert deleted_on == ["release-input-iterators"]
    release.release()
    _join(release)
    assert deleted_on == ["release-input-iterators"] * 2


@pytest.mark.parametrize("kind", ["make_train_function", "make_test_function"])
def test_attach_wraps_only_this_model(kind):
    model, other = _model(), _model()
    ReleaseInBackground.attach(model)
    assert kind in vars(model)
    assert kind not in vars(other)


def test_releasing_releases_on_leaving_the_block_even_when_fit_fails():
    model = _model()
    with pytest.raises(ValueError):
        with releasing(model) as release:
            model.fit(_data(), epochs=1, verbose=0)
            assert set(release._held) == {"make_train_function"}
            raise ValueError("fit failed")
    _join(release)
    assert release._held == {} and len(release.threads) == 1
