"""Heavy imports kept out of Python's cyclic garbage collections: collecting is paused while
they import, and what they created is then frozen (``gc.freeze``; docs/speedups.md). The
speedups' switch turns it off too.
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
