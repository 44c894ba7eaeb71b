"""A check run in a new interpreter: what importing or installing does to a process, which
the test process (having imported everything long ago) cannot show."""

from __future__ import annotations

import subprocess
import sys

from pipeline.config import REPO_ROOT


def fresh_python(code: str, timeout: float = 300) -> str:
    """The standard output of ``python -c code`` run from the project root."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT, timeout=timeout
    )
    return result.stdout.strip()
