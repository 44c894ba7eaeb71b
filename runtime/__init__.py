"""How this project's processes run Beam, TFX and TensorFlow, apart from what they compute.

- ``beam_args``: where Beam runs and with how many workers (one policy for the pipeline's
  configuration, the local runner and the components);
- ``beam_pool``: Beam's local worker processes, started once per run for every component;
- ``decoded_columns``: where and how the fast ExampleGen keeps each split's decoded
  columns for Transform to read;
- ``paths``: whether an artifact lies under a pipeline root (local or gs://);
- ``start``: what a local process sets up around its heavy imports and first Beam pickle;
- ``speedups``: every replacement of a library's internals, listed with the versions they
  were written against, and the one switch that turns them all off.

It imports nothing else of the project, so every layer above (``models``, ``components``,
``pipeline``, the runners) can use it.
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
