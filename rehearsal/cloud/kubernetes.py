"""A stand-in for the Kubernetes API of a Kubeflow cluster with the training operator: TFJobs
(``kubeflow.org/v1``), their pods and logs, each replica run in a container of its own as the
operator would run it; reached by the real ``kubernetes`` client through a kubeconfig.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from rehearsal.cloud.jobs import Replica, ReplicaLauncher, free_ports
from rehearsal.logs import log_tail

TOKEN = "rehearsal-kubernetes-token"
NAMESPACE = "kubeflow-user-example-com"
CONTAINER = "tensorflow"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
POLL_SECONDS = 0.2
_JOBS = re.compile(r"^/apis/kubeflow\.org/v1/namespaces/(?P<ns>[^/]+)/tfjobs(?:/(?P<name>[^/]+))?$")
_PODS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods(?:/(?P<pod>[^/]+)/log)?$")


class Refused(ValueError):
    """A TFJob the stand-in (or the API) does not accept; the message says why."""


@dataclasses.dataclass
class _Pod:
    name: str
    replica_type: str  # as the TFJob spells it: Chief, Worker, PS
    index: int
    image: str
    command: list[str]
    tf_config: str | None
    log_path: str
    popen: subprocess.Popen | None = None
    exit_code: int | None = None
    stopped: bool = False

    @property
    def phase(self) -> str:
        if self.exit_code is None:
            return "Running" if self.popen is not None else "Pending"
        return "Succeeded" if self.exit_code == 0 else "Failed"


@dataclasses.dataclass
class _TfJob:
    namespace: str
    body: dict
    pods: list[_Pod]
    conditions: list[dict] = dataclasses.field(default_factory=list)
    deleted: threading.Event = dataclasses.field(default_factory=threading.Event)

    @property
    def name(self) -> str:
        return self.body["metadata"]["name"]

    def condition(self, kind: str, message: str) -> None:
        for condition in self.conditions:
            condition["status"] = "False"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.conditions.append(
            {"type": kind, "status": "True", "message": message, "lastTransitionTime": stamp, "lastUpdateTime": stamp}
        )


def tf_config(body: dict, namespace: str, replica_type: str, index: int, ports: dict[str, int]) -> str | None:
    """The operator's TF_CONFIG for one replica (None for a job of a single replica);
    ``ports``: each replica's port by pod name."""
    specs = body["spec"]["tfReplicaSpecs"]
    if sum(int(spec.get("replicas", 1)) for spec in specs.values()) <= 1:
        return None
    name = body["metadata"]["name"]
    cluster = {
        kind.lower(): [
            f"{name}-{kind.lower()}-{i}.{namespace}.svc:{ports[f'{name}-{kind.lower()}-{i}']}"
            for i in range(int(spec.get("replicas", 1)))
        ]
        for kind, spec in specs.items()
    }
    return json.dumps(
        {"cluster": cluster, "task": {"type": replica_type.lower(), "index": index}, "environment": "cloud"}
    )


def _container(spec: dict) -> dict:
    containers = spec.get("template", {}).get("spec", {}).get("containers") or []
    for container in containers:
        if container.get("name") == CONTAINER:
            return container
    raise Refused(f"no container named {CONTAINER!r} in the replica spec: the operator sets TF_CONFIG on that one only")


def check(body: dict) -> None:
    """What the API, the operator, or this one machine refuses."""
    if body.get("apiVersion") != "kubeflow.org/v1" or body.get("kind") != "TFJob":
        raise Refused("not a kubeflow.org/v1 TFJob")
    specs = body.get("spec", {}).get("tfReplicaSpecs") or {}
    if not specs:
        raise Refused("spec.tfReplicaSpecs is empty")
    for kind, spec in specs.items():
        if kind not in ("Chief", "Master", "Worker", "PS", "Evaluator"):
            raise Refused(f"unknown replica type {kind!r}")
        container = _container(spec)
        if not container.get("image") or not container.get("command"):
            raise Refused(f"the {kind} container has no image or no command")


class KubernetesApi:
    """The stand-in's state and server; ``launcher`` starts replicas (the rehearsal's containers)."""

    def __init__(self, workdir: str, launcher: ReplicaLauncher) -> None:
        self.workdir = workdir
        self._launcher = launcher
        self._jobs: dict[tuple[str, str], _TfJob] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    def start(self) -> int:
        os.makedirs(self.workdir, exist_ok=True)
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_):
                pass

            def do_GET(self):
                api._answer(self, "GET")

            def do_POST(self):
                api._answer(self, "POST")

            def do_DELETE(self):
                api._answer(self, "DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.port

    def kubeconfig(self, namespace: str = NAMESPACE) -> str:
        """Writes the kubeconfig a task uses to reach this API (as ``KUBECONFIG``); its path."""
        path = os.path.join(self.workdir, "kubeconfig.json")
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "rehearsal", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "pipeline-runner", "user": {"token": TOKEN}}],
            "contexts": [
                {
                    "name": "rehearsal",
                    "context": {"cluster": "rehearsal", "user": "pipeline-runner", "namespace": namespace},
                }
            ],
            "current-context": "rehearsal",
        }
        with open(path, "w") as f:
            json.dump(config, f)
        return path

    def stop(self) -> None:
        for job in list(self._jobs.values()):
            job.deleted.set()
            self._stop_pods(job)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def records(self) -> list[dict]:
        """Every TFJob created, as ``record`` wrote it."""
        found = []
        for name in sorted(os.listdir(self.workdir)):
            if name.endswith(".tfjob.json"):
                with open(os.path.join(self.workdir, name)) as f:
                    found.append(json.load(f))
        return found

    # --- the API ---------------------------------------------------------------------------------

    def _answer(self, request: BaseHTTPRequestHandler, method: str) -> None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _send(request, 401, _status(401, "Unauthorized", "no or a wrong bearer token"))
        url = urlparse(request.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        try:
            if match := _JOBS.match(url.path):
                return self._jobs_route(request, method, match["ns"], match["name"])
            if (match := _PODS.match(url.path)) and method == "GET":
                if match["pod"]:
                    return _send_text(request, self._log(match["ns"], match["pod"], query))
                return _send(request, 200, self._pod_list(match["ns"], query.get("labelSelector", "")))
        except KeyError as err:
            return _send(request, 404, _status(404, "NotFound", f"{err.args[0]} not found"))
        except Refused as err:
            return _send(request, 422, _status(422, "Invalid", str(err)))
        _send(request, 404, _status(404, "NotFound", f"{method} {url.path} is not served by this stand-in"))

    def _jobs_route(self, request, method: str, namespace: str, name: str | None) -> None:
        if method == "POST" and name is None:
            length = int(request.headers.get("Content-Length") or 0)
            body = json.loads(request.rfile.read(length) or b"{}")
            return _send(request, 201, self._create(namespace, body))
        if name is None:
            raise KeyError(f"{method} of every TFJob")
        job = self._find(namespace, name)
        if method == "GET":
            return _send(request, 200, self._object(job))
        if method == "DELETE":
            job.deleted.set()
            self._stop_pods(job)
            with self._lock:
                self._jobs.pop((namespace, name), None)
            return _send(request, 200, _status(200, "Success", f"tfjob {name} deleted", status="Success"))
        raise KeyError(f"{method} {name}")

    def _find(self, namespace: str, name: str) -> _TfJob:
        with self._lock:
            if (namespace, name) not in self._jobs:
                raise KeyError(f"tfjobs.kubeflow.org {name!r} in {namespace}")
            return self._jobs[(namespace, name)]

    def _create(self, namespace: str, body: dict) -> dict:
        check(body)
        body["metadata"]["namespace"] = namespace
        name = body["metadata"]["name"]
        replicas = [
            (kind, index, f"{name}-{kind.lower()}-{index}")
            for kind, spec in body["spec"]["tfReplicaSpecs"].items()
            for index in range(int(spec.get("replicas", 1)))
        ]
        # One machine: each replica gets a free port of its own where a cluster gives it an address.
        ports = dict(zip((pod for _, _, pod in replicas), free_ports(len(replicas)), strict=True))
        pods = []
        for kind, index, pod in replicas:
            container = _container(body["spec"]["tfReplicaSpecs"][kind])
            pods.append(
                _Pod(
                    pod,
                    kind,
                    index,
                    container["image"],
                    list(container["command"]) + list(container.get("args") or []),
                    tf_config(body, namespace, kind, index, ports),
                    os.path.join(self.workdir, f"{pod}.log"),
                )
            )
        job = _TfJob(namespace, body, pods)
        with self._lock:
            if (namespace, name) in self._jobs:
                raise Refused(f"tfjobs.kubeflow.org {name!r} already exists")
            self._jobs[(namespace, name)] = job
        job.condition("Created", f"TFJob {name} is created.")
        threading.Thread(target=self._run, args=(job,), daemon=True).start()
        return self._object(job)

    def _object(self, job: _TfJob) -> dict:
        statuses: dict[str, dict[str, int]] = {}
        for pod in job.pods:
            counts = statuses.setdefault(pod.replica_type, {"active": 0, "succeeded": 0, "failed": 0})
            key = {"Running": "active", "Pending": "active", "Succeeded": "succeeded", "Failed": "failed"}[pod.phase]
            counts[key] += 1
        return {**job.body, "status": {"conditions": [dict(c) for c in job.conditions], "replicaStatuses": statuses}}

    def _pod_list(self, namespace: str, selector: str) -> dict:
        wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
        items = []
        with self._lock:
            jobs = [j for (ns, _), j in self._jobs.items() if ns == namespace]
        for job in jobs:
            for pod in job.pods:
                labels = {
                    JOB_NAME_LABEL: job.name,
                    "training.kubeflow.org/replica-type": pod.replica_type.lower(),
                    "training.kubeflow.org/replica-index": str(pod.index),
                }
                if all(labels.get(k) == v for k, v in wanted.items()):
                    items.append(_pod_object(pod, namespace, labels))
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def _log(self, namespace: str, pod_name: str, query: dict) -> str:
        with self._lock:
            pods = [p for (ns, _), j in self._jobs.items() if ns == namespace for p in j.pods if p.name == pod_name]
        if not pods:
            raise KeyError(f"pods {pod_name!r} in {namespace}")
        lines = int(query.get("tailLines", 0)) or None
        return log_tail(pods[0].log_path, lines) if lines else open(pods[0].log_path).read()

    # --- what the operator does -----------------------------------------------------------------

    def _run(self, job: _TfJob) -> None:
        hosts = {p.name + f".{job.namespace}.svc": "127.0.0.1" for p in job.pods}
        for pool, pod in enumerate(job.pods):
            replica = Replica(pool, pod.index, pod.name, job_id=job.name)
            env = {"TF_CONFIG": pod.tf_config} if pod.tf_config else {}
            # A cluster's pods reach each other directly: the replicas' names bypass the
            # stand-ins' proxy (gRPC honours the proxy variables a replica inherits).
            inherited = self._launcher.environment(replica)
            for key in ("no_proxy", "NO_PROXY"):
                if inherited.get(key):
                    env[key] = ",".join([inherited[key], *hosts])
            launch = self._launcher.launch(replica, pod.image, pod.command, env, hosts=hosts)
            with open(pod.log_path, "w") as log:
                pod.popen = subprocess.Popen(
                    launch.argv, env=launch.env, cwd=launch.cwd, stdout=log, stderr=subprocess.STDOUT
                )
        job.condition("Running", f"TFJob {job.name} is running.")
        primary = next((p for p in job.pods if p.replica_type in ("Chief", "Master")), job.pods[0])
        outcome = None
        while outcome is None and not job.deleted.is_set():
            for pod in job.pods:
                if pod.exit_code is None and pod.popen is not None:
                    pod.exit_code = pod.popen.poll()
            failed = [p for p in job.pods if p.exit_code not in (None, 0)]
            if failed:
                kinds = "/".join(sorted({p.replica_type for p in failed}))
                outcome = ("Failed", f"TFJob {job.name} has failed because {len(failed)} {kinds} replica(s) failed.")
            elif primary.exit_code == 0:
                outcome = ("Succeeded", f"TFJob {job.name} successfully completed.")
            else:
                time.sleep(POLL_SECONDS)
        # The running replicas are stopped and the job recorded before its end is visible.
        self._stop_pods(job)
        self._record(job, outcome[0] if outcome else "Deleted")
        if outcome:
            job.condition(*outcome)

    def _stop_pods(self, job: _TfJob) -> None:
        for pod in job.pods:
            if pod.popen is not None and pod.popen.poll() is None:
                pod.stopped = True
                pod.popen.terminate()
                try:
                    pod.popen.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pod.popen.kill()
                    pod.popen.wait()
            self._launcher.remove(Replica(0, pod.index, pod.name, job_id=job.name))

    def _record(self, job: _TfJob, state: str) -> None:
        record = {
            "name": job.name,
            "namespace": job.namespace,
            "state": state,
            "replicas": [
                {
                    "pod": p.name,
                    "type": p.replica_type,
                    "index": p.index,
                    "tf_config": p.tf_config,
                    "exit_code": p.exit_code,
                    "stopped": p.stopped,
                    "log": p.log_path,
                }
                for p in job.pods
            ],
        }
        with open(os.path.join(self.workdir, f"{job.name}.tfjob.json"), "w") as f:
            json.dump(record, f, indent=1)


def _pod_object(pod: _Pod, namespace: str, labels: dict[str, str]) -> dict:
    state = {"running": {}} if pod.exit_code is None else {"terminated": {"exitCode": pod.exit_code}}
    return {
        "metadata": {"name": pod.name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": CONTAINER, "image": pod.image}]},
        "status": {
            "phase": pod.phase,
            "containerStatuses": [
                {"name": CONTAINER, "image": pod.image, "imageID": "", "ready": pod.exit_code is None,
                 "restartCount": 0, "state": state}
            ],
        },
    }  # fmt: skip


def _status(code: int, reason: str, message: str, status: str = "Failure") -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": status, "message": message, "reason": reason, "code": code}


def _send(request: BaseHTTPRequestHandler, code: int, body: dict) -> None:
    data = json.dumps(body).encode()
    request.send_response(code)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)


def _send_text(request: BaseHTTPRequestHandler, text: str) -> None:
    data = text.encode()
    request.send_response(200)
    request.send_header("Content-Type", "text/plain")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)
