"""The last lines of a process's log: what the rehearsal quotes when a task, a training
replica or a model server fails."""

from __future__ import annotations

from collections import deque

LOG_TAIL_LINES = 25


def log_tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    with open(path, errors="replace") as f:
        return "".join(deque(f, maxlen=lines))
