"""Continuous training on the embedded data cut into quarterly spans: time per run as runs
accumulate, and the quality and cost of the rolling window's size and of warm start.

    python -m bench.replay [--runs 12] [--configs window4 cold window1 window8 pruned short short-cold]

Written to outputs/bench/replay.{json,md} (docs/spans.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from models import problem as problem_lib
from pipeline.config import DEFAULT_OUTPUT_ROOT, DEFAULT_PROBLEM_DIR
from report import history

CONFIGS: dict[str, list[str]] = {
    "window4": ["--window-spans", "4"],
    "cold": ["--window-spans", "4", "--no-warm-start"],
    "window1": ["--window-spans", "1"],
    "window8": ["--window-spans", "8"],
    "pruned": ["--window-spans", "4", "--keep-runs", "2"],
    # A quarter of the training steps: what warm start buys when training is cut short.
    "short": ["--window-spans", "4", "--train-steps", "100"],
    "short-cold": ["--window-spans", "4", "--train-steps", "100", "--no-warm-start"],
}
OUT = Path(DEFAULT_OUTPUT_ROOT) / "bench"


def replay(name: str, runs: int) -> list[history.Entry]:
    """Replays ``runs`` spans under configuration ``name``; the history it left."""
    root = OUT / "replay" / name
    command = [sys.executable, "-m", "authoring.replay", "--problem", DEFAULT_PROBLEM_DIR, "--output-root", str(root)]
    command += ["--runs", str(runs), "--", "--accept-drift", "--no-report", *CONFIGS[name]]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return history.read(history.history_path(str(root), problem_lib.load(DEFAULT_PROBLEM_DIR).name))


def figures(entries: list[history.Entry], root: Path) -> dict:
    """Seconds per run early and late, the candidates' metric from the fifth run on (the
    runs' component seconds, as the history records them)."""
    # From the fifth run on the window is full (4 spans by default): the runs after it, in
    # two halves, show whether time per run grows as runs accumulate.
    seconds = [entry.seconds for entry in entries[4:]] or [entry.seconds for entry in entries]
    half = max(1, len(seconds) // 2)
    values = [entry.value for entry in entries[4:] if entry.value is not None]
    return {
        "runs": len(entries),
        "seconds_early_median": statistics.median(seconds[:half]),
        "seconds_late_median": statistics.median(seconds[half:] or seconds),
        "transform_trainer_seconds_by_run": [
            [entry.components.get("Transform"), entry.components.get("Trainer")] for entry in entries
        ],
        "metric": entries[-1].metric,
        "metric_from_run5_mean": statistics.fmean(values) if values else None,
        "metric_by_run": [entry.value for entry in entries],
        "blessed": sum(entry.blessed for entry in entries),
        "warm_started": sum("warm-started" in (entry.warm_start or "") for entry in entries),
        "disk_bytes": sum(p.stat().st_size for p in (root / "pipelines").rglob("*") if p.is_file()),
    }


def markdown(results: dict[str, dict]) -> str:
    lines = [
        "| configuration | flags | runs | s/run, runs 5 on, 1st half | 2nd half | mean AUC, run 5 on | blessed | "
        "warm-started | artifacts MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        metric = "-" if r["metric_from_run5_mean"] is None else f"{r['metric_from_run5_mean']:.4f}"
        lines.append(
            f"| {name} | `{' '.join(CONFIGS[name])}` | {r['runs']} | {r['seconds_early_median']:.1f} | "
            f"{r['seconds_late_median']:.1f} | {metric} | {r['blessed']} | {r['warm_started']} | "
            f"{r['disk_bytes'] / 1e6:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=12, help="Spans replayed per configuration.")
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["window4", "cold", "window1"])
    args = parser.parse_args(argv)
    # Configurations measured before stay in the results (each replays from scratch).
    saved = OUT / "replay.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}
    for name in args.configs:
        results[name] = figures(replay(name, args.runs), OUT / "replay" / name)
        os.makedirs(OUT, exist_ok=True)
        saved.write_text(json.dumps(results, indent=1))
        (OUT / "replay.md").write_text(markdown(results))
        print(markdown({name: results[name]}), flush=True)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
