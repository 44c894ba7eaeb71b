"""A rerun with nothing changed, answered without starting TFX.

After a steady run its summary is recorded with a fingerprint of everything the run read
(the configuration, the project's code, the data files, the installed packages, the metadata
store); a later run with the same fingerprint, whose outputs all still exist, prints that
summary and starts nothing (docs/run-report.md, "A rerun with nothing changed").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from importlib import metadata as package_metadata
from pathlib import Path

from pipeline.config import REPO_ROOT, PipelineConfig
from report.run_summary import ComponentRun, RunSummary
from runtime import champion

RECORD_FILE = "last_steady_run.json"
# The code a local run executes: the pipeline definition, its components, the user modules,
# and what starts the run and reports on it.
CODE_ROOTS = ("components", "models", "pipeline", "launch", "runs", "report", "runtime", "local_runner.py")
PACKAGES = (
    "tfx",
    "tensorflow",
    "tf-keras",
    "tensorflow-transform",
    "tensorflow-model-analysis",
    "tensorflow-data-validation",
    "apache-beam",
    "ml-metadata",
)


@dataclasses.dataclass(frozen=True)
class ReusedRun:
    summary: RunSummary
    report: str | None


def record_path(config: PipelineConfig) -> str:
    return os.path.join(os.path.dirname(config.metadata_path), RECORD_FILE)


def is_steady(summary: RunSummary) -> bool:
    """Whether running again unchanged would give this very run: every component finished,
    and the next run's Champion finds the same baseline, which holds unless this run
    blessed a model other than its baseline. (A first run's blessing
    makes the second run evaluate against it, so the first run is not steady; the second,
    whose baseline is its own model, is.)"""
    if not summary.components or any(c.state not in ("complete", "cached") for c in summary.components):
        return False
    if summary.blessed is None:
        return False
    return not summary.blessed or summary.baseline_is_candidate


def _file_stats(root: str | None) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime in ns) of every file under ``root``: what TFX's
    ExampleGen fingerprints its input by, for every file it could read."""
    if not root or not os.path.exists(root):
        return []
    found = []
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            stat = os.stat(path)
            found.append((os.path.relpath(path, root), stat.st_size, stat.st_mtime_ns))
    return sorted(found)


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if os.path.exists(path) else ""


def _code_digest(project_root: Path) -> str:
    digest = hashlib.sha256()
    for root in CODE_ROOTS:
        path = project_root / root
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if "__pycache__" in file.parts:
                continue
            digest.update(str(file.relative_to(project_root)).encode())
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def _package_versions() -> dict[str, str]:
    versions = {"python": sys.version}
    for name in PACKAGES:
        try:
            versions[name] = package_metadata.version(name)
        except package_metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def fingerprint(config: PipelineConfig, project_root: Path = REPO_ROOT) -> str:
    """Everything a run reads, but the metadata store (compared on its own)."""
    schema = Path(config.schema_path).read_bytes() if config.schema_path else b""
    inputs = {
        "config": dataclasses.asdict(config),
        "code": _code_digest(project_root),
        "data": _file_stats(config.data_root),
        "serving_data": _file_stats(config.serving_data_root),
        "schema": hashlib.sha256(schema).hexdigest(),
        "packages": _package_versions(),
        # What the Champion component reads: a push or a rollback since changes the run.
        "champion": _digest(champion.record_path(config.pipeline_root)),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def _store_state(config: PipelineConfig) -> list[int] | None:
    try:
        stat = os.stat(config.metadata_path)
    except FileNotFoundError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


def forget(config: PipelineConfig) -> None:
    """Drops the record: called before TFX runs, so a run that stops half-way leaves none."""
    try:
        os.remove(record_path(config))
    except FileNotFoundError:
        pass


def record(config: PipelineConfig, summary: RunSummary, report: str | None, project_root: Path = REPO_ROOT) -> bool:
    """Records a steady run for the next run to reuse; returns whether it did. Call it last,
    once nothing else will write to the metadata store."""
    forget(config)
    if not config.enable_cache or not is_steady(summary):
        return False
    content = {
        "fingerprint": fingerprint(config, project_root),
        "store": _store_state(config),
        "summary": dataclasses.asdict(summary),
        "report": report,
    }
    path = record_path(config)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(content, f)
    os.replace(path + ".tmp", path)
    return True


def _summary_from(content: dict) -> RunSummary:
    components = [ComponentRun(**c) for c in content["components"]]
    return RunSummary(**{**content, "components": components})


def reusable_run(config: PipelineConfig, project_root: Path = REPO_ROOT) -> ReusedRun | None:
    """The recorded run, if this run would reproduce it: caching on, the same fingerprint,
    the store untouched since, every output still there. None otherwise."""
    if not config.enable_cache:
        return None
    try:
        with open(record_path(config), encoding="utf-8") as f:
            content = json.load(f)
        summary = _summary_from(content["summary"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if content["store"] is None or content["store"] != _store_state(config):
        return None
    outputs = [*summary.outputs.values(), *([summary.pushed_to] if summary.pushed_to else [])]
    if not all(os.path.exists(uri) for uri in outputs):
        return None
    if content["fingerprint"] != fingerprint(config, project_root):
        return None
    report = content["report"] if content["report"] and os.path.exists(content["report"]) else None
    return ReusedRun(summary, report)
