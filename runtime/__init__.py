"""How this project's processes run Beam, TFX and TensorFlow, apart from what they compute:
where Beam runs (``beam_args``, ``beam_pool``), what a process sets up (``start``, ``terminal``),
the champion record and artifact paths (``champion``, ``paths``), and the speedups. It imports
nothing else of the project, so every layer above can use it.
"""

import os
from pathlib import Path


def worker_process_env() -> dict[str, str]:
    """This process's environment with the project's root first on ``PYTHONPATH``: what a
    ``python -m <package>.<module>`` worker process needs to import this same code (and to
    unpickle the project's functions). It inherits the rest, the environment TensorFlow reads
    (set by ``models``) and the speedups' switch included."""
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
