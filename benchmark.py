"""Benchmarks the pipeline at several data sizes: end-to-end time, memory, per-component
time, the cached rerun, and whether the Trainer is bound by its input pipeline; and TFX's
own taxi template on the same data in the same session, for ratios.

    python benchmark.py --help
    python benchmark.py --sizes 1,10 --repeats 1     # writes outputs/bench/results.{json,md}
    python benchmark.py --sizes 1 --no-template      # without TFX's taxi template beside it

Measures only; it changes nothing in the pipeline. Every figure comes from a real
LocalDagRunner run of ``local_runner.py`` in a fresh output directory, on data generated
from the embedded ``data/taxi.csv`` (resampled and perturbed, not copied, so Beam and
tf.Transform see realistic variety rather than 10 identical blocks).

How memory is measured: while ``local_runner.py`` runs, its process tree (it and every
Beam worker or other child) is polled with psutil every ``POLL_SECONDS`` and the largest
*sum* of RSS is kept (``peak_rss_mb``; a page shared by several processes, such as
TensorFlow's libraries in every Beam worker, counts once per process, so this over-states),
and the largest sum of PSS (``peak_pss_mb``, proportional set size: each shared page split
between the processes sharing it, so the sum is the memory the run occupies), polled every
``PSS_POLL_SECONDS`` only: the kernel walks a process's page tables to report it (35-45 ms
for a 1.5 GB process here), and polling it as often as RSS took a third of a core from the
run being measured. Spikes shorter than the poll interval are missed. Each run is
also launched through a fresh intermediate Python process that reports its own
``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (``max_process_rss_mb``: the kernel's exact peak
of the single largest process of that run; a fresh intermediate is needed because
RUSAGE_CHILDREN is the max over all children ever waited for).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # Keras 2, as the pipeline uses.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import warnings  # noqa: E402

# Google client libraries warn at import about future Python support; noise here.
warnings.filterwarnings("ignore", category=FutureWarning)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import csv  # noqa: E402
import datetime  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Sequence  # noqa: E402

import numpy as np  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent
SOURCE_CSV = REPO_ROOT / "data" / "taxi.csv"
DEFAULT_OUTPUT_DIR = REPO_ROOT / "outputs" / "bench"
PIPELINE_NAME = "taxi-big-tipper"
POLL_SECONDS = 0.2
PSS_POLL_SECONDS = 2.0
CHUNK_ROWS = 20_000

# Generator perturbations. One factor per row scales fare, miles, seconds and tips alike,
# so tips/fare (and so the label) is kept exactly and trip speeds stay plausible.
SCALE_LOW, SCALE_HIGH = 0.9, 1.1
SCALED_COLUMNS = ("fare", "trip_miles", "trip_seconds", "tips")
COORDINATE_COLUMNS = ("pickup_latitude", "pickup_longitude", "dropoff_latitude", "dropoff_longitude")
COORDINATE_JITTER_DEG = 0.002  # standard deviation, about 200 m
# Timestamps move by a whole number of 15-minute steps (the source's granularity), up to 14 days.
TIME_STEP_SECONDS = 900
MAX_SHIFT_STEPS = 14 * 24 * 4
# The source stores Chicago local wall-clock time as if it were UTC: its hour/day/month
# columns agree with the timestamp read with offset 0 in all 15,002 rows (and with -5 h or
# -6 h in none). So the recomputed columns use the same convention (offset 0), which keeps
# the generated data consistent with the source rather than shifting every hour by 6.
LOCAL_OFFSET_SECONDS = 0

# The Trainer input benchmark: batches kept in memory for the "cached" comparison.
CACHED_BATCHES = 50
WARMUP_STEPS = 20

# Intermediate process: runs the command, then reports its own RUSAGE_CHILDREN peak.
_WRAPPER = """
import json, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(sys.argv[1], "w") as f:
    json.dump({"returncode": code, "max_process_rss_kb": peak_kb}, f)
sys.exit(code)
"""


# ---------------------------------------------------------------------------- data


def rows_for_size(size: float, source_rows: int) -> int:
    """Rows of a dataset ``size`` times the source (fractions allowed, for tests)."""
    return max(1, round(size * source_rows))


def read_source(path: Path = SOURCE_CSV) -> tuple[list[str], list[list[str]]]:
    """The (small) source CSV in memory: header and rows."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, list(reader)


def _scale(value: str, factor: float, integer: bool) -> str:
    if value == "":
        return value
    scaled = float(value) * factor
    return str(int(round(scaled))) if integer else f"{scaled:.2f}"


def _day_of_week(days_since_epoch: int) -> int:
    """1 = Sunday ... 7 = Saturday, the source's convention (1970-01-01 was a Thursday)."""
    return (days_since_epoch + 4) % 7 + 1


def _calendar(timestamp: int) -> tuple[int, int, int]:
    """(hour, day of week, month) of ``timestamp`` in the data's local-time convention."""
    local = timestamp + LOCAL_OFFSET_SECONDS
    moment = datetime.datetime.fromtimestamp(local, datetime.timezone.utc)
    return moment.hour, _day_of_week(local // 86400), moment.month


def generate_dataset(output: Path, rows: int, seed: int, source: Path = SOURCE_CSV) -> Path:
    """Writes ``rows`` resampled, perturbed rows of ``source`` to ``output``, streaming.

    Deterministic for a seed. Only the source is held in memory; rows are drawn with
    replacement and written in chunks of ``CHUNK_ROWS``. Empty cells stay empty. Written
    to a temporary name and renamed, so an interrupted run never leaves a partial file
    that a later run would reuse.
    """
    header, source_rows = read_source(source)
    col = {name: i for i, name in enumerate(header)}
    scaled = [(col[c], c == "trip_seconds") for c in SCALED_COLUMNS if c in col]
    coords = [col[c] for c in COORDINATE_COLUMNS if c in col]
    ts, hour, day, month = (col.get(c) for c in ("trip_start_timestamp", "trip_start_hour", "trip_start_day",
                                                 "trip_start_month"))
    rng = np.random.default_rng(seed)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with open(partial, "w", newline="") as sink:
        writer = csv.writer(sink)
        writer.writerow(header)
        done = 0
        while done < rows:
            n = min(CHUNK_ROWS, rows - done)
            picks = rng.integers(0, len(source_rows), n)
            factors = rng.uniform(SCALE_LOW, SCALE_HIGH, n)
            jitter = rng.normal(0.0, COORDINATE_JITTER_DEG, (n, len(coords)))
            shifts = rng.integers(-MAX_SHIFT_STEPS, MAX_SHIFT_STEPS + 1, n) * TIME_STEP_SECONDS
            chunk = []
            for i in range(n):
                row = list(source_rows[picks[i]])
                for index, integer in scaled:
                    row[index] = _scale(row[index], factors[i], integer)
                for j, index in enumerate(coords):
                    if row[index] != "":
                        row[index] = f"{float(row[index]) + jitter[i, j]:.9f}"
                if ts is not None and row[ts] != "":
                    new_ts = int(row[ts]) + int(shifts[i])
                    row[ts] = str(new_ts)
                    h, d, m = _calendar(new_ts)
                    for index, value in ((hour, h), (day, d), (month, m)):
                        if index is not None:
                            row[index] = str(value)
                chunk.append(row)
            writer.writerows(chunk)
            done += n
    os.replace(partial, output)
    return output


def cached_dataset(output_dir: Path, size: float, seed: int) -> tuple[Path, int]:
    """The data directory for (size, seed), generated on first use and reused after."""
    rows = rows_for_size(size, len(read_source()[1]))
    data_dir = output_dir / "data" / f"rows-{rows}-seed-{seed}"
    target = data_dir / "data.csv"
    if not target.exists():
        start = time.monotonic()
        generate_dataset(target, rows, seed)
        print(f"  generated {rows} rows in {time.monotonic() - start:.1f} s: {target}", flush=True)
    else:
        print(f"  reusing {target}", flush=True)
    return data_dir, rows


# ---------------------------------------------------------------------------- runs


def _tree_memory(root_pid: int, with_pss: bool) -> tuple[int, int | None]:
    """Sums of RSS and (``with_pss``; costly, see the module docstring) of PSS, in bytes,
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
    command = [str(REPO_ROOT / "local_runner.py"), "--data-root", str(data_dir), "--output-root", str(output_root),
               "--pipeline-name", PIPELINE_NAME, *runner_args]
    return run_measured(command, REPO_ROOT, log_path)


def run_measured(python_args: Sequence[str], cwd: Path, log_path: Path) -> dict[str, Any]:
    """Runs ``python <python_args>`` in ``cwd``, measuring wall time and memory (module docstring)."""
    rusage_file = log_path.with_suffix(".rusage.json")
    command = [sys.executable, "-c", _WRAPPER, str(rusage_file), sys.executable, *python_args]
    # (epoch seconds, tree RSS in MB, tree PSS in MB or None when not polled this time)
    samples: list[tuple[float, float, float | None]] = []
    start = time.monotonic()
    next_pss = start
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        while process.poll() is None:
            with_pss = time.monotonic() >= next_pss
            rss, pss = _tree_memory(process.pid, with_pss)
            if with_pss:
                next_pss = time.monotonic() + PSS_POLL_SECONDS
            samples.append((time.time(), rss / 2**20, None if pss is None else pss / 2**20))
            time.sleep(POLL_SECONDS)
    wall = time.monotonic() - start
    if process.returncode != 0:
        tail = "".join(open(log_path).readlines()[-30:])
        raise RuntimeError(f"{python_args[0]} failed (exit {process.returncode}); log {log_path}:\n{tail}")
    rusage = json.loads(rusage_file.read_text())
    return {"wall_s": wall, "peak_rss_mb": max((sample[1] for sample in samples), default=0.0),
            "peak_pss_mb": max((sample[2] for sample in samples if sample[2] is not None), default=0.0),
            "max_process_rss_mb": rusage["max_process_rss_kb"] / 1024, "memory_samples": samples}


def peak_by_component(samples: Sequence[tuple[float, ...]], components, column: int = 1) -> dict[str, float]:
    """The largest tree memory (``column`` of the samples: 1 RSS, 2 PSS) sampled while each
    component ran (ML Metadata's create to last-update interval; components that ran
    alongside share their samples)."""
    return {c.node_id: max((sample[column] for sample in samples
                            if c.started <= sample[0] <= c.finished and sample[column] is not None), default=0.0)
            for c in components}


def _quiet_tensorflow() -> None:
    """TensorFlow/TFMA deprecation warnings would bury the progress lines."""
    import logging

    import tensorflow as tf

    tf.get_logger().setLevel(logging.ERROR)


def latest_components(output_root: Path) -> list:
    """The components of our latest run as ML Metadata recorded them (``ComponentRun``s)."""
    from pipeline.config import PipelineConfig

    return components_in(PipelineConfig(output_root=str(output_root), pipeline_name=PIPELINE_NAME).metadata_path,
                         PIPELINE_NAME)


def components_in(metadata_path: str, pipeline_name: str) -> list:
    """The components of the latest run of ``pipeline_name`` in an ML Metadata SQLite file."""
    _quiet_tensorflow()
    from tfx import v1 as tfx

    from pipeline.run_summary import summarize_run

    connection = tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path)
    return summarize_run(connection, pipeline_name).components


def _states(components) -> dict[str, str]:
    return {c.node_id: c.state for c in components}


def _latest_dir(pattern: str) -> str:
    found = sorted(glob.glob(pattern), key=lambda p: int(os.path.basename(p)) if os.path.basename(p).isdigit() else -1)
    if not found:
        raise FileNotFoundError(f"nothing matches {pattern}")
    return found[-1]


def trainer_input_benchmark(output_root: Path, batch_size: int, steps: int) -> dict[str, float]:
    """Training steps/s of the project's model fed by ``models.trainer.input_fn`` exactly as
    ``run_fn`` calls it (in memory when the split fits, ``HParams.in_memory_max_mb``), fed
    by the same function forced to stream from the files, and fed from batches already in
    memory.

    A ratio well below 1 means the Trainer waits on its input pipeline. All use one
    compiled train step; each gets ``WARMUP_STEPS`` untimed steps first (tracing, file
    opening, shuffle buffer, and filling the in-memory cache); loading a split into
    memory is timed separately (``in_memory_load_s``).
    """
    _quiet_tensorflow()
    import types

    import tensorflow as tf
    import tensorflow_transform as tft
    from tfx_bsl.public import tfxio

    from models import model as model_lib, trainer
    from models.hparams import HParams

    root = output_root / "pipelines" / PIPELINE_NAME / "Transform"
    train_files = [os.path.join(_latest_dir(str(root / "transformed_examples" / "*")), "Split-train", "*")]
    tft_output = tft.TFTransformOutput(_latest_dir(str(root / "transform_graph" / "*")))
    # What TFX's Trainer hands run_fn, for Transform's tf.Example output.
    data_accessor = types.SimpleNamespace(
        tf_dataset_factory=lambda files, options, schema: tfxio.TFExampleRecord(
            file_pattern=files, schema=schema).TensorFlowDataset(options))
    hparams = HParams(per_replica_batch_size=batch_size)

    def dataset(max_bytes: int) -> tf.data.Dataset:
        return trainer.input_fn(train_files, data_accessor, tft_output, batch_size, training=True,
                                in_memory_max_bytes=max_bytes)

    start = time.perf_counter()
    as_run_fn = dataset(hparams.in_memory_max_mb * 2**20)
    load_s = time.perf_counter() - start
    streamed = dataset(0)
    in_memory = streamed.take(CACHED_BATCHES).cache().repeat()
    for _ in in_memory.take(CACHED_BATCHES):  # fill the cache before timing
        pass

    model = model_lib.build_keras_model(trainer.categorical_sizes(tft_output), hparams)
    train_step = model.make_train_function()

    def steps_per_second(data: tf.data.Dataset) -> float:
        iterator = iter(data)
        for _ in range(WARMUP_STEPS):
            logs = train_step(iterator)
        float(logs["loss"])
        start = time.perf_counter()
        for _ in range(steps):
            logs = train_step(iterator)
        float(logs["loss"])  # wait for the last step
        return steps / (time.perf_counter() - start)

    cached = steps_per_second(in_memory)
    fed = steps_per_second(as_run_fn)
    streaming = steps_per_second(streamed)
    return {"input_steps_per_s": fed, "streamed_steps_per_s": streaming, "cached_steps_per_s": cached,
            "input_vs_cached_ratio": fed / cached, "streamed_vs_cached_ratio": streaming / cached,
            "in_memory_load_s": load_s}


TEMPLATE_PIPELINE_NAME = "taxi-template"
# `tfx template copy` ships these components commented out ("TODO(step 5/6): Uncomment here").
_COMMENTED_APPEND = re.compile(r"^(\s*)# (components\.append\()", re.M)


def prepare_template(destination: Path, data_dir: Path) -> Path:
    """TFX's taxi template exactly as ``tfx template copy --model=taxi`` writes it, with
    every ``components.append(...)`` it ships commented out enabled (as a user following
    its steps does; 1000 train steps is its own default) and its data/ replaced by ``data_dir``.
    """
    if destination.exists():
        shutil.rmtree(destination)
    cli = Path(sys.executable).with_name("tfx")
    subprocess.run([str(cli), "template", "copy", "--model=taxi", f"--pipeline_name={TEMPLATE_PIPELINE_NAME}",
                    f"--destination_path={destination}"], check=True, capture_output=True, text=True)
    pipeline_file = destination / "pipeline" / "pipeline.py"
    source = pipeline_file.read_text()
    enabled, count = _COMMENTED_APPEND.subn(r"\1\2", source)
    if count == 0:
        raise RuntimeError(f"{pipeline_file}: no commented-out components.append(...) found; the template changed")
    pipeline_file.write_text(enabled)
    shutil.rmtree(destination / "data")
    (destination / "data").symlink_to(data_dir.resolve(), target_is_directory=True)
    return destination


def benchmark_template(data_dir: Path, run_dir: Path) -> dict[str, Any]:
    """One fresh run of the template on ``data_dir``: wall time, memory, seconds per component."""
    destination = prepare_template(run_dir / "template", data_dir)
    print(f"  TFX taxi template -> {destination}", flush=True)
    measured = run_measured(["local_runner.py"], destination, run_dir / "template.log")
    metadata = destination / "tfx_metadata" / TEMPLATE_PIPELINE_NAME / "metadata.db"
    with contextlib.chdir(destination):  # the template records artifact URIs relative to where it ran
        components = components_in(str(metadata), TEMPLATE_PIPELINE_NAME)
    print(f"    {measured['wall_s']:.1f} s, peak RSS {measured['peak_rss_mb']:.0f} MB, PSS "
          f"{measured['peak_pss_mb']:.0f} MB", flush=True)
    return {"wall_s": measured["wall_s"], "peak_rss_mb": measured["peak_rss_mb"],
            "peak_pss_mb": measured["peak_pss_mb"], "max_process_rss_mb": measured["max_process_rss_mb"],
            "component_s": {c.node_id: c.seconds for c in components},
            "component_states": _states(components)}


def benchmark_once(data_dir: Path, rows: int, run_dir: Path, runner_args: Sequence[str], batch_size: int,
                   input_steps: int, template: bool = False) -> dict[str, Any]:
    """One repeat at one size: fresh run, cached reruns, Trainer input benchmark, and
    optionally a fresh run of TFX's taxi template on the same data."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    output_root = run_dir / "outputs"
    args = [*runner_args, "--batch-size", str(batch_size), "--enable-cache"]
    print(f"  fresh run -> {output_root}", flush=True)
    first = run_pipeline(data_dir, output_root, args, run_dir / "run1.log")
    components = latest_components(output_root)
    seconds = {c.node_id: c.seconds for c in components}
    print(f"    {first['wall_s']:.1f} s, peak RSS {first['peak_rss_mb']:.0f} MB, PSS {first['peak_pss_mb']:.0f} MB",
          flush=True)
    print("  cached rerun", flush=True)
    second = run_pipeline(data_dir, output_root, args, run_dir / "run2.log")
    cached_states = _states(latest_components(output_root))
    print(f"    {second['wall_s']:.1f} s", flush=True)
    # The second run reruns the Evaluator (the first run's blessed model became the baseline;
    # it reuses its first evaluation of that same model);
    # from the third on, nothing has changed at all.
    print("  steady rerun", flush=True)
    third = run_pipeline(data_dir, output_root, args, run_dir / "run3.log")
    steady_states = _states(latest_components(output_root))
    print(f"    {third['wall_s']:.1f} s", flush=True)
    print(f"  trainer input benchmark ({input_steps} steps)", flush=True)
    trainer_input = trainer_input_benchmark(output_root, batch_size, input_steps)
    example_gen = seconds.get("CsvExampleGen", 0.0)
    extra = {"template": benchmark_template(data_dir, run_dir)} if template else {}
    return {
        "rows": rows,
        "wall_s": first["wall_s"],
        "peak_rss_mb": first["peak_rss_mb"],
        "peak_pss_mb": first["peak_pss_mb"],
        "max_process_rss_mb": first["max_process_rss_mb"],
        "component_s": seconds,
        "component_peak_rss_mb": peak_by_component(first["memory_samples"], components, column=1),
        "component_peak_pss_mb": peak_by_component(first["memory_samples"], components, column=2),
        "cached_wall_s": second["wall_s"],
        "cached_ratio": second["wall_s"] / first["wall_s"],
        "cached_peak_rss_mb": second["peak_rss_mb"],
        "cached_run_states": cached_states,
        "cached_components": sum(state == "cached" for state in cached_states.values()),
        "steady_wall_s": third["wall_s"],
        "steady_ratio": third["wall_s"] / first["wall_s"],
        "steady_components": sum(state == "cached" for state in steady_states.values()),
        "steady_run_states": steady_states,
        "components": len(cached_states),
        **trainer_input,
        "example_gen_rows_per_s": rows / example_gen if example_gen > 0 else 0.0,
        "output_root": str(output_root),
        **extra,
    }


def median_of(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of every number across repeats, inside nested dicts too (seconds per
    component, the template's figures); anything else is taken from the first repeat."""
    result: dict[str, Any] = {}
    for key, value in repeats[0].items():
        present = [r[key] for r in repeats if key in r]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            result[key] = statistics.median(present)
        elif isinstance(value, dict):
            result[key] = median_of(present)
        else:
            result[key] = value
    return result


# ---------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    import apache_beam
    import psutil
    import tensorflow as tf
    from tfx import version as tfx_version

    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "tfx": tfx_version.__version__,
        "apache_beam": apache_beam.__version__,
    }


# The TFX taxi template (`tfx template copy --model=taxi`, all components, 1000 train steps)
# on the same generated data, LocalDagRunner, measured on this 2-core machine on 2026-11-21
# (issue 5). Quoted, not re-measured by this script: the ratios below are
# against these figures.
TEMPLATE_REFERENCE = {
    15_002: {"wall_s": 52.0, "example_gen_s": 3.1},
    150_020: {"wall_s": 92.0, "example_gen_s": 20.8},
    1_500_200: {"wall_s": 463.0, "example_gen_s": 188.0},
}


def template_figures(figures: dict[str, Any]) -> dict[str, float] | None:
    """The template's wall and ExampleGen seconds for these figures' size: measured in the
    same session when the benchmark ran it (--template), else quoted (TEMPLATE_REFERENCE)."""
    measured = figures.get("template")
    if measured:
        return {"wall_s": measured["wall_s"], "example_gen_s": measured["component_s"].get("CsvExampleGen", 0.0)}
    return TEMPLATE_REFERENCE.get(int(figures["rows"]))


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: a summary per size, then seconds per component."""
    sizes = results["sizes"]
    components = list(dict.fromkeys(c for s in sizes for c in s["median"]["component_s"]))
    m = results["machine"]
    repeats = results["settings"]["repeats"]
    lines = [
        f"# Pipeline benchmark ({m['date_utc']})",
        "",
        f"Machine: {m['cpus']} CPUs, {m['ram_gb']} GB RAM, {m['platform']}; Python {m['python']}, "
        f"TensorFlow {m['tensorflow']}, TFX {m['tfx']}, Beam {m['apache_beam']}.",
        f"Runner args: `{' '.join(results['settings']['runner_args']) or '(defaults)'}`; seed "
        f"{results['settings']['seed']}; "
        + (f"figures are medians of {repeats} repeats." if repeats > 1 else "one run per size (no repeats)."),
        "",
    ]
    header = ["size", "rows", "wall s", "vs template", "ExampleGen rows/s", "vs template", "peak RSS MB",
              "peak PSS MB", "max proc RSS MB", "2nd run s (ratio)", "3rd run s (ratio, cached)", "input/in-memory",
              "streamed/in-memory", "load s"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in sizes:
        r = s["median"]
        template = template_figures(r)
        mark = "" if "template" in r else " (quoted)"
        example_gen_s = r["component_s"].get("CsvExampleGen", 0.0)
        cells = [
            f"x{s['size']:g}", f"{r['rows']:,.0f}", f"{r['wall_s']:.1f}",
            f"{r['wall_s'] / template['wall_s']:.2f}x{mark}" if template else "-",
            f"{r['example_gen_rows_per_s']:,.0f}",
            f"{template['example_gen_s'] / example_gen_s:.1f}x faster{mark}" if template and example_gen_s else "-",
            f"{r['peak_rss_mb']:.0f}", f"{r['peak_pss_mb']:.0f}", f"{r['max_process_rss_mb']:.0f}",
            f"{r['cached_wall_s']:.1f} ({r['cached_ratio']:.2f})",
            f"{r['steady_wall_s']:.1f} ({r['steady_ratio']:.2f}, {r['steady_components']:g}/{r['components']:g})",
            f"{r['input_vs_cached_ratio']:.2f}", f"{r['streamed_vs_cached_ratio']:.2f}", f"{r['in_memory_load_s']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if len(sizes) > 1:
        first, last = sizes[0]["median"], sizes[-1]["median"]
        lines += ["", f"From {first['rows']:,.0f} to {last['rows']:,.0f} rows ({last['rows'] / first['rows']:.0f}x): "
                      f"wall time {last['wall_s'] / first['wall_s']:.2f}x, peak RSS "
                      f"{last['peak_rss_mb'] / first['peak_rss_mb']:.2f}x."]
    lines += ["", "Seconds per component (ML Metadata execution create -> last update):", ""]
    lines += ["| rows | " + " | ".join(components) + " |", "|" + "---|" * (len(components) + 1)]
    for s in sizes:
        r = s["median"]
        lines.append(f"| {r['rows']:,.0f} | " + " | ".join(f"{r['component_s'].get(c, 0.0):.1f}" for c in components)
                     + " |")
    measured = [s["median"] for s in sizes if "template" in s["median"]]
    if measured:
        names = list(dict.fromkeys(c for r in measured for c in r["template"]["component_s"]))
        lines += ["", "TFX taxi template, same session and data (`tfx template copy --model=taxi`, every component "
                      "enabled, 1000 train steps): wall s, peak RSS and PSS MB, then seconds per component:", ""]
        lines += ["| rows | wall s | peak RSS MB | peak PSS MB | " + " | ".join(names) + " |",
                  "|" + "---|" * (len(names) + 4)]
        for r in measured:
            t = r["template"]
            lines.append(f"| {r['rows']:,.0f} | {t['wall_s']:.1f} | {t['peak_rss_mb']:.0f} | "
                         f"{t['peak_pss_mb']:.0f} | "
                         + " | ".join(f"{t['component_s'].get(c, 0.0):.1f}" for c in names) + " |")
    for measure in ("rss", "pss"):
        lines += ["", f"Peak {measure.upper()} (MB, process tree) while each component ran:", ""]
        lines += ["| rows | " + " | ".join(components) + " |", "|" + "---|" * (len(components) + 1)]
        for s in sizes:
            peaks = s["median"].get(f"component_peak_{measure}_mb", {})
            lines.append(f"| {s['median']['rows']:,.0f} | "
                         + " | ".join(f"{peaks.get(c, 0.0):.0f}" for c in components) + " |")
    lines += [
        "",
        "wall s: end-to-end `local_runner.py` in a fresh output directory (process start to exit, imports "
        "included). vs template: against the TFX taxi template on the same data, run in the same session "
        "(--template), or, marked (quoted), against its figures measured on this machine on 2026-11-21 "
        "(TEMPLATE_REFERENCE in benchmark.py, from issue 5). peak RSS: largest sum "
        f"of RSS over the runner's process tree, polled every {POLL_SECONDS} s with psutil (shared pages counted "
        f"once per process); peak PSS: the same with each shared page split between its processes, polled every "
        f"{PSS_POLL_SECONDS} s (costly to read); max proc RSS: "
        "ru_maxrss of the largest single process. 2nd run: `--enable-cache` again on the same output root; the "
        "resolver, Evaluator and Pusher rerun because the first run's blessed model is now the baseline (the "
        "reused model itself, so the Evaluator copies its first evaluation of it). 3rd "
        "run: nothing changed since the 2nd (cached: components ML Metadata records as cached). "
        "input/in-memory: training steps/s fed by `models.trainer.input_fn` as run_fn calls it, over steps/s "
        f"on {CACHED_BATCHES} batches cached in memory; streamed: the same with the in-memory load switched off; "
        "load s: parsing the train split into memory. Data: resampled and perturbed from data/taxi.csv "
        "(see benchmark.py).",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    from models.hparams import HParams

    parser = argparse.ArgumentParser(
        description="Benchmark the pipeline at several data sizes. Arguments not listed here (e.g. "
                    "--beam-workers 2, --train-steps 800) are passed to local_runner.py.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--sizes", default="1,10",
                        help="Comma-separated multiples of the embedded data's 15,002 rows (fractions allowed).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the data generator.")
    parser.add_argument("--repeats", type=int, default=1, help="Runs per size; the table shows medians.")
    parser.add_argument("--output-dir", default=str(DEFAULT_OUTPUT_DIR),
                        help="Generated data (cached by size and seed), run directories, results.json/md.")
    parser.add_argument("--batch-size", type=int, default=HParams().per_replica_batch_size,
                        help="Training batch, for the pipeline runs and the input benchmark.")
    parser.add_argument("--template", action=argparse.BooleanOptionalAction, default=True,
                        help="Also run TFX's taxi template (tfx template copy --model=taxi, every component enabled) "
                             "on the same data in each repeat, for the 'vs template' ratios; with --no-template the "
                             "ratios use its figures quoted from issue 5.")
    parser.add_argument("--input-steps", type=int, default=200,
                        help="Timed training steps of the Trainer input benchmark (after warm-up).")
    args, runner_args = parser.parse_known_args(argv)
    if "--enable-cache" in runner_args or any(a.startswith(("--data-root", "--output-root")) for a in runner_args):
        parser.error("--enable-cache, --data-root and --output-root are set by the benchmark")
    try:
        args.size_list = [float(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes must be numbers, got {args.sizes!r}")
    if not args.size_list or any(s <= 0 for s in args.size_list):
        parser.error("--sizes must be positive")
    if args.repeats < 1 or args.input_steps < 1:
        parser.error("--repeats and --input-steps must be at least 1")
    return args, runner_args


def main(argv: Sequence[str] | None = None) -> int:
    args, runner_args = parse_args(argv)
    output_dir = Path(args.output_dir).resolve()
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {"seed": args.seed, "repeats": args.repeats, "batch_size": args.batch_size,
                     "input_steps": args.input_steps, "runner_args": runner_args,
                     "rss": "peak_rss_mb: psutil poll of process-tree RSS sum; peak_pss_mb: the same for PSS; "
                            "max_process_rss_mb: ru_maxrss via a fresh intermediate process"},
        "sizes": [],
    }
    for size in args.size_list:
        print(f"size x{size:g}", flush=True)
        data_dir, rows = cached_dataset(output_dir, size, args.seed)
        repeats = []
        for repeat in range(args.repeats):
            run_dir = output_dir / "runs" / f"rows-{rows}" / f"repeat-{repeat}"
            repeats.append(benchmark_once(data_dir, rows, run_dir, runner_args, args.batch_size, args.input_steps,
                                          template=args.template))
        results["sizes"].append({"size": size, "median": median_of(repeats), "repeats": repeats})
        # Written after every size, so a long benchmark that is stopped keeps what it measured.
        (output_dir / "results.json").write_text(json.dumps(results, indent=2))
        (output_dir / "results.md").write_text(markdown(results))
    print()
    print((output_dir / "results.md").read_text())
    print(f"Written: {output_dir / 'results.json'}, {output_dir / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
