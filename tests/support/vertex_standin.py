"""The Vertex AI model, endpoint and prediction stand-ins (rehearsal/cloud/
endpoints.py) behind the rehearsal's TLS proxy, for a client process that knows only the
proxy and its certificate authority (the environment this yields)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent import futures

import grpc

from kubeflow_runner import DEFAULT_SERVING_PYTHON
from rehearsal.cloud.certificates import make_certificates
from rehearsal.cloud.endpoints import VertexModels
from rehearsal.cloud.proxy import Proxy, Route
from rehearsal.cloud.standins import proxy_environment


@contextlib.contextmanager
def vertex_behind_proxy(gcs_folder: str, workdir: str) -> Iterator[tuple[VertexModels, dict[str, str], Proxy]]:
    """The stand-ins serving ``gs://B/NAME`` from ``<gcs_folder>/B/NAME``; the environment of
    a process that reaches them as ``<region>-aiplatform.googleapis.com``; the proxy."""
    assert os.path.exists(DEFAULT_SERVING_PYTHON), "make test installs it (make serving-env)"
    models = VertexModels(gcs_folder, DEFAULT_SERVING_PYTHON, os.path.join(workdir, "endpoints"))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    models.add_to_server(server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    rest_port = models.start_rest()
    certificates = make_certificates(os.path.join(workdir, "tls"))
    proxy = Proxy([Route("*-aiplatform.googleapis.com", http1=rest_port, h2=grpc_port)], certificates)
    address = f"http://127.0.0.1:{proxy.start()}"
    try:
        yield models, {**os.environ, **proxy_environment(address, certificates.authority)}, proxy
    finally:
        proxy.stop()
        models.stop()
        server.stop(grace=None)
