"""One run at a time per pipeline and output root: an exclusive lock beside the pipeline's
metadata store, held for the whole run.

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


class RunLockedError(RuntimeError):
    """Another run of the same pipeline holds its output root."""


def hold_run_lock(config: PipelineConfig) -> IO[str]:
    """The lock, as an open file to close when the run ends (``with`` it); raises
    ``RunLockedError`` at once if another process holds it."""
    path = os.path.join(os.path.dirname(config.metadata_path), "run.lock")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held open for the run, closed by the caller's `with`
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise RunLockedError(
            f"{holder} is running {config.pipeline_name} on {config.output_root}: wait for it to finish, "
            "or give this run another --output-root or --pipeline-name."
        ) from None
    handle.truncate(0)
    handle.write(f"process {os.getpid()} (started {time.strftime('%Y-%m-%d %H:%M:%S')})")
    handle.flush()
    return handle
