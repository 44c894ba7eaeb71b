"""A rehearsed job whose Beam components run on an Apache Flink session cluster
(``--flink-master``): its tasks reach the cluster's REST API directly, as a task on Vertex
reaches a cluster on its network, not through the stand-ins' proxy; the cluster's SDK
workers read and write the job's gs:// paths through the same proxy, which also listens at
this machine's address on the cluster's network, at ``WORKERS_PROXY_PORT``. The workers
run with ``workers_environment`` (``python -m flink_cluster up --rehearsal-root`` starts
the sidecars with it); the files it names are in the rehearsal's root, which the cluster
shares.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping

from rehearsal.cloud.standins import STAND_INS_FOLDER, environment
from rehearsal.job import Task

# The proxy's port at this machine's address on a Flink cluster's network (the squid port).
WORKERS_PROXY_PORT = 3128
_MASTER = re.compile(r"^--flink_master=(?:https?://)?\[?([^\]/]+?)\]?(?::\d+)?/?$")
_NO_PROXY = ("no_proxy", "NO_PROXY")


def master_host(tasks: Iterable[Task]) -> str | None:
    """The host of the Flink JobManager the tasks' Beam pipelines are sent to, if any."""
    for task in tasks:
        if task.kind != "container":
            continue
        for arg in task.executor["container"].get("args", []):
            if found := _MASTER.match(arg):
                return found.group(1)
    return None


def address_toward(host: str) -> str:
    """This machine's address on the route to ``host`` (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, WORKERS_PROXY_PORT))
        return probe.getsockname()[0]


def tasks_environment(stand_in_env: Mapping[str, str], master: str | None) -> dict[str, str]:
    """The tasks' stand-in variables with the cluster's JobManager (if any) left out of the proxy."""
    return {key: f"{value},{master}" if master and key in _NO_PROXY else value for key, value in stand_in_env.items()}


def workers_environment(rehearsal_root: str, address: str, project: str = "rehearsal") -> dict[str, str]:
    """What the cluster's SDK workers add to their environment to reach the stand-ins of the
    rehearsals in ``rehearsal_root`` through the proxy at ``address`` (this machine's, as the
    cluster reaches it), as the tasks do."""
    folder = os.path.join(os.path.abspath(rehearsal_root), STAND_INS_FOLDER)
    return environment(folder, f"http://{address}:{WORKERS_PROXY_PORT}", project)
