"""The benchmark's command line (``python -m bench``, ``make bench``): for each size, the
data, then each repeat (fresh run, cached reruns, Trainer input benchmark, the template),
then the medians, written to results.json and results.md after every size.

One repeat is put together here rather than in ``measure``, because it runs the template
too and ``template`` builds on ``measure``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.generate import cached_dataset
from bench.measure import (
    component_states,
    latest_components,
    latest_run,
    median_of,
    peak_by_component,
    run_pipeline,
    trainer_input_benchmark,
)
from bench.report import machine_info, markdown
from bench.tasks import TASK_LABELS, benchmark_task, parse_tasks
from bench.template import benchmark_template
from models.hparams import HParams
from pipeline.config import DEFAULT_OUTPUT_ROOT

DEFAULT_OUTPUT_DIR = Path(DEFAULT_OUTPUT_ROOT) / "bench"

# Google client libraries warn at import about future Python support; noise here.
warnings.filterwarnings("ignore", category=FutureWarning)


def _fresh_run(data_dir: Path, rows: int, output_root: Path, args: Sequence[str], run_dir: Path) -> dict[str, Any]:
    """The first run, into an empty output root: wall time, memory, seconds and peak memory per component."""
    print(f"  fresh run -> {output_root}", flush=True)
    first = run_pipeline(data_dir, output_root, args, run_dir / "run1.log")
    components = latest_components(output_root)
    print(
        f"    {first['wall_s']:.1f} s, peak RSS {first['peak_rss_mb']:.0f} MB, PSS {first['peak_pss_mb']:.0f} MB",
        flush=True,
    )
    return {
        "rows": rows,
        "wall_s": first["wall_s"],
        "peak_rss_mb": first["peak_rss_mb"],
        "peak_pss_mb": first["peak_pss_mb"],
        "max_process_rss_mb": first["max_process_rss_mb"],
        "component_s": {c.node_id: c.seconds for c in components},
        "component_peak_rss_mb": peak_by_component(first["memory_samples"], components, column=1),
        "component_peak_pss_mb": peak_by_component(first["memory_samples"], components, column=2),
    }


def _reruns(data_dir: Path, output_root: Path, args: Sequence[str], run_dir: Path, fresh_s: float) -> dict[str, Any]:
    """The second and third runs on the same output root, against the fresh run's
    ``fresh_s`` seconds, and what TFX found cached in each."""
    print("  cached rerun", flush=True)
    second = run_pipeline(data_dir, output_root, args, run_dir / "run2.log")
    second_run = latest_run(output_root)
    cached_states = component_states(second_run.components)
    print(f"    {second['wall_s']:.1f} s", flush=True)
    # The second run reruns the Evaluator (the first run's blessed model became the baseline;
    # it reuses its first evaluation of that same model);
    # from the third on, nothing has changed at all.
    print("  steady rerun", flush=True)
    third = run_pipeline(data_dir, output_root, args, run_dir / "run3.log")
    steady_run = latest_run(output_root)
    # No new run in ML Metadata: local_runner found nothing changed and started no TFX
    # (runs/unchanged.py); else TFX ran and recorded each component's state.
    steady_reused = steady_run.run_id == second_run.run_id
    steady_states = {} if steady_reused else component_states(steady_run.components)
    print(f"    {third['wall_s']:.1f} s{' (unchanged: TFX not started)' if steady_reused else ''}", flush=True)
    return {
        "cached_wall_s": second["wall_s"],
        "cached_ratio": second["wall_s"] / fresh_s,
        "cached_peak_rss_mb": second["peak_rss_mb"],
        "cached_run_states": cached_states,
        "cached_components": sum(state == "cached" for state in cached_states.values()),
        "steady_wall_s": third["wall_s"],
        "steady_ratio": third["wall_s"] / fresh_s,
        "steady_reused": steady_reused,
        "steady_components": sum(state == "cached" for state in steady_states.values()),
        "steady_run_states": steady_states,
        "components": len(cached_states),
    }


def _tasks_and_template(
    data_dir: Path, run_dir: Path, task_args: Sequence[str], template: bool, tasks: Sequence[str]
) -> dict[str, Any]:
    """Each of ``tasks`` scaffolded and run fresh, and the template's run if asked for."""
    extra: dict[str, Any] = {}
    if tasks:
        extra["tasks"] = {task: benchmark_task(task, data_dir, run_dir, task_args) for task in tasks}
    if template:
        extra["template"] = benchmark_template(data_dir, run_dir)
    return extra


def benchmark_once(
    data_dir: Path,
    rows: int,
    run_dir: Path,
    runner_args: Sequence[str],
    batch_size: int,
    input_steps: int,
    template: bool = False,
    tasks: Sequence[str] = (),
) -> dict[str, Any]:
    """One repeat at one size: fresh run, cached reruns, Trainer input benchmark, each of
    ``tasks`` scaffolded and run fresh (``bench.tasks``), and optionally a fresh run of TFX's
    taxi template on the same data."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    output_root = run_dir / "outputs"
    args = [*runner_args, "--batch-size", str(batch_size), "--enable-cache"]
    fresh = _fresh_run(data_dir, rows, output_root, args, run_dir)
    reruns = _reruns(data_dir, output_root, args, run_dir, fresh["wall_s"])
    print(f"  trainer input benchmark ({input_steps} steps)", flush=True)
    trainer_input = trainer_input_benchmark(output_root, batch_size, input_steps)
    task_args = [*runner_args, "--batch-size", str(batch_size)]
    extra = _tasks_and_template(data_dir, run_dir, task_args, template, tasks)
    example_gen = fresh["component_s"].get("CsvExampleGen", 0.0)
    return {
        **fresh,
        **reruns,
        **trainer_input,
        "example_gen_rows_per_s": rows / example_gen if example_gen > 0 else 0.0,
        "output_root": str(output_root),
        **extra,
    }


def _parser() -> argparse.ArgumentParser:
    """The benchmark's own flags, with their defaults in --help."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark the pipeline at several data sizes. Arguments not listed here (e.g. "
        "--beam-workers 2, --train-steps 800) are passed to local_runner.py.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--sizes",
        default="1,10",
        help="Comma-separated multiples of the embedded data's row count (fractions allowed).",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the data generator.")
    parser.add_argument("--repeats", type=int, default=1, help="Runs per size; the table shows medians.")
    parser.add_argument(
        "--output-dir",
        default=str(DEFAULT_OUTPUT_DIR),
        help="Generated data (cached by size and seed), run directories, results.json/md.",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=HParams().per_replica_batch_size,
        help="Training batch, for the pipeline runs and the input benchmark.",
    )
    parser.add_argument(
        "--template",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Also run TFX's taxi template (tfx template copy --model=taxi, every component enabled) "
        "on the same data in each repeat, for the 'vs template' ratios; with --no-template the "
        "ratios use its figures quoted in bench/template_reference.json.",
    )
    parser.add_argument(
        "--tasks",
        default=",".join(TASK_LABELS),
        help="Besides the binary problem, the same data scaffolded and run as these tasks (labels: "
        + ", ".join(f"{task} {label}" for task, label in TASK_LABELS.items())
        + "), or none.",
    )
    parser.add_argument(
        "--input-steps",
        type=int,
        default=200,
        help="Timed training steps of the Trainer input benchmark (after warm-up).",
    )
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace, runner_args: list[str]) -> None:
    """Stops with a usage error on flags the benchmark sets itself or values it cannot use;
    sets ``args.size_list`` and ``args.task_list``."""
    if "--enable-cache" in runner_args or any(a.startswith(("--data-root", "--output-root")) for a in runner_args):
        parser.error("--enable-cache, --data-root and --output-root are set by the benchmark")
    try:
        args.size_list = [float(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes must be numbers, got {args.sizes!r}")
    if not args.size_list or any(s <= 0 for s in args.size_list):
        parser.error("--sizes must be positive")
    try:
        args.task_list = parse_tasks(args.tasks)
    except ValueError as err:
        parser.error(f"--tasks: {err}")
    if args.repeats < 1 or args.input_steps < 1:
        parser.error("--repeats and --input-steps must be at least 1")


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The benchmark's own flags, and the rest (passed on to ``local_runner.py``)."""
    parser = _parser()
    args, runner_args = parser.parse_known_args(argv)
    _check(parser, args, runner_args)
    return args, runner_args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the benchmark; writes and prints the results."""
    args, runner_args = parse_args(argv)
    output_dir = Path(args.output_dir).resolve()
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {
            "seed": args.seed,
            "repeats": args.repeats,
            "batch_size": args.batch_size,
            "input_steps": args.input_steps,
            "tasks": {task: TASK_LABELS[task] for task in args.task_list},
            "runner_args": runner_args,
            "rss": "peak_rss_mb: psutil poll of process-tree RSS sum; peak_pss_mb: the same for PSS; "
            "max_process_rss_mb: ru_maxrss via a fresh intermediate process",
        },
        "sizes": [],
    }
    for size in args.size_list:
        print(f"size x{size:g}", flush=True)
        data_dir, rows = cached_dataset(output_dir, size, args.seed)
        repeats = []
        for repeat in range(args.repeats):
            run_dir = output_dir / "runs" / f"rows-{rows}" / f"repeat-{repeat}"
            repeats.append(
                benchmark_once(
                    data_dir,
                    rows,
                    run_dir,
                    runner_args,
                    args.batch_size,
                    args.input_steps,
                    template=args.template,
                    tasks=args.task_list,
                )
            )
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
