"""What the commands acting on a pipeline's pushed model (``runs.release``,
``runs.score``) share: where the runs wrote, here or on Vertex AI, and how a command
says what it did or why it refused."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from models import problem as problem_lib
from pipeline.config import DEFAULT_OUTPUT_ROOT, PipelineConfig
from runtime.terminal import Terminal, command_log, say


def runs_config(args: argparse.Namespace, error: type[Exception]) -> PipelineConfig:
    """The configuration the runs wrote with (``--problem``, ``--pipeline-name``,
    ``--output-root``): on Vertex AI when ``--project`` is given, which needs ``--region``
    and a gs:// output root (else ``error``, naming them); a gs:// output root without it is
    a Kubeflow cluster's."""
    on_vertex = bool(args.project)
    if on_vertex and not (args.region and args.output_root.startswith("gs://")):
        raise error("--project needs --region and a gs:// --output-root (where the Vertex runs wrote)")
    in_the_cloud = "://" in args.output_root
    return PipelineConfig(
        problem=problem_lib.load(args.problem),
        pipeline_name=args.pipeline_name,
        output_root=args.output_root if in_the_cloud else os.path.abspath(args.output_root),
        infer_schema=True,  # the commands check data themselves, if they read any
    )


def run_command(
    name: str,
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], list[str]],
    refusals: tuple[type[Exception], ...],
    errors: tuple[type[Exception], ...] = (),
) -> int:
    """Runs ``run(args)`` with the libraries' output in the command's log and says its
    lines: 0; a refusal ("Refused: ...") or an error ("error: ...") in one line: 2."""
    log_root = DEFAULT_OUTPUT_ROOT if args.output_root.startswith("gs://") else args.output_root
    with Terminal(command_log(log_root, name), verbose=args.verbose):
        try:
            lines = run(args)
        except refusals as err:
            say(f"Refused: {err}", err=True)
            return 2
        except errors as err:
            say(f"error: {err}", err=True)
            return 2
        for line in lines:
            say(line)
    return 0
