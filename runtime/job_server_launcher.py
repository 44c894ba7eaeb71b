#!/usr/bin/env python3
"""``java`` for the Flink job server a local run starts (Beam's ``--job_server_java_launcher``):
the JVM is sent SIGTERM when the thread that started it ends (Linux's parent-death signal,
which survives exec), so a run killed in the middle of a component leaves no job server
behind. Beam runs this file itself, with the first python3 on PATH: the standard library only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

LAUNCHER = os.path.abspath(__file__)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def tie_to_parent() -> None:
    """Arms the parent-death signal, then makes sure the parent had not already gone: Beam
    reads the JVM's output through a pipe, so a line written to it fails once nobody reads."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_PDEATHSIG): {os.strerror(error)}")
    os.write(sys.stdout.fileno(), f"Starting the job server's JVM (ends with process {os.getppid()})\n".encode())


def main(argv: list[str]) -> None:
    """``java`` with Beam's arguments, in this process."""
    try:
        tie_to_parent()
    except BrokenPipeError:
        sys.exit(1)  # the run that started it has ended: nobody would stop this job server
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as Python found it: an ignored signal stays so in java
    os.execvp("java", ["java", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
