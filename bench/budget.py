"""What the training budget from the data (models/budget.py) costs and buys: the whole local
pipeline at several sizes, trained by the default budget and by a fixed step count (or by
budgets capped at ``--rows-seen`` rows); per size and setting, the medians of the eval AUC,
the Trainer's and the run's seconds and the steps run (docs/training-budget.md).

    python -m bench.budget [--sizes 1,10,100] [--repeats 3] [--fixed-steps 400] [-- LOCAL_RUNNER_ARGS]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.generate import cached_dataset
from bench.measure import latest_run, median_of, run_pipeline
from bench.report import machine_info
from pipeline.config import DEFAULT_OUTPUT_ROOT

DEFAULT_OUTPUT_DIR = Path(DEFAULT_OUTPUT_ROOT) / "bench" / "budget"
# The benchmark's generated data is the taxi problem's; its pipeline name (bench/measure.py).
METRIC = "auc"

warnings.filterwarnings("ignore", category=FutureWarning)


def settings(fixed_steps: int, rows_seen: Sequence[int] = ()) -> dict[str, list[str]]:
    """Setting name -> its runner arguments: the budget and a fixed step count, or the budget
    capped at each of ``rows_seen``."""
    if rows_seen:
        return {f"at most {rows:,} rows seen": ["--hparam", f"max_rows_seen={rows}"] for rows in rows_seen}
    return {"budget": [], f"{fixed_steps} steps": ["--train-steps", str(fixed_steps)]}


def trained_steps(output_root: Path) -> dict[str, Any]:
    """What the latest Trainer run recorded: epochs run, steps per epoch, the budget's cap."""
    from models.budget import rows_read
    from models.trainer import read_training_record

    runs = sorted(glob.glob(str(output_root / "pipelines" / "*" / "Trainer" / "model_run" / "*")), key=os.path.getmtime)
    record = read_training_record(runs[-1]) if runs else {}
    epochs_run = (record.get("last_epoch") or 0) + 1 if record else 0
    return {
        "epochs_run": epochs_run,
        "steps_run": epochs_run * record.get("steps_per_epoch", 0),
        "rows_seen": rows_read(record) or 0,
        "max_steps": record.get("budget", {}).get(
            "max_steps", record.get("epochs", 0) * record.get("steps_per_epoch", 0)
        ),
    }


def run_once(data_dir: Path, run_dir: Path, runner_args: Sequence[str]) -> dict[str, Any]:
    """One fresh local run: its wall seconds, the Trainer's seconds, the eval metric, steps."""
    output_root = run_dir / "outputs"
    if output_root.exists():
        import shutil

        shutil.rmtree(output_root)
    measured = run_pipeline(data_dir, output_root, [*runner_args, "--no-report"], run_dir / "run.log")
    summary = latest_run(output_root)
    trainer = next((c.seconds for c in summary.components if c.node_id == "Trainer"), 0.0)
    return {
        "wall_s": measured["wall_s"],
        "trainer_s": trainer,
        METRIC: summary.metrics.get(METRIC),
        **trained_steps(output_root),
    }


def markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown table: one row per size and setting."""
    m = results["machine"]
    repeats = results["settings"]["repeats"]
    lines = [
        f"# What the training budget costs and buys ({m['date_utc']})",
        "",
        f"Machine: {m['cpus']} CPUs, {m['ram_gb']} GB RAM; TensorFlow {m['tensorflow']}, TFX {m['tfx']}. "
        f"Medians of {repeats} repeat(s), the settings alternated within each.",
        "",
        "| rows | setting | eval AUC | AUC range | Trainer s | wall s | steps run (cap) | rows seen |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in results["sizes"]:
        for name, runs in size["settings"].items():
            med = median_of(runs)
            aucs = [r[METRIC] for r in runs if r.get(METRIC) is not None]
            lines.append(
                f"| {size['rows']:,} | {name} | {med.get(METRIC, float('nan')):.4f} | "
                f"{min(aucs):.4f}-{max(aucs):.4f} | {med['trainer_s']:.1f} | {med['wall_s']:.1f} | "
                f"{med['steps_run']:.0f} ({med['max_steps']:.0f}) | "
                + (f"{med['rows_seen']:,.0f} |" if med.get("rows_seen") else "- |")
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    runner_args: list[str] = []
    if "--" in argv:
        runner_args = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,10,100", help="Multiples of the embedded data's rows (bench --sizes).")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--fixed-steps", type=int, default=400, help="The fixed step count compared with.")
    parser.add_argument(
        "--rows-seen", default="", help="Caps on the rows training sees to compare (comma-separated), instead."
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",")]
    rows_seen = [int(r) for r in args.rows_seen.split(",") if r]
    if args.repeats < 1 or args.fixed_steps < 1 or any(s <= 0 for s in (*sizes, *rows_seen)):
        parser.error("--repeats, --fixed-steps, --sizes and --rows-seen must be positive")
    output_dir = args.output_dir.resolve()
    # The generated data sets are shared with `python -m bench` (same directory layout).
    data_root = output_dir.parent
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {
            "repeats": args.repeats,
            "fixed_steps": args.fixed_steps,
            "rows_seen": rows_seen,
            "runner_args": runner_args,
        },
        "sizes": [],
    }
    for size in sizes:
        data_dir, rows = cached_dataset(data_root, size, args.seed)
        compared = settings(args.fixed_steps, rows_seen)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in compared}
        for repeat in range(args.repeats):
            # Alternate which setting goes first, so neither always runs on a warmer machine.
            order = list(compared.items())
            for name, extra in order if repeat % 2 == 0 else reversed(order):
                print(f"x{size:g} ({rows:,} rows), repeat {repeat + 1}: {name}", flush=True)
                setting_dir = name.replace(" ", "-").replace(",", "")
                run_dir = output_dir / "runs" / f"rows-{rows}" / setting_dir / f"repeat-{repeat}"
                run_dir.mkdir(parents=True, exist_ok=True)
                result = run_once(data_dir, run_dir, [*runner_args, *extra])
                print(f"  {json.dumps(result)}", flush=True)
                runs[name].append(result)
        results["sizes"].append({"size": size, "rows": rows, "settings": runs})
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / "results.json").write_text(json.dumps(results, indent=2))
        (output_dir / "results.md").write_text(markdown(results))
    print()
    print((output_dir / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
