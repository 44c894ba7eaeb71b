"""Chooses a problem's model family by its eval metric: the network or the trees.

    python -m authoring.choose_model --problem DIR [--output-root DIR] [--keep]

Runs the pipeline locally once per family, each in a process of its own, and writes the
family whose Evaluator scored the problem's blessing metric better into ``problem.toml`` as
its ``[model]`` table, both figures in a comment; a tie keeps the network (docs/model.md,
"Two model families").
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence

from models.problem import CONTRACT_FILE, PROBLEM_FILE, ModelFamily, Problem, ProblemError, load
from pipeline.config import DEFAULT_OUTPUT_ROOT, PipelineConfig
from runtime.terminal import Terminal, add_verbose_flag, command_log, say

# A [model] table: the comment lines just above it, its header and its key lines (what
# follows them, a blank line, a comment or the next table, is kept).
_MODEL_TABLE = re.compile(r"(?:^#[^\n]*\n)*^\[model\][ \t]*\n(?:^[^\[#\s][^\n]*(?:\n|\Z))*", re.M)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One family's run: the blessing metric's value on the eval split, and its wall time."""

    family: ModelFamily
    metric: float | None
    seconds: float
    log: str


def write_family(problem_dir: str, family: ModelFamily, why: str) -> None:
    """Sets ``[model] family`` in ``problem_dir``'s spec, replacing any earlier ``[model]``
    table (and its comment), with ``why`` as its comment; the rest of the file is kept."""
    path = os.path.join(problem_dir, PROBLEM_FILE)
    with open(path) as f:
        text = _MODEL_TABLE.sub("", f.read()).rstrip("\n")
    comment = "".join(f"# {line}\n" for line in why.splitlines())
    with open(path, "w") as f:
        f.write(f'{text}\n\n{comment}[model]\nfamily = "{family.value}"\n')
    load(problem_dir)  # the edited spec still reads


def better(problem: Problem, trials: Sequence[Trial]) -> Trial:
    """The trial with the better metric for the problem's blessing (higher for AUC and
    accuracy, lower for RMSE and MAE); the network on a tie or when a run measured nothing."""
    measured = [t for t in trials if t.metric is not None]
    if not measured:
        raise RuntimeError("no run measured the metric: see the runs' logs: " + ", ".join(t.log for t in trials))
    sign = 1 if problem.higher_is_better else -1
    order = {ModelFamily.NETWORK: 1, ModelFamily.TREES: 0}
    return max(measured, key=lambda t: (sign * t.metric, order[t.family]))


def _variant(problem_dir: str, family: ModelFamily, scratch: str) -> str:
    """A folder holding the problem's spec (with ``family``) and contract, not its data."""
    folder = os.path.join(scratch, "problems", family.value)
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(problem_dir, PROBLEM_FILE), folder)
    if os.path.exists(os.path.join(problem_dir, CONTRACT_FILE)):
        shutil.copy(os.path.join(problem_dir, CONTRACT_FILE), folder)
    write_family(folder, family, "A trial of python -m authoring.choose_model.")
    return folder


def _runner_args(variant: str, data_root: str, output_root: str) -> list[str]:
    return ["--problem", variant, "--data-root", data_root, "--output-root", output_root, "--no-report"]


def run_trial(problem: Problem, family: ModelFamily, scratch: str) -> Trial:
    """The pipeline with ``family`` on the problem's data, in a process of its own (no
    TensorFlow state shared between the two), and the metric its Evaluator measured."""
    from launch.local import metadata_config, run_in_own_process
    from report.run_summary import summarize_run

    output_root = os.path.join(scratch, "runs", family.value)
    variant = _variant(problem.directory, family, scratch)
    args = _runner_args(variant, problem.data_root, output_root)
    log = os.path.join(scratch, f"{family.value}.log")
    _, seconds = run_in_own_process(args, log)
    # The run's own configuration, as the runner built it from these flags (its store's path).
    config = PipelineConfig(problem=load(variant), data_root=problem.data_root, output_root=output_root)
    summary = summarize_run(metadata_config(config), config.pipeline_name)
    return Trial(family, summary.metrics.get(problem.blessing.metric), seconds, log)


def _figure(trial: Trial) -> str:
    return "no figure" if trial.metric is None else f"{trial.metric:.4f}"


def describe(problem: Problem, trials: Sequence[Trial], chosen: Trial) -> str:
    """The comment the choice is written with: each family's figure and time."""
    figures = ", ".join(f"{t.family.value} {_figure(t)} ({t.seconds:.0f} s)" for t in trials)
    return (
        f"Chosen by `python -m authoring.choose_model` on {datetime.date.today()}: {problem.blessing.metric} on the "
        f'eval split,\n{figures}: the {chosen.family.value} trains (docs/model.md, "Two model families").'
    )


def choose(problem_dir: str, scratch: str | None = None, keep: bool = False) -> tuple[Trial, list[Trial]]:
    """Runs both families on the problem in ``problem_dir``, writes the better one into its
    spec and returns it with both trials."""
    problem = load(problem_dir)
    scratch = scratch or tempfile.mkdtemp(prefix=f"choose-{problem.name}-")
    try:
        trials = []
        for family in (ModelFamily.NETWORK, ModelFamily.TREES):
            say(f"Running the pipeline with the {family.value} ...")
            trial = run_trial(problem, family, scratch)
            trials.append(trial)
            seen = f" (see {trial.log})" if trial.metric is None else ""
            say(f"  {family.value}: {problem.blessing.metric} {_figure(trial)}{seen} in {trial.seconds:.0f} s")
        chosen = better(problem, trials)
        write_family(problem_dir, chosen.family, describe(problem, trials, chosen))
        return chosen, trials
    finally:
        if not keep:
            shutil.rmtree(os.path.join(scratch, "runs"), ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", required=True, help="The problem's folder (problem.toml, its contract and data).")
    parser.add_argument("--output-root", help="Where the two runs go (default: a temporary folder).")
    parser.add_argument("--keep", action="store_true", help="Keep the two runs' output roots.")
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    with Terminal(command_log(DEFAULT_OUTPUT_ROOT, "choose_model"), verbose=args.verbose) as terminal:
        try:
            chosen, _ = choose(args.problem, args.output_root, args.keep)
        except (ProblemError, RuntimeError) as err:
            say(f"error: {err}", err=True)
            return 2
        terminal.say_log()
        say(f'{os.path.join(args.problem, PROBLEM_FILE)}: [model] family = "{chosen.family.value}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
