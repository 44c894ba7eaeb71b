"""One run at a time per pipeline and output root (and one rehearsal per rehearsal root):
an exclusive lock beside the metadata store, held for the whole run.

Two runs writing one store would interleave their executions and artifacts; the second is
refused at once instead, naming the process that holds the lock. The kernel drops the lock
when its process ends, however it ends, so a killed run leaves no stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import IO

from pipeline.config import PipelineConfig


class LockedError(RuntimeError):
    """Another process holds the lock; the message names it."""


def hold_run_lock(config: PipelineConfig) -> IO[str]:
    """The lock, as an open file to close when the run ends (``with`` it); raises
    ``LockedError`` at once if another process holds it."""
    return hold_lock(
        os.path.join(os.path.dirname(config.metadata_path), "run.lock"),
        f"running {config.pipeline_name} on {config.output_root}",
        "wait for it to finish, or give this run another --output-root or --pipeline-name",
    )


def hold_lock(path: str, what: str, advice: str) -> IO[str]:
    """An exclusive lock on ``path`` for as long as the returned file is open; raises
    ``LockedError`` at once, naming the holder, ``what`` it does and the ``advice``."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held open for the run, closed by the caller's `with`
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise LockedError(f"{holder} is {what}: {advice}.") from None
    handle.truncate(0)
    handle.write(f"process {os.getpid()} (started {time.strftime('%Y-%m-%d %H:%M:%S')})")
    handle.flush()
    return handle
