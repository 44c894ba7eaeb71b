"""Beam's pickler library for one test: a local run in the same process (``runtime.start``)
leaves Beam pickling with cloudpickle, where a test may need dill, Beam's default."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from apache_beam.internal import cloudpickle_pickler, pickler


@contextlib.contextmanager
def pickling_with(library: str) -> Iterator[str]:
    """Beam pickles with ``library`` ("dill" or "cloudpickle") inside, as before after."""
    previous = "cloudpickle" if pickler.desired_pickle_lib is cloudpickle_pickler else "dill"
    pickler.set_library(library)
    try:
        yield library
    finally:
        pickler.set_library(previous)
