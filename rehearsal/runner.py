"""Executes a compiled pipeline job on this machine as Vertex AI Pipelines (or the open-source
Kubeflow backend) would: task by task in DAG order, each container task in a fresh podman
container, with a persistent artifact store, caching, and the stand-ins of ``cloud/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rehearsal import executor_input as ei
from rehearsal import filters, flink, kubeflow_backend, podman
from rehearsal.containers import Containers, ImageMissingError, check_image
from rehearsal.job import CompiledJob, GcsFolder, JobError, Task
from rehearsal.store import ArtifactStore
from runtime.terminal import say

if TYPE_CHECKING:
    from rehearsal.cloud.standins import StandIns

# The executor that deploys to a Vertex AI endpoint: its stand-in serves from TensorFlow 2.15.
VERTEX_PUSHER = "components.vertex_pusher.Executor"
# The rehearsal's record of itself, in its log folder.
RECORD_FILE = "rehearsal.json"
# What executes the job (Settings.backend).
VERTEX, KUBEFLOW = "vertex", "kubeflow"
BACKENDS = (VERTEX, KUBEFLOW)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where the rehearsal keeps things, and what stands in for the cloud."""

    root: str
    gcs: GcsFolder
    project: str = "rehearsal"
    region: str = "local"
    # None: each task's compiled cachingOptions; True/False: for every task, as
    # aiplatform.PipelineJob(enable_caching=...) does.
    enable_caching: bool | None = None
    job_id: str | None = None
    progress: Callable[[str], None] = say
    # The TensorFlow 2.15 environment an endpoint's model is served from (None: endpoints refused).
    serving_python: str | None = None
    # Whose execution to rehearse: VERTEX (Vertex AI Pipelines) or KUBEFLOW (the open-source
    # Kubeflow Pipelines backend: no lifecycle hooks, no resolvers, its output layout).
    backend: str = "vertex"

    @property
    def store_path(self) -> str:
        return os.path.join(self.root, "metadata", "vertex_ml_metadata.sqlite")


@dataclasses.dataclass
class TaskRun:
    name: str
    kind: str
    state: str  # SUCCEEDED, CACHED, FAILED, NOT_RUN
    seconds: float = 0.0
    inputs: dict[str, list[dict]] = dataclasses.field(default_factory=dict)
    outputs: dict[str, list[dict]] = dataclasses.field(default_factory=dict)
    exit_code: int | None = None
    log: str | None = None
    executor_input: dict | None = None
    started: float = 0.0
    # Files the task's container wrote outside gs://, which no later task sees.
    left_behind: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Rehearsal:
    job_id: str
    pipeline_name: str
    logs_dir: str
    tasks: list[TaskRun]
    gcs: GcsFolder | None = None
    # What the tasks asked of the stand-ins: connections through the proxy, training jobs, deployments.
    connections: list = dataclasses.field(default_factory=list)
    training_jobs: list = dataclasses.field(default_factory=list)
    deployments: list = dataclasses.field(default_factory=list)
    # The images the tasks ran in: name -> podman's image id.
    images: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> TaskRun | None:
        return next((t for t in self.tasks if t.state == "FAILED"), None)

    @property
    def succeeded(self) -> bool:
        return all(t.state in ("SUCCEEDED", "CACHED") for t in self.tasks)

    def task(self, name: str) -> TaskRun:
        return next(t for t in self.tasks if t.name == name)

    def record(self) -> dict:
        """What ran, how, and with which artifacts (written beside the task logs)."""
        return {
            "job_id": self.job_id,
            "pipeline": self.pipeline_name,
            "tasks": [
                {
                    "name": t.name,
                    "kind": t.kind,
                    "state": t.state,
                    "seconds": round(t.seconds, 3),
                    "exit_code": t.exit_code,
                    "inputs": {k: [a["name"] for a in v] for k, v in t.inputs.items()},
                    "outputs": {
                        k: [{f: a[f] for f in ("name", "uri", "metadata")} for a in v] for k, v in t.outputs.items()
                    },
                    "left_behind": t.left_behind,
                }
                for t in self.tasks
            ],
            "images": self.images,
            "connections": self.connections_by_host(),
            "refused": [dataclasses.asdict(c) for c in self.connections if c.refused],
        }

    def connections_by_host(self) -> dict[str, int]:
        """How many connections the tasks' clients made to each stand-in host."""
        counted: dict[str, int] = {}
        for connection in self.connections:
            if not connection.refused:
                counted[connection.host] = counted.get(connection.host, 0) + 1
        return dict(sorted(counted.items()))

    def local(self, uri: str) -> str:
        """Where a gs:// URI of this rehearsal lives on this machine."""
        return self.gcs.local(uri) if self.gcs else uri


def _class_path(task: Task) -> str:
    args = task.executor["container"].get("args", [])
    return args[args.index("--executor_class_path") + 1] if "--executor_class_path" in args else ""


def refuse_unrehearsable(job: CompiledJob, serving_python: str | None, backend: str = VERTEX) -> None:
    """What cannot run here is refused up front, naming the flag that asked for it, or the
    image to build; as the open-source Kubeflow backend, what it would refuse or mis-run."""
    if backend == KUBEFLOW and (found := kubeflow_backend.refusals(job.raw)):
        raise JobError(
            "the open-source Kubeflow Pipelines backend would not run this job as compiled:\n  " + "\n  ".join(found)
        )
    for task in job.tasks().values():
        if task.kind != "container":
            continue
        if any(a.startswith("--runner=") and "Dataflow" in a for a in task.executor["container"].get("args", [])):
            raise JobError(
                f"task {task.name} cannot be rehearsed: its Beam pipeline runs on Dataflow (--dataflow), whose "
                "service (the job graph, the worker VMs, autoscaling, the staging to GCS) has no stand-in here. "
                "What Dataflow's workers run is tested instead: the image's entrypoint, Beam's boot, started "
                "with the flags Dataflow's workers start it with, installs a staged package and runs the SDK "
                "harness (tests/rehearsal/test_image.py::"
                "test_boot_started_with_dataflows_worker_flags_installs_a_staged_package). Rehearse without "
                "--dataflow: the same Beam pipeline then runs in the task's container."
            )
        if _class_path(task) == VERTEX_PUSHER and not (serving_python and os.path.exists(serving_python)):
            raise JobError(
                f"task {task.name} deploys to a Vertex AI endpoint (--endpoint-name), whose stand-in serves the "
                f"model with TensorFlow 2.15: there is no such Python at {serving_python} (make serving-env "
                "installs it; --serving-python points elsewhere)."
            )
    images: dict[str, str] = {}  # each image once: the first task that runs it
    for task in job.tasks().values():
        if task.kind == "container":
            images.setdefault(task.executor["container"]["image"], task.name)
    for image, task_name in images.items():
        try:
            check_image(image)
        except ImageMissingError as err:
            raise JobError(f"task {task_name} cannot be rehearsed: {err}") from None


def rehearse(job_file: str, settings: Settings) -> Rehearsal:
    """Runs every task of the compiled job (its data already uploaded: ``GcsFolder.upload``);
    never raises for a failing task (see ``failed``)."""
    job = CompiledJob.load(job_file)
    refuse_unrehearsable(job, settings.serving_python, settings.backend)
    order = job.task_order()
    images = _image_ids(order)
    job_id, logs_dir = _new_job(settings, job.pipeline_name)
    containers = Containers(job_id)
    store = ArtifactStore(settings.store_path, settings.project, settings.region)
    context = _JobContext(job, job_id, logs_dir, settings, store, containers)
    master = flink.master_host(order)
    stand_ins = _stand_ins(settings, containers, order, master)
    try:
        with stand_ins:
            containers.reach(flink.tasks_environment(stand_ins.environment(), master))
            runs = _run_tasks(context, order)
            # Read while they stand: stopping ends the deployments' model servers.
            training_jobs = stand_ins.jobs.jobs() if stand_ins.jobs else []
            deployments = stand_ins.models.deployments() if stand_ins.models else []
            connections = stand_ins.connections()
    finally:
        store.close()
        containers.remove_all()
    rehearsal = Rehearsal(
        job_id,
        job.pipeline_name,
        logs_dir,
        runs,
        gcs=settings.gcs,
        connections=connections,
        training_jobs=training_jobs,
        deployments=deployments,
        images=images,
    )
    _save_json(os.path.join(logs_dir, RECORD_FILE), rehearsal.record())
    return rehearsal


@dataclasses.dataclass(frozen=True)
class _JobContext:
    """What every task of one rehearsed job shares."""

    job: CompiledJob
    job_id: str
    logs_dir: str
    settings: Settings
    store: ArtifactStore
    containers: Containers


def _image_ids(order: list[Task]) -> dict[str, str]:
    """Each image the container tasks name -> podman's id of it."""
    names = sorted({t.executor["container"]["image"] for t in order if t.kind == "container"})
    return {name: podman.inspect_image(name)["Id"] for name in names}


def _stand_ins(settings: Settings, containers: Containers, order: list[Task], master: str | None) -> StandIns:
    """The cloud the tasks reach: endpoints only when a task deploys to one, Kubernetes as
    Kubeflow; the proxy also where the workers of the Flink cluster at ``master`` reach it."""
    from rehearsal.cloud.standins import STAND_INS_FOLDER, StandIns

    endpoints = any(_class_path(t) == VERTEX_PUSHER for t in order if t.kind == "container")
    return StandIns(
        os.path.join(settings.root, STAND_INS_FOLDER),
        settings.gcs.folder,
        settings.project,
        launcher=containers,
        serving_python=settings.serving_python if endpoints else None,
        kubernetes=settings.backend == KUBEFLOW,
        also_listen=((flink.address_toward(master), flink.WORKERS_PROXY_PORT),) if master else (),
    )


def _run_tasks(context: _JobContext, order: list[Task]) -> list[TaskRun]:
    """Each task in order, saying how it went; once one fails, the rest are NOT_RUN."""
    progress = context.settings.progress
    runs: list[TaskRun] = []
    produced: dict[str, dict[str, list[dict]]] = {}
    for number, task in enumerate(order, 1):
        if any(r.state == "FAILED" for r in runs):
            runs.append(TaskRun(task.name, task.kind, "NOT_RUN"))
            continue
        inputs = _input_artifacts(task, produced)
        step = f"[{number}/{len(order)}] {task.name}"
        progress(f"{step} ...")
        started = time.time()
        run = _run_task(context, task, inputs)
        run.started, run.seconds = started, time.time() - started
        runs.append(run)
        produced[task.name] = run.outputs
        progress(f"{step}: {run.state.lower()} in {run.seconds:.1f} s")
    return runs


def _run_task(context: _JobContext, task: Task, inputs: dict[str, list[dict]]) -> TaskRun:
    if task.kind == "resolver":
        return _resolve(task, inputs, context.store, context.job, context.job_id)
    if task.kind == "container":
        enable_caching = context.settings.enable_caching
        caching = task.caching_enabled if enable_caching is None else enable_caching
        return _run_container(context, task, inputs, caching)
    raise JobError(f"task {task.name}: {task.kind} executors are not rehearsed (TFX compiles none)")


def _new_job(settings: Settings, pipeline_name: str) -> tuple[str, str]:
    """A job id as aiplatform.PipelineJob makes one (name-timestamp), unique here, and its log folder."""
    base = settings.job_id or f"{pipeline_name}-{time.strftime('%Y%m%d%H%M%S')}"
    for attempt in range(1, 1000):
        job_id = base if attempt == 1 else f"{base}-{attempt}"
        logs_dir = os.path.join(settings.root, "logs", job_id)
        try:
            os.makedirs(logs_dir)
            return job_id, logs_dir
        except FileExistsError:
            continue
    raise JobError(f"no free job id like {base} under {settings.root}/logs")


def _input_artifacts(task: Task, produced: Mapping[str, Mapping[str, list[dict]]]) -> dict[str, list[dict]]:
    found = {}
    for key, source in task.spec.get("inputs", {}).get("artifacts", {}).items():
        if "taskOutputArtifact" not in source:
            raise JobError(f"task {task.name}: input {key} comes from {sorted(source)}, which TFX never compiles")
        output = source["taskOutputArtifact"]
        found[key] = list(produced[output["producerTask"]].get(output["outputArtifactKey"], []))
    return found


def _resolve(task: Task, inputs, store: ArtifactStore, job: CompiledJob, job_id: str) -> TaskRun:
    """A resolver task: each output is the query's result, newest first, ``limit`` of them
    (1 when unset). A filter that refers to an input artifact list that is empty resolves
    to nothing rather than failing (Vertex does not document this case; an empty result is
    what lets the first run of a pipeline go on without a baseline)."""
    execution = store.start_execution(job.pipeline_name, job_id, task.name)
    query_input = ei.build({}, inputs, {}, "")
    outputs = {}
    for key, query in task.executor["resolver"]["outputArtifactQueries"].items():
        try:
            text = ei.resolve(query["filter"], query_input)
        except ei.EmptyInputError:
            outputs[key] = []
            continue
        outputs[key] = store.query(filters.parse(text), int(query.get("limit") or 1))
    store.finish_execution(execution, "SUCCEEDED", None, _names(outputs))
    return TaskRun(task.name, task.kind, "SUCCEEDED", inputs=inputs, outputs=outputs)


def cache_key(executor_input: Mapping[str, Any], task: Task) -> str:
    """KFP's cache key (``cacheutils.GenerateCacheKey``): input artifact names, parameter
    values, output artifact keys and types, output parameters, image, command and args
    (as compiled, before placeholders). Vertex's own key is not public."""
    container = task.executor["container"]
    outputs = task.component.get("outputDefinitions", {})
    content = {
        "inputArtifactNames": {
            k: [a["name"] for a in v["artifacts"]] for k, v in executor_input["inputs"].get("artifacts", {}).items()
        },
        "inputParameterValues": executor_input["inputs"]["parameterValues"],
        "outputArtifactsSpec": {k: v.get("artifactType") for k, v in outputs.get("artifacts", {}).items()},
        "outputParametersSpec": outputs.get("parameters", {}),
        "image": container.get("image"),
        "command": container.get("command", []),
        "args": container.get("args", []),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


@dataclasses.dataclass
class _ContainerRun:
    """One container task under way: its execution in the store, where its outputs go, the
    output artifacts made for it and the ExecutorInput it is given."""

    task: Task
    execution: int
    uri: str  # <uri>/<output key> for each output; <uri>/executor_output.json for what it reports
    outputs: dict[str, list[dict]]
    invocation: dict
    run: TaskRun

    @property
    def output_file(self) -> str:
        return f"{self.uri}/executor_output.json"


def _run_container(context: _JobContext, task: Task, inputs: dict[str, list[dict]], caching: bool) -> TaskRun:
    """The driver (if any), then the cache (if on), then the task's command; outputs published or abandoned."""
    container = _start_container_run(context, task, inputs)
    spec = task.executor["container"]
    with open(container.run.log, "w") as log_file:
        code = _run_driver(context, container, log_file)
        if code != 0:
            return _fail(context, container, code)
        key = cache_key(container.invocation, task)
        if caching and (cached := context.store.cached_outputs(context.job.pipeline_name, key)) is not None:
            return _reuse(context, container, key, cached, log_file)
        _save_json(os.path.join(context.logs_dir, f"{task.name}.executor_input.json"), container.invocation)
        code = _execute(
            spec, spec["image"], container.invocation, context.containers, task.name, log_file, container.run
        )
    if code != 0:
        return _fail(context, container, code)
    return _publish(context, container, key)


def _start_container_run(context: _JobContext, task: Task, inputs: dict[str, list[dict]]) -> _ContainerRun:
    """The task's execution started in the store, its output artifacts made and its ExecutorInput built."""
    job, job_id, store = context.job, context.job_id, context.store
    execution = store.start_execution(job.pipeline_name, job_id, task.name)
    if context.settings.backend == KUBEFLOW:
        task_uri = kubeflow_backend.output_uri(job.pipeline_root, job.pipeline_name, job_id, task.name, "").rstrip("/")
    else:
        # Vertex's layout: <pipeline root>/<project>/<job id>/<task>_<id>/<output key>, in Cloud Storage.
        task_uri = f"{job.pipeline_root.rstrip('/')}/{context.settings.project}/{job_id}/{task.name}_{execution}"
    outputs = {
        key: [
            store.new_artifact(
                job.pipeline_name, job_id, task.name, key, spec["artifactType"], lambda _, key=key: f"{task_uri}/{key}"
            )
        ]
        for key, spec in task.component.get("outputDefinitions", {}).get("artifacts", {}).items()
    }
    parameters = _placeholders_filled_in(ei.parameter_values(task, job.runtime_parameters), job_id, task, execution)
    invocation = ei.build(parameters, inputs, outputs, f"{task_uri}/executor_output.json")
    log = os.path.join(context.logs_dir, f"{task.name}.log")
    run = TaskRun(task.name, task.kind, "FAILED", inputs=inputs, log=log, executor_input=invocation)
    return _ContainerRun(task, execution, task_uri, outputs, invocation, run)


def _run_driver(context: _JobContext, container: _ContainerRun, log_file) -> int:
    """The task's driver (``lifecycle.preCacheCheck``), in the task's image before the task, its
    output merged into the ExecutorInput; 0 when the task has none."""
    task = container.task
    spec = task.executor["container"]
    driver = spec.get("lifecycle", {}).get("preCacheCheck")
    if not driver:
        return 0
    _save_json(os.path.join(context.logs_dir, f"{task.name}.driver_input.json"), container.invocation)
    name = f"{task.name}.driver"
    code = _execute(driver, spec["image"], container.invocation, context.containers, name, log_file, container.run)
    if code == 0:
        ei.merge_driver_output(container.invocation, _read_json(context.settings.gcs.local(container.output_file)))
    return code


def _reuse(
    context: _JobContext, container: _ContainerRun, key: str, cached: dict[str, list[dict]], log_file
) -> TaskRun:
    """A cache hit: the earlier execution's outputs stand for this one's, whose folder goes."""
    context.store.abandon(_all_names(container.outputs))
    context.store.finish_execution(container.execution, "CACHED", key, _names(cached))
    log_file.write(f"Cached: reusing the outputs of an earlier execution with cache key {key}\n")
    shutil.rmtree(context.settings.gcs.local(container.uri), ignore_errors=True)
    container.run.state, container.run.outputs = "CACHED", cached
    return container.run


def _fail(context: _JobContext, container: _ContainerRun, code: int) -> TaskRun:
    context.store.abandon(_all_names(container.outputs))
    context.store.finish_execution(container.execution, "FAILED", None, {})
    container.run.exit_code = code
    return container.run


def _publish(context: _JobContext, container: _ContainerRun, key: str) -> TaskRun:
    """The outputs published with the metadata the task gave them and what its executor_output.json reported."""
    store, local_output_file = context.store, context.settings.gcs.local(container.output_file)
    written = _read_json(local_output_file).get("artifacts", {}) if os.path.exists(local_output_file) else {}
    for output_key, (artifact,) in container.outputs.items():
        reported = (written.get(output_key) or {}).get("artifacts", [{}])[0]
        given = container.invocation["outputs"]["artifacts"][output_key]["artifacts"][0]["metadata"]
        store.publish(artifact["name"], {**given, **reported.get("metadata", {})}, reported.get("uri") or None)
    published = {k: [store.artifact(a["name"]) for a in v] for k, v in container.outputs.items()}
    store.finish_execution(container.execution, "SUCCEEDED", key, _names(published))
    container.run.state, container.run.outputs, container.run.exit_code = "SUCCEEDED", published, 0
    return container.run


def _placeholders_filled_in(parameters: dict[str, dict], job_id: str, task: Task, execution: int) -> dict[str, dict]:
    """The parameters as both backends hand them over: one that is a whole placeholder
    (``kubeflow_backend.PLACEHOLDERS``: the run's id, the task's name) filled in."""
    filled = {}
    for name, value in parameters.items():
        if "stringValue" in value:
            text = kubeflow_backend.substitute(value["stringValue"], job_id, job_id, task.name, str(execution))
            value = {**value, "stringValue": text}
        filled[name] = value
    return filled


def _execute(
    spec: Mapping[str, Any], image: str, invocation: dict, containers: Containers, name: str, log_file, run: TaskRun
) -> int:
    """One container command, placeholders resolved, in a fresh container of the image."""
    command = [ei.resolve(a, invocation) for a in spec.get("command", [])]
    args = [ei.resolve(a, invocation) for a in spec.get("args", [])]
    argv = [*command, *args]
    log_file.write(f"$ {' '.join(argv[:4])} ... ({len(argv)} arguments) in {image}\n")
    log_file.flush()
    code, written = containers.run(name, image, command, args, log_file)
    run.left_behind.extend(written)
    log_file.write(f"exit code {code}\n")
    return code


def _names(outputs: Mapping[str, list[dict]]) -> dict[str, list[dict]]:
    return {k: [{"name": a["name"]} for a in v] for k, v in outputs.items()}


def _all_names(outputs: Mapping[str, list[dict]]) -> list[str]:
    return [a["name"] for v in outputs.values() for a in v]


def _read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _save_json(path: str, value: Any) -> None:
    with open(path, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
