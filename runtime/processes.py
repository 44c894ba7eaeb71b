"""Processes seen from outside: whether one has not ended, and waiting for some to end (a
process whose parent was killed is reparented and reaped by init). Standard library only."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return not stat.read().split(") ", 1)[1].startswith("Z")
    except (ProcessLookupError, FileNotFoundError):
        return False


def ended_within(pids: Iterable[int], seconds: float, poll_seconds: float = 0.2) -> bool:
    """Whether every process of ``pids`` ended within ``seconds``."""
    pids = list(pids)
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(poll_seconds)
    return not any(alive(pid) for pid in pids)
