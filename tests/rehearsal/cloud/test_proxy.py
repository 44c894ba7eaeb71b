"""The proxy between a task's unmodified Google clients and the stand-ins: TLS they verify
against the rehearsal's own authority, HTTP/1.1 and HTTP/2 (gRPC) routed by host and
protocol, everything else refused and recorded. The clients run in subprocesses with
only environment variables pointing them here, as a task does."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from concurrent import futures

import grpc
import pytest

from rehearsal.cloud.certificates import make_certificates
from rehearsal.cloud.proxy import Proxy, Route


class _Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        body = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "host": self.headers["Host"],
                "body": self.rfile.read(length).decode(),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """A proxy routing *.googleapis.com to an echoing HTTP/1.1 server and an echoing gRPC
    server, and the environment a task gets to use it."""
    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    grpc_server = grpc.server(futures.ThreadPoolExecutor(2))
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: b"echo:" + request)
    grpc_server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.Echo", {"Echo": handler})])
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    certificates = make_certificates(str(tmp_path_factory.mktemp("tls")))
    proxy = Proxy([Route("*.googleapis.com", http1=http_server.server_address[1], h2=grpc_port)], certificates)
    address = f"http://127.0.0.1:{proxy.start()}"
    env = {
        "PATH": os.environ["PATH"],
        "https_proxy": address,
        "http_proxy": address,
        "REQUESTS_CA_BUNDLE": certificates.authority,
        "CURL_CA_BUNDLE": certificates.authority,
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": certificates.authority,
    }
    yield proxy, env
    proxy.stop()
    grpc_server.stop(None)
    http_server.shutdown()


def _python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_curl_and_requests_reach_the_http_stand_in_over_verified_tls(proxied):
    proxy, env = proxied
    url = "https://us-central1-aiplatform.googleapis.com/v1/projects/p/endpoints/1:rawPredict"
    curl = subprocess.run(["curl", "-sS", "--fail", url, "-d", '{"a": 1}'], env=env, capture_output=True, text=True)
    assert json.loads(curl.stdout) == {
        "method": "POST",
        "path": "/v1/projects/p/endpoints/1:rawPredict",
        "host": "us-central1-aiplatform.googleapis.com",
        "body": '{"a": 1}',
    }
    code = "import requests; print(requests.get('https://storage.googleapis.com/b/o?alt=media').json()['host'])"
    assert _python(code, env).stdout.strip() == "storage.googleapis.com"
    hosts = {(c.host, c.protocol) for c in proxy.connections() if not c.refused}
    assert {("us-central1-aiplatform.googleapis.com", "http/1.1"), ("storage.googleapis.com", "http/1.1")} <= hosts


def test_grpc_reaches_the_grpc_stand_in_over_http2(proxied):
    proxy, env = proxied
    code = (
        "import grpc; channel = grpc.secure_channel('europe-west4-aiplatform.googleapis.com:443', "
        "grpc.ssl_channel_credentials()); print(channel.unary_unary('/t.Echo/Echo')(b'hi', timeout=20).decode())"
    )
    assert _python(code, env).stdout.strip() == "echo:hi"
    assert ("europe-west4-aiplatform.googleapis.com", "h2") in {(c.host, c.protocol) for c in proxy.connections()}


def test_an_authority_other_than_the_rehearsals_is_not_trusted(proxied):
    _, env = proxied
    code = "import requests; requests.get('https://www.googleapis.com/storage/v1/b/x')"
    result = _python(code, {**env, "REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt"})
    assert result.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in result.stderr


def test_other_hosts_and_plain_http_are_refused_and_recorded(proxied):
    proxy, env = proxied
    code = (
        "import requests\n"
        "for url in ('https://example.com/', 'http://169.254.169.254/computeMetadata/v1/'):\n"
        "    try:\n"
        "        print(requests.get(url, timeout=10).status_code)\n"
        "    except requests.exceptions.ProxyError as err:\n"
        "        print('proxy error')\n"
    )
    assert _python(code, env).stdout.split() == ["proxy", "error", "403"]
    refused = {(c.host, c.port) for c in proxy.connections() if c.refused}
    assert {("example.com", 443), ("169.254.169.254", 80)} <= refused


def test_every_connection_is_recorded_with_where_it_went(proxied):
    proxy, env = proxied
    for url in ("https://www.googleapis.com/", "https://example.com/"):  # one forwarded, one refused
        subprocess.run(["curl", "-sS", url], env=env, capture_output=True, timeout=60)
    connections = proxy.connections()
    assert {c.host for c in connections} >= {"www.googleapis.com", "example.com"}
    for connection in connections:
        assert connection.outcome.startswith(("forwarded to 127.0.0.1:", "refused: "))
