"""Writes the run report of any run recorded in ML Metadata (the latest by default).

python -m report [--problem data/taxi] [--output-root outputs] [--pipeline-name NAME] [--run-id RUN]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from models import problem as problem_lib
from pipeline.config import DEFAULT_PROBLEM_DIR, PipelineConfig
from report import history
from report.write import write_report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = PipelineConfig()
    parser.add_argument("--problem", default=DEFAULT_PROBLEM_DIR, help="The problem's folder (problem.toml).")
    parser.add_argument("--output-root", default=defaults.output_root)
    parser.add_argument("--pipeline-name", default=None, help="Default: the problem's name.")
    parser.add_argument("--run-id", help="A run recorded in ML Metadata (default: the latest).")
    args = parser.parse_args(argv)
    from tfx.orchestration import metadata

    from report.run_summary import summarize_run

    try:
        problem = problem_lib.load(args.problem)
    except problem_lib.ProblemError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    config = PipelineConfig(
        problem=problem,
        output_root=os.path.abspath(args.output_root),
        pipeline_name=args.pipeline_name,
        infer_schema=True,  # a report reads what ran; it checks no data
    )
    if not os.path.exists(config.metadata_path):
        print(f"error: no ML Metadata store at {config.metadata_path}: run the pipeline first", file=sys.stderr)
        return 2
    try:
        summary = summarize_run(
            metadata.sqlite_metadata_connection_config(config.metadata_path), config.pipeline_name, args.run_id
        )
    except LookupError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    runs = history.read(history.history_path(config.output_root, config.pipeline_name))
    ids = [entry.run_id for entry in runs]
    runs = runs[: ids.index(summary.run_id) + 1] if summary.run_id in ids else runs
    # Only the output root and pipeline name are known here, not the run's other settings.
    print(f"Run report: {write_report(summary, config, with_settings=False, history=runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
