"""Made-up Google Cloud settings for the compile and submit tests, and the guard that keeps
those tests on this machine: nothing here is ever reached."""

from __future__ import annotations

import socket

PROJECT, REGION = "my-proj", "us-central1"
BUCKET = "bucket"
DATA_ROOT, OUTPUT_ROOT = f"gs://{BUCKET}/data", f"gs://{BUCKET}/tfx"
CONTRACT = f"{DATA_ROOT}/schema.pbtxt"
IMAGE = "gcr.io/my-proj/taxi:1"
SERVICE_ACCOUNT = f"pipelines@{PROJECT}.iam.gserviceaccount.com"
# The flags kubeflow_runner.py requires, with the settings above.
CLOUD_ARGS = ["--output-root", OUTPUT_ROOT, "--data-root", DATA_ROOT, "--image", IMAGE]
# The project and region that --submit, --dataflow, --endpoint-name and --vertex-training need.
PROJECT_ARGS = ["--project", PROJECT, "--region", REGION]
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def refuse_non_loopback(monkeypatch) -> None:
    """Makes any Python socket connecting anywhere but this machine fail the test."""
    real_connect = socket.socket.connect

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if host not in LOOPBACK_HOSTS and not str(host).startswith("/"):
            raise AssertionError(f"test tried to reach {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
