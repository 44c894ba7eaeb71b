"""A local run of the pipeline in a process of its own, and the ML Metadata store local runs share."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence

from pipeline.config import REPO_ROOT, PipelineConfig


def run_in_own_process(args: Sequence[str], log_path: str, timeout: float | None = None) -> tuple[int | None, float]:
    """``local_runner.py args`` in a process of its own (no TensorFlow state shared with this
    one), its output to ``log_path``: its exit code (None when ``timeout`` passed) and wall
    seconds."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    started = time.monotonic()
    with open(log_path, "w") as log:
        try:
            code = subprocess.run(
                [sys.executable, "local_runner.py", *args],
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            code = None
    return code, time.monotonic() - started


def metadata_config(config: PipelineConfig):
    """The run's ML Metadata store (SQLite under the output root)."""
    from tfx.orchestration import metadata

    os.makedirs(os.path.dirname(config.metadata_path), exist_ok=True)
    return metadata.sqlite_metadata_connection_config(config.metadata_path)
