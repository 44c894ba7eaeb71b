"""A stand-in for Vertex AI's JobService (custom jobs): each worker pool's replicas run as local
processes (in fresh containers, through a ``ReplicaLauncher``) with the environment Vertex gives
them, and the job ends as Vertex ends it.

GetCustomJob is a long poll: an answer may come at any moment, so it comes when the job ends
(or after ``LONG_POLL_SECONDS``, or just before the request's deadline). TFX's client asks once
right after submitting and sleeps 30 s between later asks: with the long poll it never sleeps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import itertools
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Protocol

import grpc
from google.cloud.aiplatform_v1.types import (
    CancelCustomJobRequest,
    CreateCustomJobRequest,
    CustomJob,
    CustomJobSpec,
    GetCustomJobRequest,
    JobState,
    ListCustomJobsRequest,
    ListCustomJobsResponse,
    WorkerPoolSpec,
)
from google.protobuf import empty_pb2
from google.rpc import code_pb2, status_pb2

from rehearsal.logs import log_tail

SERVICE = "google.cloud.aiplatform.v1.JobService"
POLL_SECONDS = 0.1
# The longest a GetCustomJob waits for its job to end; the margin it leaves a request's deadline.
LONG_POLL_SECONDS = 600.0
DEADLINE_MARGIN_SECONDS = 0.2
STOP_GRACE_SECONDS = 10.0
LOG_TAIL_LINES = 20
LOCAL_HOSTS = ("127.0.0.1", "localhost")
# Vertex's pool order: 0 primary, 1 workers, 2 parameter servers, 3 evaluators.
TF_TASK_TYPES = ("chief", "worker", "ps", "evaluator")
TPU_MACHINE_TYPE = "cloud-tpu"
FINAL_STATES = (JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED, JobState.JOB_STATE_CANCELLED)
_PARENT = re.compile(r"^projects/[^/]+/locations/[^/]+$")


@dataclasses.dataclass(frozen=True)
class Replica:
    pool: int
    index: int
    name: str  # "workerpool0-replica-0"
    job_id: str = ""  # the numeric id of the job it belongs to, so setups can tell jobs apart


@dataclasses.dataclass(frozen=True)
class Launch:
    """How to start one replica's process."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None


class ReplicaLauncher(Protocol):
    """Starts replicas as a machine of Vertex's would: ``environment`` is what the replica's
    container has before Vertex adds the pool's ``env``, CLUSTER_SPEC, TF_CONFIG and AIP_*;
    ``launch`` gives the process that runs ``command`` in the pool's image with ``env``;
    ``remove`` cleans up after a replica has ended."""

    def environment(self, replica: Replica) -> dict[str, str]: ...

    def launch(
        self, replica: Replica, image: str, command: list[str], env: dict[str, str], hosts: dict[str, str] = ...
    ) -> Launch: ...

    def remove(self, replica: Replica) -> None: ...


@dataclasses.dataclass(frozen=True)
class ReplicaRecord:
    name: str
    exit_code: int | None  # None: never started; negative: ended by that signal
    log_path: str
    stopped: bool  # the service ended it (the job was over or cancelled)


@dataclasses.dataclass(frozen=True)
class JobRecord:
    name: str
    display_name: str
    state: str  # a JobState name, e.g. "JOB_STATE_SUCCEEDED"
    error: str
    replicas: tuple[ReplicaRecord, ...]
    not_rehearsed: tuple[str, ...]


@dataclasses.dataclass
class _Process:
    replica: Replica
    log_path: str
    popen: subprocess.Popen | None = None
    stopped: bool = False


@dataclasses.dataclass
class _Job:
    id: str
    proto: CustomJob
    not_rehearsed: tuple[str, ...]
    processes: list[_Process] = dataclasses.field(default_factory=list)
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    ended: threading.Event = dataclasses.field(default_factory=threading.Event)  # set in a final state
    cancel_reason: str = "Cancelled by CancelCustomJob"
    thread: threading.Thread | None = None


class JobService:
    """Vertex AI's JobService for custom jobs, with replicas as local processes."""

    def __init__(self, workdir: str, launcher: ReplicaLauncher) -> None:
        self._workdir = os.path.abspath(workdir)
        self._launcher = launcher
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self._ids = itertools.count(random.randrange(10**18, 9 * 10**18))  # numeric ids, 19 digits like Vertex's

    def add_to_server(self, server: grpc.Server) -> None:
        def unary(fn: Callable, request_type: type, response_serializer: Callable = CustomJob.serialize):
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=request_type.deserialize, response_serializer=response_serializer
            )

        handlers = {
            "CreateCustomJob": unary(self._create, CreateCustomJobRequest),
            "GetCustomJob": unary(self._get, GetCustomJobRequest),
            "CancelCustomJob": unary(self._cancel, CancelCustomJobRequest, empty_pb2.Empty.SerializeToString),
            "ListCustomJobs": unary(self._list, ListCustomJobsRequest, ListCustomJobsResponse.serialize),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))

    def jobs(self) -> list[JobRecord]:
        with self._lock:
            return [_record(job) for job in self._jobs.values()]

    def stop(self) -> None:
        """Cancels every job still going and waits for its replicas to end."""
        with self._lock:
            jobs = list(self._jobs.values())
            for job in jobs:
                if not job.cancel.is_set():
                    job.cancel_reason = "Stopped with the rehearsal's JobService"
                    job.cancel.set()
        for job in jobs:
            if job.thread is not None:
                job.thread.join()

    # The RPCs.

    def _create(self, request: CreateCustomJobRequest, context: grpc.ServicerContext) -> CustomJob:
        spec = request.custom_job.job_spec
        if not _PARENT.match(request.parent):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"parent is not projects/*/locations/*: {request.parent}")
        if not spec.worker_pool_specs or spec.worker_pool_specs[0].replica_count != 1:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "worker pool 0 (the primary replica) needs replica_count 1")
        with self._lock:
            job_id = str(next(self._ids))
            proto = _copy(request.custom_job)
            proto.name = f"{request.parent}/customJobs/{job_id}"
            job = _Job(job_id, proto, tuple(_not_rehearsed(spec)))
            self._jobs[proto.name] = job
            _set_state(job, JobState.JOB_STATE_PENDING)
            proto.create_time = proto.update_time
            job.thread = threading.Thread(target=self._run, args=(job,), name=f"custom-job-{job_id}", daemon=True)
            job.thread.start()
            return _copy(proto)

    def _get(self, request: GetCustomJobRequest, context: grpc.ServicerContext) -> CustomJob:
        """The job once it has ended, or as it is when the long poll's time is up."""
        with self._lock:
            job = self._find(request.name, context)
        job.ended.wait(_hold_seconds(context.time_remaining()))
        with self._lock:
            return _copy(job.proto)

    def _cancel(self, request: CancelCustomJobRequest, context: grpc.ServicerContext) -> empty_pb2.Empty:
        with self._lock:
            job = self._find(request.name, context)
            if job.proto.state in FINAL_STATES:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{request.name} is already {job.proto.state.name}")
            _set_state(job, JobState.JOB_STATE_CANCELLING)
            job.cancel.set()
        return empty_pb2.Empty()

    def _list(self, request: ListCustomJobsRequest, context: grpc.ServicerContext) -> ListCustomJobsResponse:
        with self._lock:
            prefix = f"{request.parent}/customJobs/"
            return ListCustomJobsResponse(
                custom_jobs=[_copy(job.proto) for name, job in self._jobs.items() if name.startswith(prefix)]
            )

    def _find(self, name: str, context: grpc.ServicerContext) -> _Job:
        if name not in self._jobs:
            context.abort(grpc.StatusCode.NOT_FOUND, f"CustomJob {name} not found")
        return self._jobs[name]

    # The job's life, on its watcher thread.

    def _run(self, job: _Job) -> None:
        outcome: tuple[JobState, status_pb2.Status | None] | None = None
        try:
            if not job.cancel.is_set():
                self._start(job)
            with self._lock:
                if not job.cancel.is_set():
                    _set_state(job, JobState.JOB_STATE_RUNNING)
            while outcome is None and not job.cancel.wait(POLL_SECONDS):
                outcome = _outcome(job)
        except Exception as err:  # a replica that cannot start fails the job, as on Vertex
            outcome = (JobState.JOB_STATE_FAILED, status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=str(err)))
        _terminate([p for p in job.processes if p.popen is not None])
        for process in job.processes:
            self._launcher.remove(process.replica)
        with self._lock:
            if outcome is None:
                cancelled = status_pb2.Status(code=code_pb2.CANCELLED, message=job.cancel_reason)
                outcome = (JobState.JOB_STATE_CANCELLED, cancelled)
            _set_state(job, *outcome)

    def _start(self, job: _Job) -> None:
        spec = job.proto.job_spec
        replicas = [
            Replica(pool, index, f"workerpool{pool}-replica-{index}", job.id)
            for pool, pool_spec in enumerate(spec.worker_pool_specs)
            for index in range(pool_spec.replica_count)
        ]
        ports = free_ports(len(replicas))
        cluster: dict[int, list[str]] = {}
        for replica, port in zip(replicas, ports, strict=True):
            cluster.setdefault(replica.pool, []).append(f"127.0.0.1:{port}")
        log_dir = os.path.join(self._workdir, job.id)
        os.makedirs(log_dir, exist_ok=True)
        for replica in replicas:
            pool_spec = spec.worker_pool_specs[replica.pool]
            command = [*pool_spec.container_spec.command, *pool_spec.container_spec.args]
            if not pool_spec.container_spec.command:
                raise ValueError(
                    f"workerpool{replica.pool} has no container_spec.command: a rehearsal runs commands, "
                    "not an image's entrypoint or a python_package_spec"
                )
            env = _replica_env(self._launcher.environment(replica), spec, replica, cluster, job.id)
            launch = self._launcher.launch(replica, pool_spec.container_spec.image_uri, command, env)
            process = _Process(replica, os.path.join(log_dir, f"{replica.name}.log"))
            with self._lock:
                job.processes.append(process)
            with open(process.log_path, "wb") as log:
                try:
                    process.popen = subprocess.Popen(
                        launch.argv,
                        env=launch.env,
                        cwd=launch.cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                except OSError as err:
                    raise RuntimeError(f"The replica {replica.name} could not start {command[0]!r}: {err}") from err


def _replica_env(
    base: dict[str, str], spec: CustomJobSpec, replica: Replica, cluster: dict[int, list[str]], job_id: str
) -> dict[str, str]:
    """The replica's environment: its base, the pool's container env, then what Vertex sets."""
    pool_spec = spec.worker_pool_specs[replica.pool]
    spec_json = CustomJobSpec.to_dict(spec, use_integers_for_enums=False, including_default_value_fields=False)
    env = dict(base)
    env.update({var.name: var.value for var in pool_spec.container_spec.env})
    env["CLUSTER_SPEC"] = json.dumps(
        {
            "cluster": {f"workerpool{pool}": hosts for pool, hosts in cluster.items()},
            "environment": "cloud",
            "task": {"type": f"workerpool{replica.pool}", "index": replica.index},
            "job": spec_json,
        }
    )
    # Pools 0-3 are TensorFlow's chief, worker, ps and evaluator. Vertex's docs describe TF_CONFIG
    # for distributed jobs; a single-replica job gets one too, naming only the chief (TFX's Vertex
    # Tuner notes a chief-only cluster when only the primary replica is present); with one chief
    # and no workers the strategy choice stays MirroredStrategy. Evaluators are left out of the
    # cluster, as AI Platform's TF_CONFIG docs say ("never contains evaluator"); they are no part
    # of the training cluster.
    tf_cluster = {TF_TASK_TYPES[pool]: hosts for pool, hosts in cluster.items() if pool < 3}
    task = {"type": TF_TASK_TYPES[replica.pool], "index": replica.index, "trial": ""}
    env["TF_CONFIG"] = json.dumps({"cluster": tf_cluster, "task": task, "environment": "cloud", "job": spec_json})
    prefix = spec.base_output_directory.output_uri_prefix.rstrip("/")
    if prefix:  # CustomJobSpec.base_output_directory: the same three directories on every replica
        env.update(
            AIP_MODEL_DIR=f"{prefix}/model/",
            AIP_CHECKPOINT_DIR=f"{prefix}/checkpoints/",
            AIP_TENSORBOARD_LOG_DIR=f"{prefix}/logs/",
        )
    # The job's numeric id, which the Vertex SDK's training_utils read (its profiler uses it).
    env["CLOUD_ML_JOB_ID"] = job_id
    if _is_tpu(pool_spec):
        env.pop("TPU_NAME", None)  # no TPU here to resolve: the replica must not look for one
    for name in ("no_proxy", "NO_PROXY"):  # replicas talk to each other directly, never via a proxy
        hosts = [h for h in env.get(name, "").split(",") if h.strip()]
        env[name] = ",".join(hosts + [h for h in LOCAL_HOSTS if h not in hosts])
    return env


def _is_tpu(pool_spec: WorkerPoolSpec) -> bool:
    machine = pool_spec.machine_spec
    return machine.machine_type == TPU_MACHINE_TYPE or machine.accelerator_type.name.startswith("TPU")


def _not_rehearsed(spec: CustomJobSpec) -> list[str]:
    """Per pool, the accelerators asked for, which this machine does not have."""
    notes = []
    for pool, pool_spec in enumerate(spec.worker_pool_specs):
        machine = pool_spec.machine_spec
        if pool_spec.replica_count < 1 or (machine.accelerator_count < 1 and not _is_tpu(pool_spec)):
            continue
        each = f" (each of {pool_spec.replica_count} replicas)" if pool_spec.replica_count > 1 else ""
        asked = f"{machine.accelerator_count} x {machine.accelerator_type.name} on {machine.machine_type}"
        note = f"workerpool{pool}: {asked}{each} ran on the CPU"
        if _is_tpu(pool_spec):
            note += "; TPU_NAME removed from its environment (no TPU to resolve), so it chose a non-TPU strategy"
        notes.append(note)
    return notes


def _outcome(job: _Job) -> tuple[JobState, status_pb2.Status | None] | None:
    """The job's end once a replica failed or the primary succeeded; None while it goes on."""
    codes = [(p, p.popen.poll()) for p in job.processes if p.popen is not None]
    for process, code in codes:
        if code not in (None, 0):
            # Vertex reports a replica's failure with code 3 (INVALID_ARGUMENT), as for a bad job.
            error = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=_failure(process))
            return JobState.JOB_STATE_FAILED, error
    primary = codes[0][1] if codes else None
    return (JobState.JOB_STATE_SUCCEEDED, None) if primary == 0 else None


def _failure(process: _Process) -> str:
    code = process.popen.returncode
    how = f"was killed by signal {-code}" if code < 0 else f"exited with a non-zero status of {code}"
    tail = log_tail(process.log_path, LOG_TAIL_LINES)
    return f"The replica {process.replica.name} {how}. Its last log lines ({process.log_path}):\n{tail}"


def _terminate(processes: list[_Process]) -> None:
    """SIGTERM to every replica's process group, then SIGKILL to whatever outlives the grace."""
    for process in processes:
        if process.popen.poll() is None:
            process.stopped = True
        _signal_group(process.popen, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(max(0.0, deadline - time.monotonic()))
        _signal_group(process.popen, signal.SIGKILL)  # also any child the replica left behind
        process.popen.wait()


def _signal_group(popen: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, sig)  # start_new_session made the replica its group's leader


def _hold_seconds(time_remaining: float | None) -> float:
    """How long a GetCustomJob may wait for its job to end, given its deadline's distance."""
    if time_remaining is None:
        return LONG_POLL_SECONDS
    return max(0.0, min(LONG_POLL_SECONDS, time_remaining - DEADLINE_MARGIN_SECONDS))


def _set_state(job: _Job, state: JobState, error: status_pb2.Status | None = None) -> None:
    now = datetime.datetime.now(datetime.UTC)
    job.proto.state = state
    job.proto.update_time = now
    if state == JobState.JOB_STATE_RUNNING:
        job.proto.start_time = now
    if error is not None:
        job.proto.error = error
    if state in FINAL_STATES:
        job.proto.end_time = now
        job.ended.set()


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports: all sockets stay bound until every port is chosen."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _copy(job: CustomJob) -> CustomJob:
    return CustomJob.deserialize(CustomJob.serialize(job))


def _record(job: _Job) -> JobRecord:
    replicas = tuple(
        ReplicaRecord(p.replica.name, p.popen.returncode if p.popen else None, p.log_path, p.stopped)
        for p in job.processes
    )
    proto = job.proto
    return JobRecord(proto.name, proto.display_name, proto.state.name, proto.error.message, replicas, job.not_rehearsed)
