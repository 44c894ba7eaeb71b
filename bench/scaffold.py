"""Scaffolding a CSV at scale (``python -m bench.scaffold``): ``python -m authoring.scaffold``
on the benchmark's generated taxi rows (``bench/generate.py``, cached as ``python -m bench``
caches them) as each task of ``bench/tasks.py``, timed, with the peak memory (RSS and PSS
of its process tree, ``bench.measure``). The scaffold reads the CSV a block at a time, so
its memory should stay flat in the file's size; its time should grow with the rows.

    python -m bench.scaffold [--sizes 10,100,300] [--repeats 3] [--tasks multiclass,regression]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from bench.generate import cached_dataset
from bench.measure import run_measured
from bench.tasks import TASK_LABELS, parse_tasks
from pipeline.config import DEFAULT_OUTPUT_ROOT, REPO_ROOT

DEFAULT_SIZES = (10.0, 100.0, 300.0)  # 150k, 1.5M and 4.5M rows


def scaffold_once(csv_path: Path, task: str, log: Path) -> dict:
    """One scaffold of ``csv_path`` as ``task``'s problem, into a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="bench-scaffold-") as scratch:
        command = ["-m", "authoring.scaffold", "--csv", str(csv_path), "--label", TASK_LABELS[task]]
        command += ["--task", task, "--name", f"bench-{task}", "--output", os.path.join(scratch, "problem")]
        return run_measured(command, REPO_ROOT, log)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(f"{s:g}" for s in DEFAULT_SIZES), help="Multiples of 15k rows.")
    parser.add_argument("--repeats", type=int, default=3, help="Scaffolds per size and task (medians reported).")
    parser.add_argument("--tasks", default=",".join(TASK_LABELS), help="multiclass, regression or both.")
    parser.add_argument("--seed", type=int, default=0, help="The generated data's seed.")
    parser.add_argument("--work", default=os.path.join(DEFAULT_OUTPUT_ROOT, "bench"), help="Data and logs.")
    args = parser.parse_args(argv)
    work = Path(args.work)
    tasks = parse_tasks(args.tasks)
    datasets = [cached_dataset(work, float(size), args.seed) for size in args.sizes.split(",")]
    print(f"{'rows':>10} {'task':>11} {'median s':>9} {'min-max s':>13} {'peak RSS MB':>12} {'peak PSS MB':>12}")
    for data_dir, rows in datasets:
        csv_path = data_dir / "data.csv"
        for task in tasks:
            runs = [
                scaffold_once(csv_path, task, work / f"scaffold-{task}-{rows}-{repeat}.log")
                for repeat in range(args.repeats)
            ]
            walls = [r["wall_s"] for r in runs]
            print(
                f"{rows:>10} {task:>11} {statistics.median(walls):>9.1f} "
                f"{f'{min(walls):.1f}-{max(walls):.1f}':>13} {max(r['peak_rss_mb'] for r in runs):>12.0f} "
                f"{max(r['peak_pss_mb'] for r in runs):>12.0f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
