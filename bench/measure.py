"""Running the pipeline and measuring it: wall time, memory, seconds per component (from ML
Metadata), and whether the Trainer is bound by its input pipeline.

Each figure comes from a real run of ``local_runner.py`` in a fresh output directory, in a
process of its own; memory is polled over its process tree (docs/performance.md, "Running the benchmark").
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Sets TensorFlow's environment (models/__init__.py), which the runs launched from here inherit.
from pipeline.config import REPO_ROOT, PipelineConfig

if TYPE_CHECKING:
    import tensorflow as tf
    import tensorflow_transform as tft

    from models.hparams import HParams
    from report.run_summary import ComponentRun, RunSummary

PIPELINE_NAME = "taxi-big-tipper"
POLL_SECONDS = 0.2
PSS_POLL_SECONDS = 2.0

# The Trainer input benchmark: batches kept in memory for the "cached" comparison.
CACHED_BATCHES = 50
WARMUP_STEPS = 20

# Intermediate process: runs the command, then reports its own RUSAGE_CHILDREN peak (a fresh one
# each run: RUSAGE_CHILDREN is the largest of every child ever waited for).
_WRAPPER = """
import json, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(sys.argv[1], "w") as f:
    json.dump({"returncode": code, "max_process_rss_kb": peak_kb}, f)
sys.exit(code)
"""


def _tree_memory(root_pid: int, with_pss: bool) -> tuple[int, int | None]:
    """Sums of RSS and (``with_pss``; costly: the kernel walks the page tables) of PSS, in bytes,
    over the descendants of ``root_pid`` (not the wrapper itself)."""
    import psutil

    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, None
    rss, pss = 0, 0 if with_pss else None
    for child in children:
        try:
            if with_pss:
                memory = child.memory_full_info()
                pss += memory.pss
            else:
                memory = child.memory_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss += memory.rss
    return rss, pss


def run_pipeline(data_dir: Path, output_root: Path, runner_args: Sequence[str], log_path: Path) -> dict[str, Any]:
    """Runs ``local_runner.py`` once; wall time, peak tree RSS, peak single-process RSS."""
    command = [
        str(REPO_ROOT / "local_runner.py"),
        "--data-root",
        str(data_dir),
        "--output-root",
        str(output_root),
        "--pipeline-name",
        PIPELINE_NAME,
        # The generated rows are perturbed beyond the embedded data's contract (fares scaled,
        # coordinates jittered): the schema is inferred, as for any data without a contract.
        "--infer-schema",
        *runner_args,
    ]
    return run_measured(command, REPO_ROOT, log_path)


def run_measured(
    python_args: Sequence[str], cwd: Path, log_path: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Runs ``python <python_args>`` in ``cwd`` (in ``env``, by default this process's
    environment), measuring wall time and memory (docs/performance.md, "Running the benchmark")."""
    rusage_file = log_path.with_suffix(".rusage.json")
    command = [sys.executable, "-c", _WRAPPER, str(rusage_file), sys.executable, *python_args]
    # (epoch seconds, tree RSS in MB, tree PSS in MB or None when not polled this time)
    samples: list[tuple[float, float, float | None]] = []
    start = time.monotonic()
    next_pss = start
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        while process.poll() is None:
            with_pss = time.monotonic() >= next_pss
            rss, pss = _tree_memory(process.pid, with_pss)
            if with_pss:
                next_pss = time.monotonic() + PSS_POLL_SECONDS
            samples.append((time.time(), rss / 2**20, None if pss is None else pss / 2**20))
            time.sleep(POLL_SECONDS)
    wall = time.monotonic() - start
    if process.returncode != 0:
        with open(log_path) as log:
            tail = "".join(log.readlines()[-30:])
        raise RuntimeError(f"{python_args[0]} failed (exit {process.returncode}); log {log_path}:\n{tail}")
    rusage = json.loads(rusage_file.read_text())
    return {
        "wall_s": wall,
        "peak_rss_mb": max((sample[1] for sample in samples), default=0.0),
        "peak_pss_mb": max((sample[2] for sample in samples if sample[2] is not None), default=0.0),
        "max_process_rss_mb": rusage["max_process_rss_kb"] / 1024,
        "memory_samples": samples,
    }


def peak_by_component(
    samples: Sequence[tuple[float, ...]], components: Sequence[ComponentRun], column: int = 1
) -> dict[str, float]:
    """The largest tree memory (``column`` of the samples: 1 RSS, 2 PSS) sampled while each
    component ran (ML Metadata's create to last-update interval; components that ran
    alongside share their samples)."""
    return {
        c.node_id: max(
            (
                sample[column]
                for sample in samples
                if c.started <= sample[0] <= c.finished and sample[column] is not None
            ),
            default=0.0,
        )
        for c in components
    }


def _quiet_tensorflow() -> None:
    """TensorFlow/TFMA deprecation warnings would bury the progress lines."""
    import logging

    import tensorflow as tf

    tf.get_logger().setLevel(logging.ERROR)


def latest_components(output_root: Path) -> list[ComponentRun]:
    """The components of our latest run as ML Metadata recorded them (``ComponentRun``s)."""
    return latest_run(output_root).components


def latest_run(output_root: Path) -> RunSummary:
    """Our latest run as ML Metadata recorded it."""
    config = PipelineConfig(output_root=str(output_root), pipeline_name=PIPELINE_NAME)
    return run_in(config.metadata_path, PIPELINE_NAME)


def components_in(metadata_path: str, pipeline_name: str) -> list[ComponentRun]:
    """The components of the latest run of ``pipeline_name`` in an ML Metadata SQLite file."""
    return run_in(metadata_path, pipeline_name).components


def run_in(metadata_path: str, pipeline_name: str) -> RunSummary:
    """The latest run of ``pipeline_name`` in an ML Metadata SQLite file."""
    _quiet_tensorflow()
    from tfx.orchestration import metadata

    from report.run_summary import summarize_run

    connection = metadata.sqlite_metadata_connection_config(metadata_path)
    return summarize_run(connection, pipeline_name)


def component_states(components: Sequence[ComponentRun]) -> dict[str, str]:
    """Each component's state as ML Metadata recorded it ("complete", "cached", ...)."""
    return {c.node_id: c.state for c in components}


def latest_dir(pattern: str) -> str:
    found = sorted(glob.glob(pattern), key=lambda p: int(os.path.basename(p)) if os.path.basename(p).isdigit() else -1)
    if not found:
        raise FileNotFoundError(f"nothing matches {pattern}")
    return found[-1]


def trainer_input_benchmark(output_root: Path, batch_size: int, steps: int) -> dict[str, float]:
    """``input_benchmark`` on the latest run's train split (ExampleGen's raw examples, which
    the Trainer reads) and transform graph."""
    pipeline = output_root / "pipelines" / PIPELINE_NAME
    train_files = [os.path.join(latest_dir(str(pipeline / "CsvExampleGen" / "examples" / "*")), "Split-train", "*")]
    transform_graph = latest_dir(str(pipeline / "Transform" / "transform_graph" / "*"))
    return input_benchmark(train_files, transform_graph, batch_size, steps)


def _input_datasets(
    train_files: Sequence[str], tft_output: tft.TFTransformOutput, batch_size: int, hparams: HParams, label_key: str
) -> tuple[tf.data.Dataset, tf.data.Dataset, tf.data.Dataset, float]:
    """The train split fed as ``run_fn`` feeds it (in memory when it fits), streamed from the
    files, and ``CACHED_BATCHES`` transformed batches cached in memory (filled already); with
    the seconds the first took to load."""
    from models import data

    def dataset(max_bytes: int) -> tf.data.Dataset:
        return data.input_fn(
            train_files,
            tft_output,
            batch_size,
            training=True,
            in_memory_max_bytes=max_bytes,
            label_key=label_key,
        )

    start = time.perf_counter()
    as_run_fn = dataset(hparams.in_memory_max_mb * 2**20)
    load_s = time.perf_counter() - start
    streamed = dataset(0)
    in_memory = streamed.take(CACHED_BATCHES).cache().repeat()
    for _ in in_memory.take(CACHED_BATCHES):  # fill the cache before timing
        pass
    return as_run_fn, streamed, in_memory, load_s


def _steps_per_second(train_step: Callable[[Iterator], dict], batches: tf.data.Dataset, steps: int) -> float:
    """Training steps per second over ``steps`` steps, after ``WARMUP_STEPS`` untimed ones."""
    iterator = iter(batches)
    for _ in range(WARMUP_STEPS):
        logs = train_step(iterator)
    float(logs["loss"])
    start = time.perf_counter()
    for _ in range(steps):
        logs = train_step(iterator)
    float(logs["loss"])  # wait for the last step
    return steps / (time.perf_counter() - start)


def input_benchmark(train_files: Sequence[str], transform_graph: str, batch_size: int, steps: int) -> dict[str, float]:
    """Training steps/s of the project's model fed by ``models.data.input_fn`` exactly as
    ``run_fn`` calls it (raw examples through the transform graph; in memory when the split
    fits, ``HParams.in_memory_max_mb``), fed by the same function forced to stream from the
    files, and fed from transformed batches already in memory.

    A ratio well below 1 means the Trainer waits on its input pipeline. All use one
    compiled train step; each gets ``WARMUP_STEPS`` untimed steps first (tracing, file
    opening, shuffle buffer, and filling the in-memory cache); loading a split into
    memory is timed separately (``in_memory_load_s``).
    """
    _quiet_tensorflow()
    import tensorflow_transform as tft

    from models import model as model_lib
    from models.hparams import HParams
    from pipeline.config import default_problem

    problem = default_problem()  # the benchmark's data is the taxi problem's
    tft_output = tft.TFTransformOutput(transform_graph)
    hparams = HParams(per_replica_batch_size=batch_size)
    as_run_fn, streamed, in_memory, load_s = _input_datasets(
        train_files, tft_output, batch_size, hparams, problem.label_key
    )
    model = model_lib.build_keras_model(problem, model_lib.categorical_sizes(problem, tft_output), hparams)
    train_step = model.make_train_function()
    cached = _steps_per_second(train_step, in_memory, steps)
    fed = _steps_per_second(train_step, as_run_fn, steps)
    streaming = _steps_per_second(train_step, streamed, steps)
    return {
        "input_steps_per_s": fed,
        "streamed_steps_per_s": streaming,
        "cached_steps_per_s": cached,
        "input_vs_cached_ratio": fed / cached,
        "streamed_vs_cached_ratio": streaming / cached,
        "in_memory_load_s": load_s,
    }


def median_of(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of every number across repeats, inside nested dicts too (seconds per
    component, the template's figures); a flag holds if it held in every repeat; anything
    else is taken from the first repeat."""
    result: dict[str, Any] = {}
    for key, value in repeats[0].items():
        present = [r[key] for r in repeats if key in r]
        if isinstance(value, bool):
            result[key] = all(present)  # true of every repeat
        elif isinstance(value, (int, float)):
            result[key] = statistics.median(present)
        elif isinstance(value, dict):
            result[key] = median_of(present)
        else:
            result[key] = value
    return result
