"""The compiled pipeline-job file, read as Vertex AI Pipelines reads it: tasks, the order
the DAG allows, each task's component and executor; and where the stand-in Cloud Storage
keeps gs:// objects on this machine's disk (``GcsFolder``)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from typing import Any

GCS = "gs://"


class JobError(ValueError):
    """The job file cannot be rehearsed; the message says what and why."""


@dataclasses.dataclass(frozen=True)
class GcsFolder:
    """The stand-in Cloud Storage's disk: ``gs://BUCKET/NAME`` is ``<folder>/BUCKET/NAME``, so
    a person can look at what the tasks wrote. ``uploads`` are (gs:// prefix, local folder)
    pairs (a folder or one file) copied in before the job runs, as ``gsutil cp -r`` would."""

    folder: str
    uploads: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, folder: str, pairs: Iterable[str]) -> GcsFolder:
        uploads = []
        for pair in pairs:
            prefix, sep, local = pair.partition("=")
            if not sep or not prefix.startswith(GCS) or len(prefix.rstrip("/")) <= len(GCS) or not local:
                raise JobError(f"an upload is gs://bucket/prefix=LOCAL_DIR, got {pair!r}")
            if not os.path.exists(local):
                raise JobError(f"--rehearse-gcs {pair}: there is no {local} to upload")
            uploads.append((prefix.rstrip("/"), os.path.abspath(local)))
        return cls(os.path.abspath(folder), tuple(uploads))

    def local(self, path: str) -> str:
        """Where one gs:// path lives on disk (other paths unchanged)."""
        if not path.startswith(GCS):
            return path
        return os.path.join(self.folder, path[len(GCS) :])

    def upload(self) -> None:
        """Copies each upload's files to its gs:// prefix (existing objects are replaced)."""
        for prefix, local in self.uploads:
            target = self.local(prefix)
            if os.path.isdir(local):
                shutil.copytree(local, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(local, target)


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    spec: Mapping[str, Any]
    component: Mapping[str, Any]
    executor: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """container, resolver, importer (the executor spec's one field)."""
        return next(iter(self.executor))

    @property
    def upstream(self) -> set[str]:
        """Tasks this one waits for: its declared dependencies and its artifacts' producers."""
        found = set(self.spec.get("dependentTasks", []))
        for source in self.spec.get("inputs", {}).get("artifacts", {}).values():
            if "taskOutputArtifact" in source:
                found.add(source["taskOutputArtifact"]["producerTask"])
        return found

    @property
    def caching_enabled(self) -> bool:
        return bool(self.spec.get("cachingOptions", {}).get("enableCache", False))


@dataclasses.dataclass(frozen=True)
class CompiledJob:
    path: str
    raw: Mapping[str, Any]

    @classmethod
    def load(cls, path: str) -> CompiledJob:
        with open(path) as f:
            raw = json.load(f)
        if "pipelineSpec" not in raw:
            raise JobError(
                f"{path} is not a compiled pipeline job (no pipelineSpec): compile it with kubeflow_runner.py"
            )
        return cls(path, raw)

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.raw["pipelineSpec"]

    @property
    def pipeline_name(self) -> str:
        return self.spec["pipelineInfo"]["name"]

    @property
    def pipeline_root(self) -> str:
        root = self.raw.get("runtimeConfig", {}).get("gcsOutputDirectory") or self.spec.get("defaultPipelineRoot")
        if not root:
            raise JobError(f"{self.path} has no pipeline root (runtimeConfig.gcsOutputDirectory)")
        return root

    @property
    def runtime_parameters(self) -> Mapping[str, Any]:
        config = self.raw.get("runtimeConfig", {})
        return {**config.get("parameters", {}), **config.get("parameterValues", {})}

    def tasks(self) -> dict[str, Task]:
        executors = self.spec["deploymentSpec"]["executors"]
        found = {}
        for name, spec in self.spec["root"]["dag"]["tasks"].items():
            component = self.spec["components"][spec["componentRef"]["name"]]
            if "executorLabel" not in component:
                raise JobError(f"task {name} is a nested DAG; the rehearsal runs flat pipelines (what TFX compiles)")
            found[name] = Task(name, spec, component, executors[component["executorLabel"]])
        return found

    def task_order(self) -> list[Task]:
        """A topological order of the DAG; ties by name, so every rehearsal runs the same
        order (Vertex may run independent tasks at the same time)."""
        tasks = self.tasks()
        for task in tasks.values():
            if missing := task.upstream - tasks.keys():
                raise JobError(f"task {task.name} depends on unknown task(s) {sorted(missing)}")
        done: list[Task] = []
        names: set[str] = set()
        while len(done) < len(tasks):
            ready = sorted(n for n, t in tasks.items() if n not in names and t.upstream <= names)
            if not ready:
                raise JobError(f"the DAG has a cycle among {sorted(tasks.keys() - names)}")
            done.append(tasks[ready[0]])
            names.add(ready[0])
        return done
