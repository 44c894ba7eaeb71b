"""A local HTTP server that stands in for a cloud API: it records every request and
answers from a route table, so the real client libraries can be tested up to the wire."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any

    def header(self, name: str) -> str | None:
        """A header as sent, whatever its case (kfp's client sends ``authorization``)."""
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


Route = Callable[[Request], tuple[int, Any]]


class StandInServer:
    """Serves on 127.0.0.1 on a free port; ``routes`` maps (method, path prefix) to answers."""

    def __init__(self, routes: dict[tuple[str, str], Route]):
        self.routes = routes
        self.requests: list[Request] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self):
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                request = Request(self.command, url.path, parse_qs(url.query), dict(self.headers), body)
                server.requests.append(request)
                status, answer = 404, {"error": {"code": 404, "message": f"no stand-in route for {url.path}"}}
                for (method, prefix), route in server.routes.items():
                    if method == self.command and url.path.startswith(prefix):
                        status, answer = route(request)
                        break
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, *args):  # keep test output quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> StandInServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def find(self, method: str, path_part: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and path_part in r.path]


def vertex_routes(project: str, region: str, bucket: str) -> dict[tuple[str, str], Route]:
    """Vertex AI's pipelineJobs.create and the Cloud Storage calls its client makes first,
    and schedules.create."""

    def create_job(request):
        job = dict(request.body)
        job["name"] = f"projects/{project}/locations/{region}/pipelineJobs/{request.query['pipelineJobId'][0]}"
        job["state"] = "PIPELINE_STATE_PENDING"
        return 200, job

    def create_schedule(request):
        # As Vertex answers: the Schedule under a server-chosen numeric id, active, starting
        # at its creation unless a startTime was given.
        created = "2030-01-01T00:00:00Z"
        schedule = {"startTime": created, **request.body, "createTime": created, "state": "ACTIVE"}
        schedule["name"] = f"projects/{project}/locations/{region}/schedules/{1000 + len(schedules)}"
        schedules.append(schedule)
        return 200, schedule

    schedules: list[dict] = []

    not_found = {"error": {"code": 404, "message": "Not Found"}}
    return {
        ("POST", f"/v1/projects/{project}/locations/{region}/pipelineJobs"): create_job,
        ("POST", f"/v1/projects/{project}/locations/{region}/schedules"): create_schedule,
        # The client makes sure the pipeline root's bucket exists (Cloud Storage API).
        ("GET", f"/storage/v1/b/{bucket}/iam"): lambda r: (200, {"bindings": []}),
        ("PUT", f"/storage/v1/b/{bucket}/iam"): lambda r: (200, r.body),
        ("GET", "/storage/v1/b/"): lambda r: (404, not_found),
        ("POST", "/storage/v1/b"): lambda r: (200, {**r.body, "projectNumber": "123"}),
    }


def kfp_routes(multi_user: bool = False) -> dict[tuple[str, str], Route]:
    """A Kubeflow Pipelines v2 API: health, experiments (list by name, create), runs.create.

    Single-user: one experiment, "Default" (exp-1), whatever namespace is asked. Multi-user
    (Kubeflow profiles): experiments live in namespaces and none exists until created;
    listing or creating one without a namespace is refused (400) as that backend refuses it,
    and so is any request without a bearer token (401, as the cluster's auth proxy would).
    Which token is right is for the test to assert on the recorded requests."""
    experiments = [] if multi_user else [{"experiment_id": "exp-1", "display_name": "Default"}]

    def refusal(request: Request, needs_namespace: str | None) -> tuple[int, Any] | None:
        if not multi_user:
            return None
        if not (request.header("Authorization") or "").startswith("Bearer "):
            return 401, {"error": {"code": 401, "message": "no bearer token"}}
        if needs_namespace is not None and not needs_namespace:
            return 400, {"error": {"code": 400, "message": "multi-user mode: a namespace is required"}}
        return None

    def list_experiments(request):
        namespace = request.query.get("namespace", [""])[0]
        refused = refusal(request, namespace)
        if refused:
            return refused
        predicates = json.loads(request.query["filter"][0])["predicates"] if "filter" in request.query else []
        names = {p["stringValue"] for p in predicates if p["key"] == "display_name"}
        found = [
            e
            for e in experiments
            if (not names or e["display_name"] in names) and (not multi_user or e["namespace"] == namespace)
        ]
        return 200, {"experiments": found, "total_size": len(found)}

    def create_experiment(request):
        refused = refusal(request, request.body.get("namespace", ""))
        if refused:
            return refused
        experiment = {**request.body, "experiment_id": f"exp-{len(experiments) + 1}"}
        experiments.append(experiment)
        return 200, experiment

    def create_run(request):
        refused = refusal(request, None)
        if refused:
            return refused
        body = request.body
        return 200, {"run_id": "run-123", "display_name": body["display_name"], "experiment_id": body["experiment_id"]}

    return {
        ("GET", "/apis/v2beta1/healthz"): lambda r: (200, {"multi_user": multi_user}),
        ("GET", "/apis/v2beta1/experiments"): list_experiments,
        ("POST", "/apis/v2beta1/experiments"): create_experiment,
        ("POST", "/apis/v2beta1/runs"): create_run,
    }
