"""The deployed models' server processes for the Vertex AI stand-in (``endpoints.py``): one
``model_server.py`` per deployed model, run by the TensorFlow 2.15 environment's Python, started,
awaited, and reached over plain HTTP on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import subprocess
import time

from rehearsal.logs import log_tail

MODEL_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_server.py")
PREDICT_ROUTE = "/v1/models/default:predict"  # the prebuilt TensorFlow container's AIP_PREDICT_ROUTE
HEALTH_ROUTE = "/v1/models/default"
LOG_TAIL_LINES = 30


class ModelServerError(RuntimeError):
    """The model server did not become ready; the message holds its last log lines."""


@dataclasses.dataclass
class ModelServer:
    """One running ``model_server.py``: Vertex's serving container for one deployed model."""

    process: subprocess.Popen
    port: int
    model_dir: str
    log_path: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PREDICT_ROUTE}"

    @classmethod
    def start(cls, serving_python: str, model_dir: str, folder: str, timeout: float) -> ModelServer:
        """Starts the server on ``model_dir`` and waits until it answers its health route."""
        if not os.path.exists(serving_python):
            raise ModelServerError(f"no TensorFlow serving environment at {serving_python} (make serving-env)")
        os.makedirs(folder, exist_ok=True)
        log_path, ready_file = os.path.join(folder, "model_server.log"), os.path.join(folder, "ready.json")
        command = [serving_python, "-I", MODEL_SERVER, "--model-dir", model_dir, "--ready-file", ready_file]
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        server = cls(process, 0, model_dir, log_path)
        try:
            server.port = server._wait_ready(ready_file, timeout)
        except ModelServerError:
            server.stop()
            raise
        return server

    def _wait_ready(self, ready_file: str, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ModelServerError(
                    f"the model server for {self.model_dir} exited with code {self.process.returncode} before it was "
                    f"ready; the last lines of its log ({self.log_path}):\n{self.log_tail()}"
                )
            if os.path.exists(ready_file):
                with open(ready_file) as f:
                    port = json.load(f)["port"]
                if http_request(port, "GET", HEALTH_ROUTE)[0] == 200:
                    return port
            time.sleep(0.1)
        raise ModelServerError(
            f"the model server for {self.model_dir} was not ready after {timeout:.0f} s; "
            f"the last lines of its log ({self.log_path}):\n{self.log_tail()}"
        )

    def log_tail(self) -> str:
        return log_tail(self.log_path, LOG_TAIL_LINES).rstrip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def http_request(port: int, method: str, path: str, body: bytes = b"", content_type: str = "application/json"):
    """``(status, content type, body)`` of one HTTP request to 127.0.0.1 (no proxy settings)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        connection.request(method, path, body=body or None, headers={"Content-Type": content_type})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", "application/json"), response.read()
    except OSError as e:
        return 503, "application/json", json.dumps({"error": f"model server unreachable: {e}"}).encode()
    finally:
        connection.close()
