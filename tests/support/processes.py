"""Processes a test started, seen from outside: whether one still runs, and waiting for some
to end (a process whose parent was killed is reparented and reaped by init)."""

from __future__ import annotations

import time
from collections.abc import Iterable

import psutil


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def ended_within(pids: Iterable[int], seconds: float) -> bool:
    """Whether every process of ``pids`` ended within ``seconds`` (polled every 0.2 s)."""
    pids = list(pids)
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not any(running(pid) for pid in pids)
