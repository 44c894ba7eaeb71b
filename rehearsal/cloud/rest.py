"""Vertex AI's REST prediction routes (``:predict``, ``:rawPredict``) for the Vertex AI stand-in
(``endpoints.py``), which the SDK's ``raw_predict`` and ``curl`` use; they keep no state and call
back into the stand-in.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import grpc

from rehearsal.cloud.api_error import ApiError

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1 as v1


log = logging.getLogger(__name__)

# The headers Vertex's rawPredict answers with (the SDK's predict(use_raw_predict=True) reads them).
DEPLOYED_MODEL_HEADER = "X-Vertex-AI-Deployed-Model-Id"
MODEL_HEADER = "X-Vertex-AI-Model"
MODEL_VERSION_HEADER = "X-Vertex-AI-Model-Version-Id"
ENDPOINT_PATH = re.compile(
    r"^/v1(?:beta1)?/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/endpoints/(?P<id>[^/:]+)"
    r":(?P<verb>predict|rawPredict)$"
)


@dataclasses.dataclass(frozen=True)
class RestCalls:
    """The stand-in's calls the routes answer from (``VertexModels``' methods of these names).
    Each raises ``ApiError`` for a request Vertex refuses; the routes raise it too, and
    answer it as Google's JSON error body."""

    predict_json: Callable[[str, list], tuple[v1.DeployedModel, list]]
    raw_predict_bytes: Callable[[str, bytes, str], tuple[v1.DeployedModel, int, str, bytes]]
    model_display_name: Callable[[v1.DeployedModel], str]


class RestServer(ThreadingHTTPServer):
    """The routes on ``address``, answering from ``calls``."""

    daemon_threads = True

    def __init__(self, address, calls: RestCalls) -> None:
        super().__init__(address, _RestHandler)
        self.calls = calls


class _RestHandler(BaseHTTPRequestHandler):
    """``POST /v1/projects/P/locations/L/endpoints/ID:predict`` and ``:rawPredict``."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the body must not wait for the ACK of the headers (storage.py)
    server: RestServer

    def do_POST(self) -> None:
        body = self._body()
        match = ENDPOINT_PATH.match(self.path.split("?")[0])
        try:
            if not match:
                raise ApiError(grpc.StatusCode.NOT_FOUND, f"The stand-in does not serve POST {self.path}")
            endpoint = f"projects/{match['project']}/locations/{match['location']}/endpoints/{match['id']}"
            if match["verb"] == "rawPredict":
                self._raw_predict(endpoint, body)
            else:
                self._predict(endpoint, body)
        except ApiError as e:
            self._send(e.http_status, json.dumps(e.json()).encode())
        except Exception as e:  # an answer, not a dropped connection
            log.exception("Vertex AI REST stand-in: POST %s failed", self.path)
            failure = ApiError(grpc.StatusCode.INTERNAL, f"the stand-in failed: {e!r}")
            self._send(failure.http_status, json.dumps(failure.json()).encode())

    def do_GET(self) -> None:
        error = ApiError(grpc.StatusCode.NOT_FOUND, f"The stand-in does not serve GET {self.path}")
        self._send(error.http_status, json.dumps(error.json()).encode())

    def _predict(self, endpoint: str, body: bytes) -> None:
        calls = self.server.calls
        try:
            instances = json.loads(body)["instances"]
        except (ValueError, KeyError, TypeError):
            instances = None
        if not isinstance(instances, list):
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, 'the body must be JSON with an "instances" list')
        deployed, predictions = calls.predict_json(endpoint, instances)
        answer = {
            "predictions": predictions,
            "deployedModelId": deployed.id,
            "model": deployed.model,
            "modelDisplayName": calls.model_display_name(deployed),
            "modelVersionId": deployed.model_version_id,
        }
        self._send(200, json.dumps(answer).encode())

    def _raw_predict(self, endpoint: str, body: bytes) -> None:
        deployed, status, content_type, answer = self.server.calls.raw_predict_bytes(
            endpoint, body, self.headers.get("Content-Type", "")
        )
        headers = {
            DEPLOYED_MODEL_HEADER: deployed.id,
            MODEL_HEADER: deployed.model,
            MODEL_VERSION_HEADER: deployed.model_version_id,
        }
        self._send(status, answer, content_type, headers)

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers
                pass
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(
        self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        log.debug("Vertex AI REST stand-in: " + format, *args)
