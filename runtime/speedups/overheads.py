"""Two costs of running Beam in this process that buy nothing here: dill's trace switch
resetting every logger's cached level after each pickle, and the in-process worker's
side-input cache weighing each value with objsize (docs/speedups.md). Written against dill
0.3.1.1 and apache-beam 2.61.0.
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
