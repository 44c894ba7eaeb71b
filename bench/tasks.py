"""The benchmark's other tasks: its generated data as a multi-class and a regression
problem, each scaffolded as a user would (``python -m authoring.scaffold``, timed, with its
peak memory) and run once in a fresh output directory, for each task's seconds and memory
per component beside the binary problem's.

The labels are the taxi data's (``bench/generate.py`` makes taxi rows): the fare as a
quantity, and the day of the week as classes. Not the payment type: three of its classes
have 1-4 rows in the 15,002 embedded ones, which the scaffold refuses at small sizes.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.measure import latest_run, peak_by_component, run_measured, run_pipeline
from pipeline.config import REPO_ROOT

TASK_LABELS = {"multiclass": "trip_start_day", "regression": "fare"}


def parse_tasks(text: str) -> list[str]:
    """``--tasks``: a comma-separated list of ``TASK_LABELS``' tasks, or ``none``."""
    if text.strip() == "none":
        return []
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    if unknown := [t for t in tasks if t not in TASK_LABELS]:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}: choose from {', '.join(TASK_LABELS)}, or none")
    return list(dict.fromkeys(tasks))


def benchmark_task(task: str, data_dir: Path, run_dir: Path, runner_args: Sequence[str]) -> dict[str, Any]:
    """Scaffolds ``task``'s problem from ``data_dir``'s CSV into ``run_dir``, then runs the
    pipeline on it once; the scaffold's and the run's seconds and peak memory, and the run's
    seconds, peak RSS and PSS per component and metrics."""
    problem_dir = run_dir / f"problem-{task}"
    output_root = run_dir / f"outputs-{task}"
    for stale in (problem_dir, output_root):
        if stale.exists():
            shutil.rmtree(stale)
    print(f"  {task}: scaffold (label {TASK_LABELS[task]})", flush=True)
    scaffold = run_measured(
        [
            *("-m", "authoring.scaffold", "--csv", str(data_dir / "data.csv"), "--label", TASK_LABELS[task]),
            *("--task", task, "--name", f"bench-{task}", "--output", str(problem_dir)),
        ],
        REPO_ROOT,
        run_dir / f"scaffold-{task}.log",
    )
    print(f"    {scaffold['wall_s']:.1f} s, peak PSS {scaffold['peak_pss_mb']:.0f} MB", flush=True)
    print(f"  {task}: fresh run -> {output_root}", flush=True)
    run = run_pipeline(data_dir, output_root, ["--problem", str(problem_dir), *runner_args], run_dir / f"{task}.log")
    summary = latest_run(output_root)
    print(f"    {run['wall_s']:.1f} s, peak PSS {run['peak_pss_mb']:.0f} MB", flush=True)
    return {
        "scaffold_s": scaffold["wall_s"],
        "scaffold_peak_rss_mb": scaffold["peak_rss_mb"],
        "scaffold_peak_pss_mb": scaffold["peak_pss_mb"],
        "wall_s": run["wall_s"],
        "peak_rss_mb": run["peak_rss_mb"],
        "peak_pss_mb": run["peak_pss_mb"],
        "component_s": {c.node_id: c.seconds for c in summary.components},
        "component_peak_rss_mb": peak_by_component(run["memory_samples"], summary.components, column=1),
        "component_peak_pss_mb": peak_by_component(run["memory_samples"], summary.components, column=2),
        "metrics": dict(summary.metrics),
    }
