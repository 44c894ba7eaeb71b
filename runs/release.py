"""What serves after the push: show it, promote a canary, or roll back.

    python -m runs.release status|promote|rollback [--problem DIR] [--output-root DIR]
    python -m runs.release status|promote|rollback --project P --region R \\
        --output-root gs://... [--endpoint-name E]

On Vertex AI (``--project``) it acts on the pipeline's registry model and endpoint, otherwise
on the serving directory the Pusher writes; either moves the champion record with what
serves (docs/release.md, "Promote, roll back, see what serves").
"""

from __future__ import annotations

import argparse
import os
import shutil
import warnings
from collections.abc import Callable, Sequence

from launch import flags
from pipeline.config import DEFAULT_OUTPUT_ROOT, PipelineConfig
from runs.after_push import run_command, runs_config
from runtime import champion
from runtime.terminal import add_verbose_flag

ROLLED_BACK_SUFFIX = ".rolled-back"
COMMANDS = ("status", "promote", "rollback")


class Refused(RuntimeError):
    """What the command cannot do, and why; nothing was changed."""


# --- A local serving directory ---------------------------------------------------------------


def local_versions(serving_dir: str) -> list[str]:
    """The versions TensorFlow Serving would load from ``serving_dir`` (numeric folder names),
    oldest first."""
    if not gfile().isdir(serving_dir):
        return []
    return sorted((name.rstrip("/") for name in gfile().listdir(serving_dir) if name.rstrip("/").isdigit()), key=int)


def gfile():
    """TensorFlow's file API: the serving directory is local, or on Cloud Storage where a
    Kubeflow cluster's Pusher wrote it."""
    import tensorflow as tf

    return tf.io.gfile


def _move_dir(source: str, target: str) -> None:
    """Moves a directory (Cloud Storage has no renaming of one: copied, then deleted)."""
    if "://" not in source:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.move(source, target)
        return
    for directory, _, files in gfile().walk(source):
        relative = directory[len(source) :].strip("/")
        gfile().makedirs(os.path.join(target, relative))
        for name in files:
            gfile().copy(os.path.join(directory, name), os.path.join(target, relative, name), overwrite=True)
    gfile().rmtree(source)


def local_status(serving_dir: str) -> list[str]:
    versions = local_versions(serving_dir)
    if not versions:
        raise Refused(f"nothing was pushed to {serving_dir} yet: a blessed run pushes there")
    lines = [f"{serving_dir}: TensorFlow Serving serves version {versions[-1]} (the newest)"]
    lines += [f"  version {v}{' (serving)' if v == versions[-1] else ''}" for v in reversed(versions)]
    rolled_back = serving_dir.rstrip("/") + ROLLED_BACK_SUFFIX
    if gfile().isdir(rolled_back) and (kept := sorted(n.rstrip("/") for n in gfile().listdir(rolled_back))):
        lines.append(f"  rolled back, kept in {rolled_back}: {', '.join(kept)}")
    return lines


def local_promote(serving_dir: str) -> list[str]:
    versions = local_versions(serving_dir)
    serving = f"version {versions[-1]}" if versions else "nothing yet"
    raise Refused(
        f"nothing to promote in {serving_dir}: a serving directory has no canary (TensorFlow Serving serves its "
        f"newest version: {serving}); a canary runs on a Vertex AI endpoint (--canary-percent with --endpoint-name)"
    )


def local_rollback(serving_dir: str, pipeline_root: str) -> list[str]:
    """Moves the newest version out of ``serving_dir``, so the one before it serves, and the
    champion record back to the champion before."""
    versions = local_versions(serving_dir)
    if len(versions) < 2:
        serving = f"version {versions[-1]} is the only one" if versions else "nothing was pushed yet"
        raise Refused(f"no previous version to roll back to in {serving_dir}: {serving}")
    newest = versions[-1]
    record = champion.read(pipeline_root)
    if record.champion is not None and record.champion.version not in ("", newest):
        raise Refused(
            f"the champion record names version {record.champion.version} while {serving_dir} serves version "
            f"{newest}: the two disagree (a push by hand?); move the serving directory's versions to match it"
        )
    rolled_back = serving_dir.rstrip("/") + ROLLED_BACK_SUFFIX
    _move_dir(os.path.join(serving_dir, newest), os.path.join(rolled_back, newest))
    return [
        f"moved version {newest} out of {serving_dir} to {rolled_back}/{newest}",
        f"TensorFlow Serving on {serving_dir} now serves version {versions[-2]}",
        move_record(pipeline_root, champion.Record.rolled_back_once),
    ]


def move_record(pipeline_root: str, change: Callable[[champion.Record], champion.Record]) -> str:
    """Applies ``change`` to the champion record; the line saying what the next run uses."""
    try:
        record = champion.update(pipeline_root, change)
    except champion.RecordError as err:
        return f"the champion record was not changed: {err} (the next run finds its champion there)"
    return f"champion record: {describe_record(record)}"


def describe_record(record: champion.Record) -> str:
    if record.champion is None:
        return "no champion: the next run trains from scratch and compares with nothing"
    return f"the next run compares with and warm-starts from {record.champion.describe()}"


# --- Vertex AI ---------------------------------------------------------------------------------


def vertex_command(command: str, config: PipelineConfig, project: str, region: str, endpoint: str | None) -> list[str]:
    from components import registry

    model = registry.RegistryModel.of_pipeline(project, region, config.pipeline_name, config.pipeline_root)
    moves = {
        "promote": (registry.promote, champion.Record.promoted),
        "rollback": (registry.rollback, champion.Record.rolled_back_once),
    }
    try:
        if command in moves:
            act, change = moves[command]
            return [*act(model, endpoint), move_record(config.pipeline_root, change)]
        versions = registry.describe(model, endpoint)
    except registry.ReleaseError as err:
        raise Refused(str(err)) from err
    where = f" on {endpoint}" if endpoint else ""
    return [
        f"{config.pipeline_name} in the registry of {project}/{region}{where}:",
        *(f"  {v.describe()}" for v in versions),
        f"champion record: {describe_record(champion.read(config.pipeline_root))}",
    ]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Show what serves a pipeline's model, promote a canary, or roll back: locally on the serving "
        "directory, on Vertex AI on the pipeline's registry model and endpoint.",
        epilog="Exit codes: 0 done, 2 refused (the reason is printed) or a wrong flag.",
    )
    parser.add_argument("command", choices=COMMANDS)
    flags.add_shared_flags(parser, ("problem", "pipeline_name"))
    parser.add_argument(
        "--output-root",
        default=DEFAULT_OUTPUT_ROOT,
        help="Where the runs wrote (default: the project's outputs/; gs:// with --project).",
    )
    cloud = parser.add_argument_group("Vertex AI (the pipeline's registry model and endpoint)")
    cloud.add_argument("--project", help="Google Cloud project: act on Vertex AI instead of the serving directory.")
    cloud.add_argument("--region", help="Google Cloud region, e.g. us-central1.")
    cloud.add_argument("--endpoint-name", help="The endpoint the Pusher deploys to (without it: aliases only).")
    add_verbose_flag(parser)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> list[str]:
    """The command's lines; raises ``Refused`` or ``ValueError`` (a wrong flag)."""
    config = runs_config(args, ValueError)
    if args.endpoint_name and not args.project:
        raise ValueError("--endpoint-name needs --project and --region: endpoints are on Vertex AI")
    if args.project:
        return vertex_command(args.command, config, args.project, args.region, args.endpoint_name)
    if args.command == "rollback":
        return local_rollback(config.serving_model_dir, config.pipeline_root)
    if args.command == "promote":
        return local_promote(config.serving_model_dir)
    return [
        *local_status(config.serving_model_dir),
        f"champion record: {describe_record(champion.read(config.pipeline_root))}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    warnings.filterwarnings("ignore", category=FutureWarning)
    return run_command("release", parse_args(argv), run, refusals=(Refused,), errors=(ValueError,))


if __name__ == "__main__":
    raise SystemExit(main())
