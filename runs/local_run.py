"""What a local run says and keeps around the pipeline itself: the problem and contract it
runs with, a reused run's summary, and after a run its summary, history, report, pruning
and, when it failed, what failed and what to do. ``local_runner.py`` turns flags into a
``PipelineConfig`` and calls these around ``LocalDagRunner``.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass

from launch.local import metadata_config
from pipeline.config import CONTRACT_FILE, PipelineConfig
from runs import failures
from runtime.terminal import say

# Where a failed run's whole traceback is kept, <output root>/logs/<pipeline>/failure-<time>.txt,
# and each run's library output (TensorFlow, TFX, Beam), <output root>/logs/<pipeline>/run-<time>.log
LOG_DIR = "logs"


@dataclass(frozen=True)
class AfterRun:
    """What the flags ask of the steps after a run."""

    report: bool
    keep_runs: int | None
    verbose: bool


def champion_always_runs(ir):
    """The compiled pipeline (TFX's IR) with the Champion node's cache off: it reads the
    champion record, which changes between runs with nothing in its cache key
    (components/champion.py)."""
    from components.champion import NODE_ID

    for node in ir.nodes:
        if node.pipeline_node.node_info.id == NODE_ID:
            node.pipeline_node.execution_options.caching_options.enable_cache = False
            return ir
    raise ValueError(f"the compiled pipeline has no {NODE_ID} node")


def contract_line(config: PipelineConfig) -> str:
    """What the summary says of the data contract the run checked its data against."""
    from report.run_summary import NO_CONTRACT

    return config.schema_path or NO_CONTRACT


def say_problem(config: PipelineConfig) -> None:
    """The problem and the contract the run checks its data against (or why none)."""
    say(f"Problem: {config.problem.name} ({config.problem.task.value}; {config.problem.label.describe()})")
    if config.schema_path:
        say(f"Data contract: {config.schema_path}")
    else:
        say(
            "Data contract: none (--infer-schema): the schema is inferred from this very data, which catches "
            f"little. Draft the problem's: python -m authoring.contract --problem DIR, saved as {CONTRACT_FILE}"
        )


def say_reused(config: PipelineConfig, report: bool) -> bool:
    """When nothing changed since the last run, says so with its summary (TFX is not
    started) and returns True."""
    from report.run_summary import format_summary
    from runs import unchanged

    reused = unchanged.reusable_run(config)
    if reused is None:
        return False
    say(
        "\nNothing changed since the last run (configuration, code, data, packages, metadata store): "
        "every component would be reused from the cache, so TFX was not started. Its summary:"
    )
    say("\n" + format_summary(reused.summary, config.blessing, contract_line(config)))
    if report and reused.report:
        say(f"Run report: {reused.report}")
    return True


def after_run(config: PipelineConfig, failure: Exception | None, asked: AfterRun) -> int:
    """Everything after the pipeline ran (or failed): the traceback kept, the summary, the
    history, the report, pruning and the record of an unchanged run; the exit code."""
    from report import history
    from report.run_summary import format_summary, summarize_run
    from report.write import write_report
    from runs import unchanged

    log = None
    if failure is not None:  # kept before the report is written, which points to it
        log = failures.write_traceback(failure, os.path.join(config.output_root, LOG_DIR, config.pipeline_name))
    try:
        summary = summarize_run(metadata_config(config), config.pipeline_name)
    except LookupError as err:
        say(f"(no run summary: {err})")
    else:
        say("\n" + format_summary(summary, config.blessing, contract_line(config)))
        stopped = next((c.node_id for c in summary.components if c.state == "FAILED"), "unknown") if failure else None
        runs = history.record(config.output_root, config.pipeline_name, summary, config.blessing.metric, stopped)
        say(history.format_recent(runs))
        report = None
        try:
            if asked.report:
                described = failures.describe(failure) if failure else None
                report = write_report(summary, config, history=runs, failure=described, failure_log=log)
                say(f"Run report: {report}")
        except Exception as err:  # noqa: BLE001 - the report must never hide the run's own outcome
            say(f"(no run report: {type(err).__name__}: {err}; python -m report writes it again)")
        if failure is None:
            if asked.keep_runs is not None:
                # Inside the run lock, and before the record: pruning writes to the metadata store.
                from runs.prune import prune_after_run

                say(f"Pruned: {prune_after_run(config, asked.keep_runs)}")
            unchanged.record(config, summary, report)
    if failure is None:
        return 0
    if asked.verbose:
        traceback.print_exception(failure, file=sys.stderr)
    say(f"\nThe run FAILED: {failures.describe(failure)}", err=True)
    say(f"The whole traceback: {log}", err=True)
    say(
        "Fix the cause and run the same command again; finished components are reused "
        f"when caching is on (--enable-cache).{'' if asked.verbose else ' --verbose shows the whole traceback.'}",
        err=True,
    )
    return 1
