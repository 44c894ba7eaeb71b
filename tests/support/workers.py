"""What the suite's worker processes (pytest-xdist, `make test`) share: a directory made once
for all of them, for a fixture whose output they only read."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``name`` in the run's temp dir, which every worker of the run sees, made by ``make`` in
    the first worker that asks (the others wait for it, then take it as it is). A ``make`` that
    fails leaves the directory to the next worker that asks."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # each worker's base temp dir is a folder of the run's
    path, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            make(path)
            done.touch()
    return path
