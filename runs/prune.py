"""Bounded growth of local runs: remove what no run will read again.

Keeps, for one pipeline, every artifact of the ``keep_runs`` most recent runs, the champion
and every pushed model; everything else of the pipeline's is deleted and marked DELETED in
ML Metadata (docs/operating.md, "Bounded growth": what stays, and why that is safe). The
command takes the run lock; ``prune_after_run`` is for the runner, which holds it already.

    python -m runs.prune --keep-runs K [--problem DIR] [--pipeline-name N] [--output-root DIR] [--dry-run]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import shutil
import sys
import uuid
import warnings
from collections.abc import Iterable, Sequence

from absl import logging
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from launch import flags
from models import problem as problem_lib
from pipeline.config import DEFAULT_OUTPUT_ROOT, PipelineConfig
from runs.run_lock import LockedError, hold_run_lock
from runtime.terminal import Terminal, add_verbose_flag, command_log, say

# What TFX's launcher leaves under each node's directory (private names of
# tfx/orchestration/portable/outputs_utils.py).
SYSTEM_DIR = ".system"
EXECUTOR_DIR = "executor_execution"
DRIVER_DIR = "driver_execution"
STATEFUL_DIR = "stateful_working_dir"
STATEFUL_INDEX = "__stateful_working_dir_index__"
# Where a directory is moved before it is deleted: under the pipeline root, one rename away.
TRASH_DIR = ".pruning"
# Why an artifact is kept.
RECENT, CHAMPION, PUSHED = "of the latest runs", "of the champion", "of pushed models"
_OUTPUT_EVENTS = (
    metadata_store_pb2.Event.OUTPUT,
    metadata_store_pb2.Event.INTERNAL_OUTPUT,
    metadata_store_pb2.Event.DECLARED_OUTPUT,
)
_DELETED = metadata_store_pb2.Artifact.DELETED
_MODEL, _BLESSING = "Model", "ModelBlessing"


@dataclasses.dataclass(frozen=True)
class Removal:
    """A path to delete: an artifact's (with its id and type), or a directory TFX left."""

    path: str
    bytes: int
    artifact_id: int | None = None
    type_name: str = ""


@dataclasses.dataclass
class PruneReport:
    """What a prune removed (or would, with ``dry_run``) and what it kept."""

    pipeline_name: str
    keep_runs: int
    dry_run: bool = False
    runs: int = 0
    runs_kept: list[str] = dataclasses.field(default_factory=list)
    # The older runs something was removed from this time.
    runs_pruned: list[str] = dataclasses.field(default_factory=list)
    removed: list[Removal] = dataclasses.field(default_factory=list)
    system_dirs: list[Removal] = dataclasses.field(default_factory=list)
    # Artifacts kept, by reason (an artifact may have several), and in all.
    kept: dict[str, int] = dataclasses.field(default_factory=dict)
    kept_total: int = 0
    # Artifacts whose files lie outside the pipeline root: not the pipeline's to delete.
    left_outside: list[int] = dataclasses.field(default_factory=list)
    champion_model: int | None = None
    champion_blessings: list[int] = dataclasses.field(default_factory=list)
    # Pushed Model id -> where the Pusher copied it.
    pushed: dict[int, str] = dataclasses.field(default_factory=dict)

    @property
    def bytes_freed(self) -> int:
        return sum(r.bytes for r in [*self.removed, *self.system_dirs])

    def __str__(self) -> str:
        """One line, for the run summary."""
        champion = f"Model {self.champion_model}" if self.champion_model is not None else "none yet"
        pushed = ", ".join(str(i) for i in sorted(self.pushed)) or "none"
        verb, freed = ("Would prune", "to free") if self.dry_run else ("Pruned", "freed")
        return (
            f"{verb} {len(self.removed)} artifact(s) of {len(self.runs_pruned)} older run(s), "
            f"{size_text(self.bytes_freed)} {freed}; kept the latest {len(self.runs_kept)} of {self.runs} run(s), "
            f"the champion ({champion}) and the pushed models (Model {pushed})"
        )


def size_text(size: float) -> str:
    """Bytes as people read them: 512 B, 3.4 KB, 12.0 MB."""
    if size < 1024:
        return f"{size:.0f} B"
    size /= 1024
    return f"{size:.1f} KB" if size < 1024 else f"{size / 1024:.1f} MB"


def _disk_bytes(path: str) -> int:
    """Bytes of a file, or of every file under a directory (0 when missing)."""
    if os.path.isfile(path):
        return os.lstat(path).st_size
    return sum(
        os.lstat(os.path.join(directory, name)).st_size for directory, _, files in os.walk(path) for name in files
    )


def _same(path: str, other: str) -> bool:
    return os.path.normpath(os.path.abspath(path)) == os.path.normpath(os.path.abspath(other))


def _under(path: str, root: str) -> bool:
    """``path`` is below ``root`` (not ``root`` itself), by whole path segments."""
    return os.path.normpath(os.path.abspath(path)).startswith(os.path.normpath(os.path.abspath(root)) + os.sep)


def recorded_champion(lineage: _Lineage, pipeline_root: str) -> tuple[int | None, list[int]]:
    """The ids of the Model and ModelBlessing the champion record names as the champion
    (what the next run's Champion component hands over), found by their directories."""
    from runtime import champion

    entry = champion.read(pipeline_root).champion
    if entry is None:
        return None, []
    by_uri = {os.path.normpath(a.uri): a.id for a in lineage.artifacts.values()}
    model_id = by_uri.get(os.path.normpath(entry.model))
    blessing_id = by_uri.get(os.path.normpath(entry.blessing))
    return model_id, [blessing_id] if blessing_id is not None else []


class _Lineage:
    """One pipeline's runs (the kept ones, and the older ones), executions, events and
    artifacts, as MLMD records them."""

    def __init__(self, store: metadata_store.MetadataStore, pipeline_name: str, keep_runs: int) -> None:
        self.store = store
        runs: list[metadata_store_pb2.Context] = []
        self.executions_of: dict[int, list[metadata_store_pb2.Execution]] = {}
        self.node_of: dict[int, str] = {}
        self.events: list[metadata_store_pb2.Event] = []
        self.artifacts: dict[int, metadata_store_pb2.Artifact] = {}
        pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
        if pipeline is not None:
            executions = {e.id for e in store.get_executions_by_context(pipeline.id)}
            for run in store.get_contexts_by_type("pipeline_run"):
                ours = [e for e in store.get_executions_by_context(run.id) if e.id in executions]
                if ours:
                    runs.append(run)
                    self.executions_of[run.id] = ours
            prefix = f"{pipeline_name}."
            for node in store.get_contexts_by_type("node"):
                if node.name.startswith(prefix):
                    self.node_of.update(
                        (e.id, node.name[len(prefix) :]) for e in store.get_executions_by_context(node.id)
                    )
            self.events = store.get_events_by_execution_ids(sorted(executions))
            linked = {e.artifact_id for e in self.events} | {a.id for a in store.get_artifacts_by_context(pipeline.id)}
            self.artifacts = {a.id: a for a in store.get_artifacts_by_id(sorted(linked))}
        runs.sort(key=lambda c: (c.create_time_since_epoch, c.id), reverse=True)
        self.runs, self.kept_runs, self.older_runs = runs, runs[:keep_runs], runs[keep_runs:]
        self._of_execution: dict[int, list[metadata_store_pb2.Event]] = collections.defaultdict(list)
        self._of_artifact: dict[int, list[metadata_store_pb2.Event]] = collections.defaultdict(list)
        for event in self.events:
            self._of_execution[event.execution_id].append(event)
            self._of_artifact[event.artifact_id].append(event)

    def artifacts_of(self, run: metadata_store_pb2.Context) -> set[int]:
        """What the run's executions read and wrote."""
        return {e.artifact_id for execution in self.executions_of[run.id] for e in self._of_execution[execution.id]}

    def producers(self, artifact_ids: Iterable[int]) -> set[int]:
        return {e.execution_id for i in artifact_ids for e in self._of_artifact[i] if e.type in _OUTPUT_EVENTS}

    def inputs(self, executions: Iterable[int], *type_names: str) -> set[int]:
        return {
            e.artifact_id
            for i in executions
            for e in self._of_execution[i]
            if e.type == metadata_store_pb2.Event.INPUT and self.artifacts[e.artifact_id].type in type_names
        }


def _kept(lineage: _Lineage, champion_ids: tuple[int | None, list[int]], report: PruneReport) -> dict[int, set[str]]:
    """Artifact id -> why it is kept; fills in the report's champion and pushed models."""
    reasons: dict[int, set[str]] = collections.defaultdict(set)
    for run in lineage.kept_runs:
        attributed = {a.id for a in lineage.store.get_artifacts_by_context(run.id)} & lineage.artifacts.keys()
        for artifact_id in lineage.artifacts_of(run) | attributed:
            reasons[artifact_id].add(RECENT)
    model_id, blessing_ids = champion_ids
    if model_id is not None:
        report.champion_model, report.champion_blessings = model_id, blessing_ids
        statistics = lineage.inputs(lineage.producers(blessing_ids), "ExampleStatistics")
        for artifact_id in [model_id, *blessing_ids, *statistics]:
            reasons[artifact_id].add(CHAMPION)
    for artifact in lineage.artifacts.values():
        properties = artifact.custom_properties
        if artifact.type != "PushedModel" or "pushed" not in properties or properties["pushed"].int_value != 1:
            continue
        inputs = lineage.inputs(lineage.producers([artifact.id]), _MODEL, _BLESSING)
        for artifact_id in [artifact.id, *inputs]:
            reasons[artifact_id].add(PUSHED)
        for model_id in inputs:
            if lineage.artifacts[model_id].type == _MODEL:
                destination = properties.get("pushed_destination")
                report.pushed[model_id] = destination.string_value if destination is not None else "?"
    return reasons


def _left_by_tfx(lineage: _Lineage, pipeline_root: str) -> dict[str, str | None]:
    """Directories TFX left for the older runs' executions (path -> the run's name): their
    ``.system`` directories, and the outputs of those that published none; and driver
    directories from before the oldest kept run (-> None). Those that exist."""
    found: dict[str, str | None] = {}
    published = lineage.producers(lineage.artifacts)
    for run in lineage.older_runs:
        for execution in lineage.executions_of[run.id]:
            if execution.id not in lineage.node_of:
                continue
            node_dir = os.path.join(pipeline_root, lineage.node_of[execution.id])
            system = os.path.join(node_dir, SYSTEM_DIR)
            paths = [os.path.join(system, EXECUTOR_DIR, str(execution.id))]
            index = execution.custom_properties.get(STATEFUL_INDEX)
            if index is not None and index.string_value:
                paths.append(os.path.join(system, STATEFUL_DIR, index.string_value))
            if execution.id not in published and os.path.isdir(node_dir):
                # Outputs it never published (killed): TFX names them <node>/<key>/<execution id>.
                paths += [os.path.join(node_dir, key, str(execution.id)) for key in os.listdir(node_dir)]
            found.update((path, run.name) for path in paths if os.path.exists(path))
    if lineage.kept_runs and os.path.isdir(pipeline_root):
        oldest_kept_ms = lineage.kept_runs[-1].create_time_since_epoch
        for node in os.listdir(pipeline_root):
            drivers = os.path.join(pipeline_root, node, SYSTEM_DIR, DRIVER_DIR)
            if os.path.isdir(drivers):
                # Named by the time the driver ran, in microseconds.
                found.update(
                    (os.path.join(drivers, name), None)
                    for name in os.listdir(drivers)
                    if name.isdigit() and int(name) // 1000 < oldest_kept_ms
                )
    return found


def plan(handle, pipeline_name: str, pipeline_root: str, keep_runs: int) -> tuple[PruneReport, list[int]]:
    """What pruning removes and keeps, and the ids of the artifacts to mark DELETED (those in
    the report's ``removed`` that are not marked yet); reads only. ``handle``: an open
    ``tfx.orchestration.metadata.Metadata``."""
    if keep_runs < 1:
        raise ValueError(f"keep_runs must be at least 1 (the latest run is always kept), got {keep_runs}")
    lineage = _Lineage(handle.store, pipeline_name, keep_runs)
    report = PruneReport(
        pipeline_name, keep_runs, runs=len(lineage.runs), runs_kept=[r.name for r in lineage.kept_runs]
    )
    reasons = _kept(lineage, recorded_champion(lineage, pipeline_root), report)
    report.kept_total = len(reasons)
    report.kept = dict(collections.Counter(reason for why in reasons.values() for reason in why))
    marks = []
    for artifact in lineage.artifacts.values():
        if artifact.id in reasons:
            continue
        if not _under(artifact.uri, pipeline_root):
            if artifact.state != _DELETED:
                report.left_outside.append(artifact.id)
        elif artifact.state != _DELETED or os.path.lexists(artifact.uri):
            report.removed.append(Removal(artifact.uri, _disk_bytes(artifact.uri), artifact.id, artifact.type))
            if artifact.state != _DELETED:
                marks.append(artifact.id)
    # Never a directory holding an artifact's files: those go (or stay) with their artifact.
    uris = [a.uri for a in lineage.artifacts.values()]
    left = {
        path: run
        for path, run in _left_by_tfx(lineage, pipeline_root).items()
        if not any(_same(uri, path) or _under(uri, path) for uri in uris)
    }
    report.system_dirs = [Removal(path, _disk_bytes(path)) for path in left]
    removed_ids, runs_left = {r.artifact_id for r in report.removed}, set(left.values())
    report.runs_pruned = [
        run.name for run in lineage.older_runs if lineage.artifacts_of(run) & removed_ids or run.name in runs_left
    ]
    return report, marks


def _apply(store: metadata_store.MetadataStore, report: PruneReport, marks: list[int], pipeline_root: str) -> None:
    """Marks the artifacts DELETED, then moves each path aside and deletes it."""
    trash = os.path.join(pipeline_root, TRASH_DIR)
    shutil.rmtree(trash, ignore_errors=True)  # what an interrupted prune left
    if marks:
        artifacts = store.get_artifacts_by_id(marks)
        for artifact in artifacts:
            artifact.state = _DELETED
        store.put_artifacts(artifacts)
    removals = [*report.removed, *report.system_dirs]
    if not removals:
        return
    os.makedirs(trash, exist_ok=True)
    for removal in removals:
        if os.path.lexists(removal.path):
            os.rename(removal.path, os.path.join(trash, uuid.uuid4().hex))
            logging.info("Pruned %s (%s)", removal.path, size_text(removal.bytes))
    shutil.rmtree(trash)


def connection_config(metadata_path: str, read_only: bool = False) -> metadata_store_pb2.ConnectionConfig:
    """The store as it is: never created, and opened read-only for a dry run."""
    modes = metadata_store_pb2.SqliteMetadataSourceConfig
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = modes.READONLY if read_only else modes.READWRITE
    return config


def prune(
    metadata_path: str, pipeline_name: str, pipeline_root: str, keep_runs: int, dry_run: bool = False
) -> PruneReport:
    """Prunes one pipeline's artifacts (module docstring); with ``dry_run``, only says what it
    would remove. Raises ``FileNotFoundError`` naming the store when there is none. The
    caller holds the run lock."""
    if "://" in pipeline_root:
        raise ValueError(
            f"Pruning works on a local pipeline root, not {pipeline_root}: on Cloud Storage, use a lifecycle "
            "rule (docs/operating.md, 'Bounded growth')."
        )
    if not os.path.isfile(metadata_path):
        raise FileNotFoundError(f"No ML Metadata store at {metadata_path}: nothing was pruned.")
    from tfx.orchestration import metadata

    with metadata.Metadata(connection_config(metadata_path, read_only=dry_run)) as handle:
        report, marks = plan(handle, pipeline_name, pipeline_root, keep_runs)
        report.dry_run = dry_run
        if not dry_run:
            _apply(handle.store, report, marks, pipeline_root)
    logging.info("%s", report)
    return report


def prune_after_run(config: PipelineConfig, keep_runs: int) -> PruneReport:
    """Prunes after a successful run, keeping the latest ``keep_runs`` runs. Called by the
    runner while it holds the run lock, and before ``unchanged.record``: pruning writes to
    the store, and the record fingerprints the store as the run left it."""
    return prune(config.metadata_path, config.pipeline_name, config.pipeline_root, keep_runs)


def describe(report: PruneReport) -> str:
    """The command's account: runs, champion, pushed models, what went and what stayed."""
    lines = [f"Pipeline {report.pipeline_name}: {report.runs} run(s) recorded; keeping the latest {report.keep_runs}."]
    if report.champion_model is None:
        lines.append("Champion: none (no model pushed yet, or the record names none of this store's)")
    else:
        blessings = ", ".join(str(i) for i in report.champion_blessings)
        lines.append(f"Champion (the next run's baseline): Model {report.champion_model}, ModelBlessing {blessings}")
    pushed = "; ".join(f"Model {model} -> {where}" for model, where in sorted(report.pushed.items()))
    lines.append(f"Pushed models (kept): {pushed or 'none'}")
    by_type = collections.Counter(r.type_name for r in report.removed)
    kinds = ", ".join(f"{name} {count}" for name, count in sorted(by_type.items()))
    verb = "Would remove" if report.dry_run else "Removed"
    lines.append(
        f"{verb}: {len(report.removed)} artifact(s){f' ({kinds})' if kinds else ''} and "
        f"{len(report.system_dirs)} director(ies) TFX left, {size_text(report.bytes_freed)}"
        + (f", from the older run(s) {', '.join(report.runs_pruned)}" if report.runs_pruned else "")
    )
    reasons = ", ".join(
        f"{report.kept[reason]} {reason}" for reason in (RECENT, CHAMPION, PUSHED) if reason in report.kept
    )
    lines.append(f"Kept: {report.kept_total} artifact(s){f' ({reasons})' if reasons else ''}")
    if report.left_outside:
        lines.append(f"Left alone: {len(report.left_outside)} artifact(s) whose files are outside the pipeline root")
    if report.dry_run:
        lines.append("Dry run: nothing was changed.")
    elif report.removed:
        lines.append(
            "ML Metadata keeps every row (it cannot delete artifacts): the removed ones are marked DELETED, "
            "so no cache lookup takes them again."
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Remove the artifacts of a pipeline's older runs, keeping the latest runs, the champion "
        "(the model the champion record names) and every pushed model.",
        epilog="Exit codes: 0 pruned (or nothing to prune), 2 nothing to prune from (no metadata store) or a wrong "
        "flag, 3 a run of the pipeline is in progress.",
    )
    flags.add_shared_flags(parser, ("problem", "pipeline_name"))
    parser.add_argument(
        "--output-root",
        default=DEFAULT_OUTPUT_ROOT,
        help="Where the runs wrote artifacts and ML Metadata (default: the project's outputs/).",
    )
    parser.add_argument(
        "--keep-runs", type=int, required=True, help="Keep every artifact of this many most recent runs (1 or more)."
    )
    parser.add_argument("--dry-run", action="store_true", help="Say what would be removed; change nothing.")
    add_verbose_flag(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    warnings.filterwarnings("ignore", category=FutureWarning)
    args = parse_args(argv)
    try:
        if args.keep_runs < 1:
            raise ValueError(f"--keep-runs must be at least 1 (the latest run is always kept), got {args.keep_runs}")
        config = PipelineConfig(
            problem=problem_lib.load(args.problem),
            pipeline_name=args.pipeline_name,
            output_root=os.path.abspath(args.output_root),
            infer_schema=True,  # pruning reads what ran; it checks no data against a contract
        )
    except ValueError as err:
        say(f"error: {err}", err=True)
        return 2
    if not os.path.isfile(config.metadata_path):
        say(
            f"error: no ML Metadata store at {config.metadata_path}, so nothing to prune: check --output-root "
            "and --pipeline-name (or --problem), which name where the runs wrote.",
            err=True,
        )
        return 2
    with Terminal(command_log(config.output_root, "prune"), verbose=args.verbose) as terminal:
        try:
            with hold_run_lock(config):
                report = prune(
                    config.metadata_path, config.pipeline_name, config.pipeline_root, args.keep_runs, args.dry_run
                )
        except LockedError as err:
            say(f"error: not pruning while a run of the pipeline is in progress: {err}", err=True)
            return 3
        say(describe(report))
        terminal.say_log()
    return 0


if __name__ == "__main__":
    sys.exit(main())
