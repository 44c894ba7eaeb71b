"""The project's own TFX components (standard TFX components are used as they are), and
the Beam policy they and the pipeline share, and the environment of their worker processes."""

import os
from pathlib import Path

import models  # noqa: F401  (first: sets the environment TensorFlow reads, see models/__init__.py)


def worker_process_env() -> dict[str, str]:
    """This process's environment with the project's root first on ``PYTHONPATH``: what a
    ``python -m components.<module>`` worker process needs to import this same code (and to
    unpickle the project's functions)."""
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
