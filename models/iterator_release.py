"""Deletes the input iterators Keras' ``fit`` made on a background thread, not on the
thread that trains: in TensorFlow 2.16 deleting one can block for up to its own age
(docs/model.md, docs/performance.md). ``with releasing(model): model.fit(...)``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import tf_keras as keras

_KINDS = ("make_train_function", "make_test_function")


class ReleaseInBackground:
    """Holds the iterators ``model``'s train and test functions were last handed (one of
    each kind), and drops them on a background thread."""

    def __init__(self) -> None:
        self._held: dict[str, object] = {}
        self._lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    @classmethod
    def attach(cls, model: keras.Model) -> ReleaseInBackground:
        """Wraps ``model``'s train and test function factories (on this instance only)."""
        release = cls()
        for kind in _KINDS:
            setattr(model, kind, release._wrap_factory(kind, getattr(model, kind)))
        return release

    def _wrap_factory(self, kind: str, make: Callable) -> Callable:
        def make_function(*args, **kwargs):
            function = make(*args, **kwargs)

            def keeping(iterator):
                self._keep(kind, iterator)
                return function(iterator)

            return keeping

        return make_function

    def _keep(self, kind: str, iterator: object) -> None:
        with self._lock:
            previous = self._held.get(kind)
            if previous is iterator:
                return
            self._held[kind] = iterator
        if previous is not None:
            box = [previous]
            # This frame must not hold the last reference when the thread clears the box.
            del previous
            self._drop(box)

    def release(self) -> None:
        """Drops every held iterator on a background thread (after ``fit`` returned: the
        caller's own references are then gone, so the thread's are the last)."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
        if held:
            self._drop(held)

    def _drop(self, box: list) -> None:
        # Nothing but ``box`` holds these iterators any more: clearing it on the thread
        # deletes them there.
        thread = threading.Thread(target=box.clear, name="release-input-iterators")
        self.threads.append(thread)
        thread.start()


@contextlib.contextmanager
def releasing(model: keras.Model) -> Iterator[ReleaseInBackground]:
    """``model``'s input iterators released in the background, the last ones on leaving
    the block (after ``fit`` returned, or raised)."""
    release = ReleaseInBackground.attach(model)
    try:
        yield release
    finally:
        release.release()
