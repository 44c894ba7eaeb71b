"""Replays a problem's history: its CSV cut into spans by time, the pipeline run span after span.

The rows are cut by the problem's ``time_column`` into one span per period, written as
``span-<n>/data.csv`` (oldest first); then each span is copied into the replay's data root
and the local runner runs once, as a schedule would start it, the history
(``report/history.py``) printed after every run (docs/spans.md, "Replaying history").

    python -m authoring.replay --problem data/taxi [--months-per-span 3] [--runs 16] [-- local runner flags]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from models import problem as problem_lib
from pipeline.config import DEFAULT_OUTPUT_ROOT, DEFAULT_PROBLEM_DIR, REPO_ROOT
from report import history
from runtime.terminal import Terminal, add_verbose_flag, command_log, say

SPAN_PATTERN = "span-{SPAN}/*.csv"


def period_of(when: datetime.datetime, months: int) -> int:
    """The index of the ``months``-long period (from January 1970) ``when`` falls in."""
    return ((when.year - 1970) * 12 + when.month - 1) // months


def period_label(index: int, months: int) -> str:
    """The period's first month, e.g. ``2013-04``."""
    first = index * months
    return f"{1970 + first // 12}-{first % 12 + 1:02d}"


def _when(cell: str, column: str, path: str, line: int) -> datetime.datetime:
    """A time cell as UTC: seconds since 1970, or an ISO date/time."""
    try:
        return datetime.datetime.fromtimestamp(float(cell), tz=datetime.UTC)
    except ValueError:
        pass
    try:
        parsed = datetime.datetime.fromisoformat(cell)
    except ValueError:
        raise ValueError(
            f"{path}:{line}: {column} = {cell!r} is neither seconds since 1970 nor an ISO date: "
            "the time column must hold one of them in every row"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _rows(paths: Sequence[str], column: str) -> Iterator[tuple[list[str], list[str], datetime.datetime]]:
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            if column not in header:
                raise ValueError(f"{path} has no column '{column}' (the problem's time_column)")
            index = header.index(column)
            for line, row in enumerate(reader, start=2):
                if not row[index]:
                    raise ValueError(f"{path}:{line}: {column} is empty: every row needs a time to fall in a span")
                yield header, row, _when(row[index], column, path, line)


def cut_into_spans(paths: Sequence[str], column: str, months: int, out_dir: str) -> list[tuple[int, str, int]]:
    """Writes ``out_dir/span-<n>/data.csv`` per period of ``months``, oldest first (periods
    without rows make no span); (span, period's first month, rows) each."""

    def key_of(when: datetime.datetime) -> int:
        return period_of(when, months)

    keys = sorted({key_of(when) for _, _, when in _rows(paths, column)})
    number = {key: index for index, key in enumerate(keys, start=1)}
    files, writers, counts = {}, {}, dict.fromkeys(keys, 0)
    try:
        for header, row, when in _rows(paths, column):
            key = key_of(when)
            if key not in writers:
                folder = os.path.join(out_dir, f"span-{number[key]}")
                os.makedirs(folder, exist_ok=True)
                files[key] = open(os.path.join(folder, "data.csv"), "w", newline="")  # noqa: SIM115 - closed below
                writers[key] = csv.writer(files[key], lineterminator="\n")
                writers[key].writerow(header)
            writers[key].writerow(row)
            counts[key] += 1
    finally:
        for f in files.values():
            f.close()
    return [(number[key], period_label(key, months), counts[key]) for key in keys]


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--problem", default=DEFAULT_PROBLEM_DIR, help="The problem's folder (its spec names time_column)."
    )
    parser.add_argument(
        "--months-per-span", type=int, default=3, help="One span per this many months (3: quarters; 1: months)."
    )
    parser.add_argument("--runs", type=int, default=None, help="Replay the first N spans only (default: all).")
    parser.add_argument(
        "--output-root",
        default=os.path.join(DEFAULT_OUTPUT_ROOT, "replay"),
        help="Spans, data root, pipeline outputs, metadata and history of the replay (started afresh).",
    )
    parser.add_argument(
        "--keep", action="store_true", help="Continue the replay in --output-root instead of starting afresh."
    )
    add_verbose_flag(parser)
    return parser.parse_known_args(argv)


def _local_runner(flags: list[str]) -> int:
    """One run, as a schedule starts it: ``local_runner.py`` in a process of its own. Its
    summary is left out (the history after it says what it did) unless it ends unexpectedly."""
    done = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "local_runner.py"), *flags], capture_output=True)
    if done.returncode not in (0, 1):
        say(done.stdout.decode()[-3000:] + "\n" + done.stderr.decode()[-3000:], err=True)
    return done.returncode


def main(argv: Sequence[str] | None = None, run: Callable[[list[str]], int] = _local_runner) -> int:
    """``run`` runs the local runner with the given flags and returns its exit code (tests
    run it in their own process, without a new interpreter's start-up per span)."""
    args, runner_flags = parse_args(argv)
    runner_flags = [flag for flag in runner_flags if flag != "--"] + (["--verbose"] if args.verbose else [])
    problem = problem_lib.load(args.problem)
    if problem.time_column is None:
        say(
            f"error: {args.problem}/problem.toml names no time_column: add the column that orders the rows in "
            'time, e.g. time_column = "created_at"',
            err=True,
        )
        return 2
    if not args.keep:
        shutil.rmtree(args.output_root, ignore_errors=True)
    with Terminal(command_log(args.output_root, "replay"), verbose=args.verbose) as terminal:
        code = _replay(args, problem, runner_flags, run)
        terminal.say_log()
    return code


def _replay(
    args: argparse.Namespace, problem: problem_lib.Problem, runner_flags: list[str], run: Callable[[list[str]], int]
) -> int:
    """Cuts the spans (once) and runs the pipeline on each one not yet replayed."""
    spans_dir, data_root = os.path.join(args.output_root, "spans"), os.path.join(args.output_root, "data")
    csvs = sorted(os.path.join(problem.directory, f) for f in os.listdir(problem.directory) if f.endswith(".csv"))
    if not os.path.isdir(spans_dir):
        cut = cut_into_spans(csvs, problem.header_of(problem.time_column), args.months_per_span, spans_dir)
        say(f"{len(cut)} spans of {args.months_per_span} month(s) by {problem.shown(problem.time_column)}:")
        say("  " + ", ".join(f"{n}: {label} ({rows} rows)" for n, label, rows in cut))
    spans = sorted(int(name.removeprefix("span-")) for name in os.listdir(spans_dir))
    path = history.history_path(args.output_root, problem.name)
    for span in spans[: args.runs]:
        arrived = os.path.join(data_root, f"span-{span}")
        if os.path.isdir(arrived):
            continue  # replayed before (--keep)
        shutil.copytree(os.path.join(spans_dir, f"span-{span}"), arrived)
        say(f"\n=== span {span} arrived: running the pipeline")
        started = time.monotonic()
        code = run(
            [
                "--problem",
                args.problem,
                "--data-root",
                data_root,
                "--data-pattern",
                SPAN_PATTERN,
                "--output-root",
                args.output_root,
                *runner_flags,
            ]
        )
        wall = time.monotonic() - started
        if code not in (0, 1):  # 1: the run failed and was recorded (a gate stopped it)
            say(f"error: the local runner exited with {code} on span {span}", err=True)
            return code
        say(f"(run took {wall:.1f} s wall{'; it FAILED, see its history line' if code else ''})")
        say(history.format_recent(history.read(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
