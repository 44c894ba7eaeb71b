"""The Google Cloud a rehearsed task talks to, all on this machine: every stand-in (Cloud Storage,
the token endpoint, Vertex AI's services, project lookup, Kubernetes for TFJobs) and the proxy
that routes the tasks' unmodified clients to them, started and stopped together on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
from concurrent import futures

import grpc

from rehearsal.cloud.certificates import AUTHORITY_FILE, Certificates, make_certificates
from rehearsal.cloud.projects import Projects
from rehearsal.cloud.proxy import Connection, Proxy, Route
from rehearsal.cloud.storage import StorageServer

# The hosts Google's clients call, and which stand-in answers them.
STORAGE_HOSTS = ("www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com")
VERTEX_HOSTS = "*-aiplatform.googleapis.com"
PROJECTS_HOST = "cloudresourcemanager.googleapis.com"
# Where requests/google-auth, libcurl (TensorFlow's GCS file system, curl), OpenSSL and gRPC
# read the certificate authorities they trust.
TRUST_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH")
LOOPBACK_NAMES = "127.0.0.1,localhost"
# Under a rehearsal's root: the stand-ins' folder.
STAND_INS_FOLDER = "cloud"
# Under the stand-ins' folder: Vertex AI's models and endpoints, kept from one rehearsal to the
# next; the certificates; the made-up credentials.
VERTEX_STATE_FILE = "vertex_models.json"
CERTIFICATES_FOLDER = "tls"
CREDENTIALS_FILE = "application_default_credentials.json"


def environment(folder: str, proxy: str, project: str) -> dict[str, str]:
    """What a process adds to its environment to reach the stand-ins whose files are in
    ``folder`` through ``proxy`` instead of Google."""
    return {
        **proxy_environment(proxy, os.path.join(folder, CERTIFICATES_FOLDER, AUTHORITY_FILE)),
        "GOOGLE_APPLICATION_CREDENTIALS": os.path.join(folder, CREDENTIALS_FILE),
        "GOOGLE_CLOUD_PROJECT": project,
        # TensorFlow's GCS file system asks the GCE metadata server whether it runs on
        # Google Compute Engine before reading the credentials file; there is none here.
        "NO_GCE_CHECK": "true",
        # gRPC's default (c-ares) resolver asks the system's DNS server for
        # _grpclb._tcp.<proxy host> SRV records, even for the proxy's numeric address (the
        # Vertex AI SDK's channels enable those queries); the native resolver does not.
        "GRPC_DNS_RESOLVER": "native",
    }


def proxy_environment(proxy: str, authority: str) -> dict[str, str]:
    """The variables that send Google's clients through ``proxy`` (loopback excepted) and
    make ``authority`` the only certificate authority they trust."""
    return {
        **dict.fromkeys(("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"), proxy),
        "no_proxy": LOOPBACK_NAMES,
        "NO_PROXY": LOOPBACK_NAMES,
        **dict.fromkeys(TRUST_VARIABLES, authority),
    }


class StandIns:
    """Every stand-in of one rehearsal; ``folder`` keeps their certificates, credentials and logs,
    and the Vertex AI models and endpoints that later rehearsals find again."""

    def __init__(
        self,
        folder: str,
        gcs_folder: str,
        project: str,
        launcher=None,
        serving_python: str | None = None,
        kubernetes: bool = False,
        also_listen: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self.folder = folder
        self.gcs_folder = gcs_folder
        self.project = project
        self._launcher = launcher  # a cloud.jobs.ReplicaLauncher: without one, no JobService
        self._with_kubernetes = kubernetes  # a Kubeflow cluster's Kubernetes API for TFJobs (with a launcher)
        self.kubernetes = None  # rehearsal.cloud.kubernetes.KubernetesApi, when asked for
        self._serving_python = serving_python
        # (address, port) where the proxy also listens: for a Flink cluster's SDK workers.
        self._also_listen = also_listen
        self.storage: StorageServer | None = None
        self.jobs = None  # rehearsal.cloud.jobs.JobService, when replicas can be set up
        self.models = None  # rehearsal.cloud.endpoints.VertexModels, when a serving Python is given
        self._grpc: grpc.Server | None = None
        self._proxy: Proxy | None = None
        self._env: dict[str, str] = {}

    def __enter__(self) -> StandIns:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_) -> None:
        self.stop()

    def start(self) -> None:
        os.makedirs(self.folder, exist_ok=True)
        certificates = make_certificates(os.path.join(self.folder, CERTIFICATES_FOLDER))
        self.storage = StorageServer(self.gcs_folder)
        storage_port = self.storage.start()
        grpc_port, rest_port = self._start_vertex_services()
        kubeconfig = self._start_kubernetes()
        proxy = self._start_proxy(certificates, storage_port, grpc_port, rest_port)
        self._write_credentials()
        self._env = {**environment(self.folder, proxy, self.project), **kubeconfig}

    def _start_vertex_services(self) -> tuple[int, int | None]:
        """The gRPC server (project lookup, and JobService and the model services when asked for)
        and the models' REST server: their ports (None: no REST server)."""
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        Projects(self.project).add_to_server(self._grpc)
        rest_port = None
        if self._launcher is not None:
            from rehearsal.cloud.jobs import JobService

            self.jobs = JobService(os.path.join(self.folder, "jobs"), self._launcher)
            self.jobs.add_to_server(self._grpc)
        if self._serving_python is not None:
            from rehearsal.cloud.endpoints import VertexModels

            self.models = VertexModels(
                self.gcs_folder,
                self._serving_python,
                os.path.join(self.folder, "endpoints"),
                state_path=os.path.join(self.folder, VERTEX_STATE_FILE),
            )
            self.models.add_to_server(self._grpc)
            rest_port = self.models.start_rest()
        grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._grpc.start()
        return grpc_port, rest_port

    def _start_kubernetes(self) -> dict[str, str]:
        """The Kubernetes API for TFJobs, when asked for: the ``KUBECONFIG`` that reaches it."""
        if not (self._with_kubernetes and self._launcher is not None):
            return {}
        from rehearsal.cloud.kubernetes import KubernetesApi

        self.kubernetes = KubernetesApi(os.path.join(self.folder, "kubernetes"), self._launcher)
        self.kubernetes.start()
        return {"KUBECONFIG": self.kubernetes.kubeconfig()}

    def _start_proxy(self, certificates: Certificates, storage_port: int, grpc_port: int, rest_port: int | None) -> str:
        """The proxy routing each Google host to its stand-in: its URL."""
        routes = [Route(host, http1=storage_port) for host in STORAGE_HOSTS]
        routes.append(Route(VERTEX_HOSTS, http1=rest_port, h2=grpc_port))
        routes.append(Route(PROJECTS_HOST, h2=grpc_port))
        self._proxy = Proxy(routes, certificates)
        return f"http://127.0.0.1:{self._proxy.start(self._also_listen)}"

    def _write_credentials(self) -> str:
        """An ``authorized_user`` file whose refresh token the token endpoint exchanges: its path."""
        credentials = os.path.join(self.folder, CREDENTIALS_FILE)
        with open(credentials, "w") as f:
            json.dump(
                {
                    "type": "authorized_user",
                    "client_id": "rehearsal.apps.googleusercontent.com",
                    "client_secret": "rehearsal",
                    "refresh_token": "rehearsal",
                    "quota_project_id": self.project,
                },
                f,
            )
        return credentials

    def environment(self) -> dict[str, str]:
        """What a task's environment adds to reach the stand-ins instead of Google."""
        return dict(self._env)

    def connections(self) -> list[Connection]:
        return self._proxy.connections() if self._proxy else []

    def stop(self) -> None:
        for stop in (
            self._proxy and self._proxy.stop,
            self.jobs and self.jobs.stop,
            self.kubernetes and self.kubernetes.stop,
            self.models and self.models.stop,
            self._grpc and (lambda: self._grpc.stop(grace=None)),
            self.storage and self.storage.stop,
        ):
            if stop:
                stop()
        self._proxy = self._grpc = None
