"""Quality against boosted trees on public data nobody tuned for: for each data set of
``bench/datasets.py``, what a new user does, with no edit, and how good the result is.

    python -m bench.quality [--datasets wine,fair] [--repeats 1] [--output-dir DIR] [--keep]

Per data set: its CSV scaffolded, the pipeline run with the defaults, the references fit on
the run's own split (``bench/reference.py``), the figures recorded (docs/quality.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import datasets as datasets_lib
from bench.datasets import Dataset

if TYPE_CHECKING:
    from models.problem import Problem
    from pipeline.config import PipelineConfig
    from report.run_summary import RunSummary

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT_DIR = REPO_ROOT / "outputs" / "bench" / "quality"
# Ours against HGB's: at least this share of its AUC or accuracy, at most this multiple of its RMSE.
GOAL = {"auc": 0.98, "accuracy": 0.98, "rmse": 1.02, "mae": 1.02}
HIGHER_IS_BETTER = {"auc": True, "accuracy": True, "rmse": False, "mae": False}
RUN_TIMEOUT_S = 3600
# Lines of a failed run's log kept in the results.
LOG_TAIL = 12
# --model-family's default: the family the scaffold writes, as a user gets it.
SCAFFOLDED = "scaffolded"


def goal_met(metric: str, ours: float | None, boosted_trees: float | None) -> bool | None:
    """Whether ``ours`` reaches the goal against the boosted trees' figure (None: no figures)."""
    if ours is None or boosted_trees is None:
        return None
    if HIGHER_IS_BETTER[metric]:
        return ours >= GOAL[metric] * boosted_trees
    return ours <= GOAL[metric] * boosted_trees


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# ---------------------------------------------------------------- one data set


def scaffold(dataset: Dataset, folder: Path, family: str = SCAFFOLDED) -> dict[str, Any]:
    """Writes the data set's CSV into ``folder`` and scaffolds the problem there, training
    ``family`` (``SCAFFOLDED``: what the scaffold wrote; else "network", "trees" or "choose"
    written into the spec); its size and the scaffold's decisions."""
    from authoring import choose_model
    from authoring import scaffold as scaffold_lib
    from models.problem import ModelFamily, load

    if folder.exists():
        shutil.rmtree(folder)
    csv_path = folder / f"{dataset.name}.csv"
    data = dataset.write_csv(str(csv_path))
    plan, _, _ = scaffold_lib.scaffold(
        str(csv_path), dataset.label, task=dataset.task, name=dataset.name, output=str(folder), force=True
    )
    if family != SCAFFOLDED:
        choose_model.write_family(str(folder), ModelFamily(family), f"bench.quality --model-family {family}")
    chosen: dict[str, Any] = {"family": load(str(folder)).model.value}
    return {
        **chosen,
        "rows": len(data),
        "columns": len(data.columns),
        "inputs": len([c for c in plan.columns if c.kind not in ("unused", "label")]),
        "unused": [c.name for c in plan.of_kind("unused")],
        "task": plan.task.value,
        "metric": plan.metric,
        "threshold": plan.threshold,
    }


def run_pipeline(
    folder: Path, output_root: Path, log_path: Path, timeout: float, runner_flags: Sequence[str] = ()
) -> dict[str, Any]:
    """``local_runner.py --problem folder`` with the defaults in a process of its own: its exit
    code and wall seconds."""
    from launch.local import run_in_own_process

    code, seconds = run_in_own_process(_runner_args(folder, output_root, runner_flags), str(log_path), timeout)
    return {"returncode": code, "wall_s": seconds}


def _runner_args(folder: Path, output_root: Path, runner_flags: Sequence[str] = ()) -> list[str]:
    return ["--problem", str(folder), "--output-root", str(output_root), "--no-report", *runner_flags]


def read_run(folder: Path, output_root: Path, runner_flags: Sequence[str] = ()):
    """The run's configuration (as local_runner builds it) and its summary from ML Metadata."""
    import local_runner
    from report.run_summary import summarize_run

    argv = _runner_args(folder, output_root, runner_flags)
    config = local_runner.config_from_args(local_runner.parse_args(argv))
    return config, summarize_run(local_runner.metadata_config(config), config.pipeline_name)


def training_figures(model_run_uri: str | None) -> dict[str, Any]:
    """What the Trainer recorded (``training.json``) of its epochs and steps, read defensively
    (fields may be absent), and the validation curve of the metric its schedule monitored."""
    if not model_run_uri:
        return {}
    path = os.path.join(model_run_uri, "training.json")
    record = json.loads(Path(path).read_text()) if os.path.exists(path) else {}
    keys = ("epochs", "steps_per_epoch", "global_batch", "last_epoch", "best_epoch", "stopped_early_at_epoch")
    found: dict[str, Any] = {k: record.get(k) for k in keys}
    choice = {"choice": record["choice"]} if record.get("choice") else {}
    if record.get("family") == "trees":
        return {"family": "trees", "trees": record.get("trees"), "trained_s": record.get("trained_seconds"), **choice}
    found.update(choice)
    found["monitored"] = monitored = record.get("monitored")
    found["best_monitored"] = record.get(f"best_{monitored}") if monitored else None
    found["final_learning_rate"] = record.get("final_learning_rate")
    if isinstance(record.get("budget"), dict):
        found["budget"] = {k: v for k, v in record["budget"].items() if k != "reason"}
        found["budget_reason"] = record["budget"].get("reason")
    try:
        from report.read import training_curves

        curves = training_curves(model_run_uri)
        name = (monitored or "").removeprefix("val_")
        found["validation_curve"] = [v for _, v in curves.get(name, {}).get("validation", [])]
    except Exception as err:  # noqa: BLE001 - the curve is a nicety; the figures stand without it
        found["validation_curve_error"] = f"{type(err).__name__}: {err}"
    return found


def _log_tail(log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines() if log_path.exists() else []
    failed = [line for line in lines if "FAILED" in line or line.startswith("error:")]
    return "\n".join(failed[-3:] or lines[-LOG_TAIL:])


def _described(dataset: Dataset) -> dict[str, Any]:
    """The data set as the registry describes it, before anything ran."""
    return {
        "name": dataset.name,
        "package": dataset.package,
        "source": dataset.source,
        "label": dataset.label,
        "task": dataset.task,
        "about": dataset.about,
        "cleaning": dataset.cleaning,
        "status": "ok",
        "runs": [],
    }


def _run_figures(problem: Problem, summary: RunSummary) -> dict[str, Any]:
    """What one run's summary says: our metric, the blessing, seconds per component, the
    failed component if any, and the Trainer's record of its training."""
    trainer = summary.component("Trainer")
    return {
        "ours": summary.metrics.get(problem.blessing.metric),
        "blessed": summary.blessed,
        "example_count": summary.metrics.get("example_count"),
        "trainer_s": trainer.seconds if trainer else None,
        "component_s": {c.node_id: round(c.seconds, 2) for c in summary.components},
        "failed_component": next((c.node_id for c in summary.components if c.state == "FAILED"), None),
        "training": training_figures(summary.outputs.get("Trainer.model_run")),
    }


def _reference_figures(problem: Problem, examples: str) -> dict[str, Any]:
    """The references fit on the run's train split and scored on its eval split, with the
    splits' sizes; a failure is recorded (``reference_error``), not raised."""
    from bench import reference

    try:
        train, eval_ = reference.read_split(examples, "train"), reference.read_split(examples, "eval")
        scores = reference.references(problem, train, eval_)
    except Exception as err:  # noqa: BLE001 - recorded; our figures stand without it
        return {"reference_error": f"{type(err).__name__}: {err}"}
    return {
        "train_rows": len(train),
        "eval_rows": len(eval_),
        "boosted_trees": scores[reference.BOOSTED_TREES],
        "trivial": scores[reference.TRIVIAL],
        "boosted_trees_fit_s": scores["fit_s"],
    }


def _run_error(returncode: int | None, failed_component: str | None, log_path: Path) -> str:
    exit_code = "timed out" if returncode is None else f"exit {returncode}"
    where = f" in {failed_component}" if failed_component else ""
    return f"run failed ({exit_code}){where}: {_log_tail(log_path)}"


def _fresh_run(
    folder: Path, output_root: Path, log_path: Path, timeout: float, runner_flags: Sequence[str] = ()
) -> tuple[dict[str, Any], PipelineConfig | None, RunSummary | None]:
    """One run into a fresh output root (no baseline, no warm start, no cache): what is
    recorded of it, and its configuration and summary (None, None when ML Metadata has none)."""
    if output_root.exists():
        shutil.rmtree(output_root)
    load_before = os.getloadavg()[0]
    ran = run_pipeline(folder, output_root, log_path, timeout, runner_flags)
    run: dict[str, Any] = {"wall_s": ran["wall_s"], "returncode": ran["returncode"], "log": str(log_path)}
    # Other processes on the machine slow the run: the 1-minute load average before and after it.
    run["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    try:
        config, summary = read_run(folder, output_root, runner_flags)
    except Exception as err:  # noqa: BLE001 - no run recorded at all
        config, summary, run["summary_error"] = None, None, f"{type(err).__name__}: {err}"
    if summary is not None:
        run.update(_run_figures(config.problem, summary))
    if ran["returncode"] != 0:
        run["error"] = _run_error(ran["returncode"], run.get("failed_component"), log_path)
    return run, config, summary


def measure(
    dataset: Dataset,
    output_dir: Path,
    repeats: int,
    keep: bool,
    timeout: float,
    family: str = "network",
    runner_flags: Sequence[str] = (),
) -> dict[str, Any]:
    """Everything recorded for one data set: the scaffold's decisions, each run's figures, the
    references, the medians and the goal's verdict; a failure is recorded, not raised."""
    result = _described(dataset)
    folder = output_dir / "problems" / dataset.name
    try:
        result.update(scaffold(dataset, folder, family))
    except Exception as err:  # noqa: BLE001 - recorded, and the other data sets go on
        result.update(status="scaffold failed", error=f"{type(err).__name__}: {err}")
        return result
    for repeat in range(repeats):
        output_root = output_dir / "runs" / dataset.name / str(repeat)
        log_path = output_dir / "logs" / f"{dataset.name}-{repeat}.log"
        run, config, summary = _fresh_run(folder, output_root, log_path, timeout, runner_flags)
        # The split is the same in every run (by hash of each row): the references are fit once.
        examples = summary.outputs.get("CsvExampleGen.examples") if summary is not None else None
        if "boosted_trees" not in result and "reference_error" not in result and examples:
            result.update(_reference_figures(config.problem, examples))
        result["runs"].append(run)
        if not keep:
            shutil.rmtree(output_root, ignore_errors=True)
    return summarize(result)


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """The medians over the runs, the ratio ours/HGB and the goal's verdict."""
    runs = [r for r in result["runs"] if r.get("returncode") == 0]
    if failed := [r for r in result["runs"] if r.get("returncode") != 0]:
        result["status"] = "run failed" if not runs else f"{len(failed)} of {len(result['runs'])} runs failed"
        result["error"] = failed[0].get("error") or failed[0].get("summary_error")
    result["ours"] = _median([r.get("ours") for r in runs])
    result["wall_s"] = _median([r["wall_s"] for r in runs])
    result["trainer_s"] = _median([r.get("trainer_s") for r in runs])
    result["blessed"] = sum(bool(r.get("blessed")) for r in runs)
    ours, trees = result["ours"], result.get("boosted_trees")
    result["ratio"] = ours / trees if ours is not None and trees else None
    result["goal_met"] = goal_met(result["metric"], ours, trees) if "metric" in result else None
    return result


# ---------------------------------------------------------------- the report


def _metric(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}" if abs(value) >= 10 else f"{value:.4f}"


def _seconds(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def training_cell(training: dict[str, Any]) -> str:
    """Epochs run of the most allowed, the best one, and whether training stopped early:
    "7/20 ep x 20 steps, best 5, stopped" (epochs counted from 1)."""
    if not training:
        return "-"
    if training.get("family") == "trees":
        return f"{training.get('trees', '?')} trees"
    last, epochs, best = training.get("last_epoch"), training.get("epochs"), training.get("best_epoch")
    steps = training.get("steps_per_epoch")
    text = f"{'?' if last is None else last + 1}/{epochs if epochs is not None else '?'} ep"
    if steps is not None:
        text += f" x {steps}"
    if best is not None and best >= 0:
        text += f", best {best + 1}"
    text += ", stopped" if training.get("stopped_early_at_epoch") else ", ran out" if last is not None else ""
    return text


def first_training(result: dict[str, Any]) -> dict[str, Any]:
    """What the Trainer of the data set's first successful run recorded (empty: no such run)."""
    runs = [r for r in result.get("runs", []) if r.get("returncode") == 0]
    return runs[0].get("training", {}) if runs else {}


def family_cell(result: dict[str, Any]) -> str:
    """The family that trained, and for a Trainer's choice its validation figures:
    "trees (network 4.47, trees 4.30)"."""
    record = first_training(result).get("choice")
    if not record:
        return result.get("family", "-")
    trials = ", ".join(f"{t['family']} {_metric(t['metric'])}" for t in record.get("trials", []))
    return f"{record['family']} ({trials})" if trials else f"{record['family']} (not chosen)"


HEADER = [
    "data set",
    "rows",
    "cols",
    "task",
    "metric",
    "family",
    "ours",
    "HGB",
    "trivial",
    "ours/HGB",
    "goal",
    "blessed",
    "wall s",
    "Trainer s",
    "HGB fit s",
    "training (epochs x steps)",
]


def row(result: dict[str, Any]) -> list[str]:
    """One data set's cells in the table (``HEADER``)."""
    runs = [r for r in result.get("runs", []) if r.get("returncode") == 0]
    goal = {True: "pass", False: "FAIL", None: "-"}[result.get("goal_met")]
    if result.get("status") != "ok":
        goal = result["status"]
    return [
        result["name"],
        f"{result['rows']:,}" if "rows" in result else "-",
        str(result.get("columns", "-")),
        result["task"],
        result.get("metric", "-"),
        family_cell(result),
        _metric(result.get("ours")),
        _metric(result.get("boosted_trees")),
        _metric(result.get("trivial")),
        "-" if result.get("ratio") is None else f"{result['ratio']:.3f}",
        goal,
        f"{result.get('blessed', 0)}/{len(runs)}" if runs else "-",
        _seconds(result.get("wall_s")),
        _seconds(result.get("trainer_s")),
        _seconds(result.get("boosted_trees_fit_s"), 2),
        training_cell(first_training(result)),
    ]


def table(results: Sequence[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row(r)) + " |" for r in results]
    return "\n".join(lines)


def _heading(results: dict[str, Any]) -> list[str]:
    """The title, the machine, how the runs were made, and how many data sets met the goal."""
    m, settings, measured = results["machine"], results["settings"], results["datasets"]
    repeats = settings["repeats"]
    passed = [r for r in measured if r.get("goal_met")]
    return [
        f"# Quality against boosted trees ({m['date_utc']})",
        "",
        f"Machine: {m['cpus']} CPUs, {m['ram_gb']} GB RAM, {m['platform']}; Python {m['python']}, "
        f"TensorFlow {m['tensorflow']}, TFX {m['tfx']}; scikit-learn {settings['scikit_learn']}. "
        f"Commit {settings['commit']}. Runner args: `{' '.join(settings['runner_args'])}` (the defaults); "
        + (f"figures are medians of {repeats} runs." if repeats > 1 else "one run per data set."),
        "",
        f"Goal met on {len(passed)} of {len(measured)} data sets.",
        "",
    ]


TABLE_NOTES = (
    "family: the model family that trained; where the Trainer chose, in brackets each family's metric on the "
    "validation part of the train split it chose on (models/choice.py). "
    "ours: the Evaluator's value of the problem's blessing metric on the eval split. HGB: scikit-learn's "
    "default HistGradientBoostingClassifier/Regressor(random_state=0) fit on the run's own train split "
    "(ExampleGen's) and scored on its eval split, on the spec's model inputs typed as pandas reads the CSV, "
    "text columns as native categories (bench/reference.py). trivial: the train split's commonest class, "
    "or mean (a constant score: AUC 0.5). goal: AUC and accuracy at least "
    f"{GOAL['auc']}x HGB's, RMSE at most {GOAL['rmse']}x. blessed: runs the Evaluator blessed. wall s: "
    "`local_runner.py` process start to exit; Trainer s: its execution in ML Metadata. training: epochs run "
    "of the most the budget allowed x steps each (training.json), the best epoch (kept), and whether the "
    "schedule stopped training early or the budget ran out. HGB fit s: on one core (bench/reference.py)."
)


def _curves(measured: Sequence[dict[str, Any]]) -> list[str]:
    """The validation curve each data set's first successful run monitored."""
    lines = []
    for r in measured:
        training = first_training(r)
        curve = training.get("validation_curve")
        if curve:
            lines.append(f"- {r['name']} ({training.get('monitored')}): " + ", ".join(f"{v:.4g}" for v in curve))
    return lines


def _choices(measured: Sequence[dict[str, Any]]) -> list[str]:
    """What the Trainer said of its choice of family, per data set (first run)."""
    from models.choice import Choice

    lines = []
    for r in measured:
        if record := first_training(r).get("choice"):
            lines.append(f"- {r['name']}: {Choice.from_record(record).describe()}")
    return ["", "The family each run trained, as its Trainer said (first run):", "", *lines] if lines else []


def _load(measured: Sequence[dict[str, Any]], cpus: int) -> list[str]:
    """The range of the load average the runs saw, against the machine's CPUs."""
    loads = [x for r in measured for run in r.get("runs", []) for x in run.get("load_average", [])]
    if not loads:
        return []
    return [
        "",
        f"1-minute load average before and after the runs: {min(loads):.1f} to {max(loads):.1f} on "
        f"{cpus} CPUs (above {cpus}, other processes shared the cores and the seconds are inflated).",
    ]


def _dataset_line(r: dict[str, Any]) -> str:
    """Where a data set comes from, its task and label, size, split and cleaning."""
    size = f"{r['rows']:,} rows, {r['columns']} columns ({r.get('inputs', '?')} model inputs)" if "rows" in r else ""
    split = f"; split {r['train_rows']:,} train / {r['eval_rows']:,} eval" if "eval_rows" in r else ""
    return (
        f"- **{r['name']}** ({r['package']}: `{r['source']}`), {r['task']} on `{r['label']}`: {r['about']}. "
        f"{size}{split}. Cleaning: {r['cleaning']}"
    )


def _failures(measured: Sequence[dict[str, Any]]) -> list[str]:
    """Each failed run or reference, if any."""
    failures = [r for r in measured if r.get("status") != "ok" or r.get("reference_error")]
    if not failures:
        return []
    lines = ["", "Failures:", ""]
    for r in failures:
        if r.get("status") != "ok":
            lines.append(f"- **{r['name']}**: {r['status']}: {r.get('error', '')}".rstrip())
        if r.get("reference_error"):
            lines.append(f"- **{r['name']}**: the references failed: {r['reference_error']}")
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: the table, the curves, the data sets and any failure."""
    measured = results["datasets"]
    lines = _heading(results)
    lines += [table(measured), "", TABLE_NOTES, ""]
    lines += ["Validation curve the Trainer's schedule monitored, one value per epoch (first run):", ""]
    lines += _curves(measured)
    lines += _choices(measured)
    lines += _load(measured, results["machine"]["cpus"])
    lines += ["", "Data sets (each shipped inside its package; nothing downloaded):", ""]
    lines += [_dataset_line(r) for r in measured]
    lines += _failures(measured)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the command line


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True)
        return head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_results(results: dict[str, Any], output_dir: Path) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "results.json").write_text(json.dumps(results, indent=1, default=str))
    (output_dir / "results.md").write_text(markdown(results))


def _hparam_flags(hparams: Sequence[str]) -> list[str]:
    return [flag for item in hparams for flag in ("--hparam", item)]


def _parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[Dataset]]:
    """The flags, and the data sets they choose."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--datasets", help=f"Comma-separated subset (default: all of {', '.join(datasets_lib.DATASETS)})."
    )
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="Where everything is written.")
    parser.add_argument("--repeats", type=int, default=1, help="Runs per data set; the figures are medians.")
    parser.add_argument("--keep", action="store_true", help="Keep each run's output root (artifacts, metadata).")
    parser.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="Seconds one pipeline run may take.")
    parser.add_argument(
        "--model-family",
        choices=(SCAFFOLDED, "network", "trees", "choose"),
        default=SCAFFOLDED,
        help="What the scaffolded problems train: what the scaffold wrote (default), or this family written "
        "into each spec (choose: the Trainer chooses, models/choice.py).",
    )
    parser.add_argument(
        "--hparam",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="Passed to every run (local_runner.py --hparam): a default measured against another value.",
    )
    args = parser.parse_args(argv)
    try:
        chosen = datasets_lib.chosen(args.datasets)
    except ValueError as err:
        parser.error(str(err))
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args, chosen


def _new_results(args: argparse.Namespace) -> dict[str, Any]:
    """The machine and the settings, before any data set is measured."""
    import sklearn

    from bench.report import machine_info

    return {
        "machine": machine_info(),
        "settings": {
            "repeats": args.repeats,
            "model_family": args.model_family,
            "runner_args": _runner_args(Path("DIR"), Path("DIR"), _hparam_flags(args.hparam)),
            "commit": _commit(),
            "scikit_learn": sklearn.__version__,
            "goal": GOAL,
        },
        "datasets": [],
    }


def _print_finished(result: dict[str, Any]) -> None:
    """The data set's row of the table, and what failed, if anything."""
    print("| " + " | ".join(row(result)) + " |", flush=True)
    if result.get("status") != "ok":
        print(f"  {result['name']}: {result['status']}: {result.get('error', '')}", flush=True)
    if result.get("reference_error"):
        print(f"  {result['name']}: the references failed: {result['reference_error']}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args, chosen = _parse_args(argv)
    output_dir = args.output_dir.resolve()
    results = _new_results(args)
    print("| " + " | ".join(HEADER) + " |", flush=True)
    for dataset in chosen:
        result = measure(
            dataset,
            output_dir,
            args.repeats,
            args.keep,
            args.timeout,
            args.model_family,
            _hparam_flags(args.hparam),
        )
        results["datasets"].append(result)
        write_results(results, output_dir)
        _print_finished(result)
    print()
    print(markdown(results))
    print(f"Written: {output_dir / 'results.json'}, {output_dir / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
