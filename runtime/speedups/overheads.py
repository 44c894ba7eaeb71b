"""Two costs of running Beam in this process that buy nothing here, taken away.

- **dill's trace switch.** Beam's pickler switches dill's tracing off after every pickle
  and unpickle (thousands per run, as Beam pickles every DoFn several times), by setting
  the "dill" logger's level; each ``setLevel`` makes Python's logging clear the cached
  level of every logger in the process. The level is now set only when it changes:
  tracing behaves as before, and an unchanged level leaves nothing to clear.
- **The in-process worker's side-input cache.** The worker Beam runs inside this process
  keeps side inputs in a cache, weighing each value it keeps with objsize, which first
  walks the globals of every loaded module: milliseconds per value with TensorFlow, Beam
  and TFX loaded, more than re-reading the value from the runner's memory costs. The Beam
  pool's worker processes run without that cache already (``runtime/beam_pool.py``);
  the in-process worker now does too. Outputs do not change: the cache only avoids
  decoding a side input twice.

Written against dill 0.3.1.1 and apache-beam 2.61.0: two entries of ``runtime.speedups``.
"""

from __future__ import annotations

import logging

import dill
from apache_beam.runners.portability.fn_api_runner import worker_handlers

# dill's own switch (dill 0.3.1's ``_trace``), which this wraps, and Beam's cache size.
DILL_TRACE = dill.dill._trace
BEAM_STATE_CACHE_SIZE_MB = worker_handlers.STATE_CACHE_SIZE_MB
_dill_logger = logging.getLogger("dill")


def trace(on: bool) -> None:
    """dill's ``_trace(on)``: its logger at INFO when tracing, WARNING when not."""
    level = logging.INFO if on else logging.WARNING
    if _dill_logger.level != level:
        DILL_TRACE(on)


def install_trace_switch() -> None:
    """dill's trace switch, in this process, clears logging's caches only on a change."""
    dill.dill._trace = trace


def install_without_state_cache() -> None:
    """The in-process Beam worker, in this process, without its side-input cache."""
    worker_handlers.STATE_CACHE_SIZE_MB = 0


def install() -> None:
    """Both: Beam's pickling and in-process worker, in this process, without these costs."""
    install_trace_switch()
    install_without_state_cache()
