"""Heavy imports kept out of Python's cyclic garbage collections.

Importing TensorFlow, Beam, TFX and their libraries creates about a million long-lived
objects and almost no garbage, yet every full collection walks them all: during the
imports, and again throughout a run (measured in docs/performance.md). Collecting is
paused while they import, and what they created is then frozen (``gc.freeze``): full
collections skip it, and what the run itself creates is collected as usual. Nothing of a
library is replaced (``gc`` is Python's own, public switch), but the speedups' switch turns
it off too (``runtime.start.heavy_imports``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def frozen_imports() -> Iterator[None]:
    """Runs the block (the process's heavy imports) with the collector paused, then freezes
    every object alive; the collector's former state is restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
