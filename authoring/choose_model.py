"""Chooses a problem's model family once and writes it into its spec: the network or the trees.

    python -m authoring.choose_model --problem DIR [--output-root DIR] [--keep]

Runs the pipeline locally once, in a process of its own, with the Trainer choosing
(``models/choice.py``: both families trained on most of the training split, scored on the
rest), and writes the chosen family into ``problem.toml`` as its ``[model]`` table, both
figures in a comment (docs/model.md, "Two model families"): later runs, a distributed
Trainer's among them, then train that family without choosing again.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence

from models.choice import Choice
from models.problem import CONTRACT_FILE, PROBLEM_FILE, ModelFamily, Problem, ProblemError, load
from pipeline.config import DEFAULT_OUTPUT_ROOT, PipelineConfig
from runtime.terminal import Terminal, add_verbose_flag, command_log, say

# A [model] table: the comment lines just above it, its header and its key lines (what
# follows them, a blank line, a comment or the next table, is kept).
_MODEL_TABLE = re.compile(r"(?:^#[^\n]*\n)*^\[model\][ \t]*\n(?:^[^\[#\s][^\n]*(?:\n|\Z))*", re.M)


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


def _variant(problem_dir: str, scratch: str) -> str:
    """A folder holding the problem's spec (with the choose family) and contract, not its data."""
    folder = os.path.join(scratch, "problem")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(problem_dir, PROBLEM_FILE), folder)
    if os.path.exists(os.path.join(problem_dir, CONTRACT_FILE)):
        shutil.copy(os.path.join(problem_dir, CONTRACT_FILE), folder)
    write_family(folder, ModelFamily.CHOOSE, "A run of python -m authoring.choose_model.")
    return folder


def _runner_args(variant: str, data_root: str, output_root: str) -> list[str]:
    return ["--problem", variant, "--data-root", data_root, "--output-root", output_root, "--no-report"]


def run_choice(problem: Problem, scratch: str) -> tuple[Choice, float]:
    """The pipeline on the problem's data with the Trainer choosing, in a process of its own:
    the Trainer's choice and the run's wall seconds."""
    from launch.local import metadata_config, run_in_own_process
    from models.trainer import read_training_record
    from report.run_summary import summarize_run

    output_root = os.path.join(scratch, "runs")
    variant = _variant(problem.directory, scratch)
    log = os.path.join(scratch, "choice.log")
    code, seconds = run_in_own_process(_runner_args(variant, problem.data_root, output_root), log)
    # The run's own configuration, as the runner built it from these flags (its store's path).
    config = PipelineConfig(problem=load(variant), data_root=problem.data_root, output_root=output_root)
    try:
        summary = summarize_run(metadata_config(config), config.pipeline_name)
        record = read_training_record(summary.outputs["Trainer.model_run"])["choice"]
    except (LookupError, OSError) as err:
        raise RuntimeError(f"the run (exit code {code}) recorded no choice ({err}): see {log}") from None
    return Choice.from_record(record), seconds


def describe(choice: Choice, seconds: float) -> str:
    """The comment the choice is written with: each family's figure, where, and the cost."""
    figures = ", ".join(f"{t.family.value} {t.metric:.4f}" for t in choice.trials)
    return (
        f"Chosen by `python -m authoring.choose_model` on {datetime.date.today()}: {choice.metric} on a "
        f"validation part of the training split\n({choice.validation_rows:,} rows, not the eval split), {figures}; "
        f'the run took {seconds:.0f} s (docs/model.md, "Two model families").'
    )


def choose(problem_dir: str, scratch: str | None = None, keep: bool = False) -> tuple[Choice, float]:
    """Runs the pipeline once with the Trainer choosing, writes the chosen family into the
    spec in ``problem_dir`` and returns the choice with the run's seconds."""
    problem = load(problem_dir)
    scratch = scratch or tempfile.mkdtemp(prefix=f"choose-{problem.name}-")
    try:
        say("Running the pipeline, its Trainer choosing between the network and the trees ...")
        choice, seconds = run_choice(problem, scratch)
        say(f"  {choice.describe()}")
        write_family(problem_dir, choice.family, describe(choice, seconds))
        return choice, seconds
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
