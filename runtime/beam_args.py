"""Where Apache Beam runs and with how many workers: one policy for the configuration, the
local runner (workers by data size) and the components that take a faster path when Beam
runs on this machine. With a ``--runner`` given (Dataflow, Flink, ...), only the caller's
arguments are used.
"""

from __future__ import annotations

import glob
import importlib.metadata
import os
import sys
from collections.abc import Sequence

# The DirectRunner with its worker processes shared by every component (runtime/beam_pool.py).
POOLED_RUNNER = "runtime.beam_pool.PooledDirectRunner"
LOCAL_RUNNERS = ("DirectRunner", "BundleBasedDirectRunner", "SwitchingDirectRunner", POOLED_RUNNER)
# Beam pickles every DoFn several times per transform (to check it, for the pipeline's
# portable form, again in the worker); dill, its default in this Beam, pickles in pure
# Python, cloudpickle (Beam's own option, its default from Beam 2.65) with Python's C
# pickler. DirectRunner runs only (here, or inside a Vertex job's container): a remote
# runner's job keeps Beam's default, which its workers are set up for.
LOCAL_PICKLE_LIBRARY = "cloudpickle"
LOCAL_PICKLER_ARG = f"--pickle_library={LOCAL_PICKLE_LIBRARY}"
IN_PROCESS_ARGS = ("--runner=DirectRunner", "--direct_running_mode=in_memory", "--direct_num_workers=1")
# Unless a Beam dependency flag is set, every TFX Beam executor (ExampleGen, StatisticsGen,
# Transform, Evaluator) copies the whole installed TFX into a new /tmp directory and builds
# an sdist of it for remote workers to install, on every run, never removed. The
# DirectRunner's workers are this machine's Python and never read it. Naming the Beam SDK
# container image, which only container-based runners use, tells TFX so.
NO_STAGING_ARG = (
    f"--sdk_container_image=apache/beam_python{sys.version_info.major}.{sys.version_info.minor}_sdk:"
    f"{importlib.metadata.version('apache-beam')}"
)
# From this much input on, the DirectRunner runs one worker process per core.
MULTI_PROCESS_MIN_MB = 100


def runner(beam_pipeline_args: Sequence[str]) -> str | None:
    """The runner ``beam_pipeline_args`` ask for (``--runner=X`` or ``--runner X``; the
    last one wins, as in Beam), or None."""
    found = None
    for i, arg in enumerate(beam_pipeline_args):
        if arg.startswith("--runner="):
            found = arg.split("=", 1)[1]
        elif arg == "--runner" and i + 1 < len(beam_pipeline_args):
            found = beam_pipeline_args[i + 1]
    return found


def runs_locally(beam_pipeline_args: Sequence[str]) -> bool:
    """True when Beam would run in this machine's processes (no Dataflow, Flink, ...)."""
    name = runner(beam_pipeline_args)
    return name is None or name in LOCAL_RUNNERS


def usable_cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def pipeline_args(workers: int, extra_args: Sequence[str] = (), pool: bool = True) -> list[str]:
    """Beam arguments for a pipeline: DirectRunner with ``workers`` (1: in-process, more:
    that many processes of the run's pool, or with ``pool`` False Beam's own processes
    started by each component) and cloudpickle, then ``extra_args``; given a ``--runner``,
    ``extra_args`` alone (TFX then packages itself for the remote workers, as they need)."""
    if runner(extra_args) is not None:
        return list(extra_args)
    if workers < 1:
        raise ValueError(f"Beam needs at least 1 worker, got {workers}")
    if workers == 1:
        mode = list(IN_PROCESS_ARGS)
    elif pool:
        mode = [f"--runner={POOLED_RUNNER}", f"--direct_num_workers={workers}"]
    else:
        mode = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
    # Once, before ``extra_args``: a component's own mode args, added after these, then
    # leave a user's --pickle_library in place.
    return [*mode, LOCAL_PICKLER_ARG, NO_STAGING_ARG, *extra_args]


def pool_size(beam_pipeline_args: Sequence[str]) -> int | None:
    """The processes of the run's pool ``beam_pipeline_args`` ask for (``pipeline_args``
    with ``pool``), or None when they name another runner."""
    if runner(beam_pipeline_args) != POOLED_RUNNER:
        return None
    size = None
    for arg in beam_pipeline_args:
        if arg.startswith("--direct_num_workers="):
            size = int(arg.split("=", 1)[1])
    return size or os.cpu_count() or 1  # PooledDirectRunner's default


def workers_for_data(data_root: str, data_pattern: str, min_bytes: int = MULTI_PROCESS_MIN_MB * 2**20) -> int:
    """DirectRunner workers for the files matching ``data_pattern`` under ``data_root``:
    one per core from ``min_bytes`` of input on, else 1 (in-process)."""
    size = sum(os.path.getsize(path) for path in glob.glob(os.path.join(data_root, data_pattern)))
    return usable_cores() if size >= min_bytes else 1
