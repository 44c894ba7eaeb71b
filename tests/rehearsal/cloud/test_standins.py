"""The stand-ins of one rehearsal, together: on 127.0.0.1 only, at ports chosen when they
start, gone when they stop; and the environment that brings a task's Google clients to
them (here google-auth's default credentials and the Cloud Storage client)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from rehearsal.cloud.standins import StandIns


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def stand_ins(tmp_path):
    with StandIns(str(tmp_path / "cloud"), str(tmp_path / "gcs"), "my-project") as running:
        yield running


def test_everything_listens_on_loopback_at_ports_chosen_at_start_and_stops_with_it(tmp_path):
    ports = []
    for _ in range(2):
        with StandIns(str(tmp_path / "cloud"), str(tmp_path / "gcs"), "p") as stand_ins:
            proxy = urlsplit(stand_ins.environment()["https_proxy"])
            assert proxy.hostname == "127.0.0.1"
            started = (proxy.port, stand_ins.storage.port)
            for port in started:
                (listener,) = [c for c in _listeners() if c[1] == port]
                assert listener[0] == "127.0.0.1", listener
            ports.append(started)
        assert not any(_listening(port) for port in started)
    assert ports[0] != ports[1]


def _listeners() -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket on this machine (from /proc/net/tcp)."""
    found = []
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A":  # LISTEN
                address, port = local.split(":")
                found.append((socket.inet_ntoa(bytes.fromhex(address)[::-1]), int(port, 16)))
    return found


def test_a_tasks_default_credentials_and_storage_client_reach_the_stand_ins(stand_ins, tmp_path):
    code = (
        "import google.auth, json\n"
        "from google.auth.transport.requests import Request\n"
        "from google.cloud import storage\n"
        "credentials, project = google.auth.default()\n"
        "credentials.refresh(Request())\n"
        "storage.Client().bucket('bkt-a').blob('x/y.txt').upload_from_string('hello')\n"
        "print(json.dumps([project, credentials.token, type(credentials).__name__]))\n"
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **stand_ins.environment()}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == ["my-project", "rehearsal-access-token", "Credentials"]
    assert (tmp_path / "gcs" / "bkt-a" / "x" / "y.txt").read_text() == "hello"
    hosts = {c.host for c in stand_ins.connections()}
    assert {"oauth2.googleapis.com", "storage.googleapis.com"} <= hosts
    assert not [c for c in stand_ins.connections() if c.refused]
