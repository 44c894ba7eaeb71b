"""A Flink 1.19 session cluster on this machine: the JobManager and two TaskManagers, each
on its own host (network namespace, see ``network.py``), started by Flink's own scripts
(``jobmanager.sh`` / ``taskmanager.sh start-foreground``) with a configuration directory per
host: Flink's shipped ``config.yaml`` with every address and port set explicitly. Each
TaskManager has a sidecar container of the project's image on its host running Beam's SDK
worker pool (the image's ``boot --worker_pool``, port 50000), which Beam's EXTERNAL
environment (``localhost:50000``) reaches from that TaskManager. The directories in
``shared`` stand in for the cluster's shared storage: the same paths on every host and in
every sidecar. ``down`` leaves nothing: JVMs, containers, namespaces and bridge.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from flink_cluster import fetch, network
from launch.flink import add_flink_flags, local_flink_args
from rehearsal import podman
from rehearsal.image import DEFAULT_IMAGE
from runtime.processes import alive, ended_within

REST_PORT, JOBMANAGER_RPC_PORT, BLOB_PORT = 8081, 6123, 6124
TASKMANAGER_RPC_PORT, TASKMANAGER_DATA_PORT, QUERY_SERVICE_PORT = 6122, 6121, 6125
WORKER_POOL_PORT = 50000  # fixed by Beam's Python boot in --worker_pool mode
BOOT = "/opt/apache/beam/boot"
# Where boot materializes a job's staged files (its --semi_persist_dir, /tmp, plus
# "staged"): private to each sidecar, even when the system temp dir is shared.
BOOT_STAGING = "/tmp/staged"
# The SDK workers' temp dir (TMPDIR): in the sidecar's own layer, gone with it. The shared
# /tmp would keep what a worker stopped by its pool leaves there (TensorFlow's autograph
# modules, which a Python process removes only as it exits).
WORKER_TMP = "/var/tmp"
JOBMANAGER = "jobmanager"
ANY_ADDRESS = "0.0.0.0"
STARTUP_SECONDS = 180
TASKMANAGER_MEMORY, TASKMANAGER_NETWORK_MEMORY, SORT_SHUFFLE_BUFFERS = "4g", "768m", 64
TASK_OFF_HEAP_MEMORY, MANAGED_MEMORY = "512m", "512m"
RESTART_ATTEMPTS = 3
RPC_TIMEOUT = "60 s"


class ClusterError(RuntimeError):
    """The cluster could not start or stop; the message says where to look."""


def default_shared() -> tuple[str, ...]:
    """The system temp dir (Beam's artifact staging, a test's files), the project's outputs,
    and its data (the problems' embedded CSV files, which a local run reads by default)."""
    return (tempfile.gettempdir(), str(fetch.REPO_ROOT / "outputs"), str(fetch.REPO_ROOT / "data"))


@dataclasses.dataclass(frozen=True)
class Cluster:
    """One cluster's settings; ``network.prefix`` names everything it creates."""

    network: network.Network = network.Network()
    image: str = DEFAULT_IMAGE
    shared: tuple[str, ...] = dataclasses.field(default_factory=default_shared)
    state_dir: Path | None = None
    flink_home: Path = dataclasses.field(default_factory=fetch.flink_home)
    # Beam's Flink job server: its lib holds the runner the cluster loads (see ``write_lib``).
    job_server: Path = dataclasses.field(default_factory=fetch.job_server_dir)
    slots_per_taskmanager: int = 2
    # Variables the sidecars' worker pool, so every SDK worker, runs with: (name, value) pairs.
    sidecar_env: tuple[tuple[str, str], ...] = ()

    @property
    def state(self) -> Path:
        """Configuration, logs and the started processes' ids."""
        return self.state_dir or fetch.REPO_ROOT / "outputs" / "flink" / self.network.prefix

    @property
    def jobmanager(self) -> network.Host:
        return self.network.host(JOBMANAGER)

    @property
    def taskmanagers(self) -> tuple[network.Host, ...]:
        return tuple(host for host in self.network.hosts if host.role != JOBMANAGER)

    @property
    def master(self) -> str:
        """The JobManager's REST address, as Beam's ``--flink_master`` takes it."""
        return f"{self.jobmanager.address}:{REST_PORT}"

    @property
    def label(self) -> str:
        return f"flink-cluster={self.network.prefix}"

    def container(self, host: network.Host) -> str:
        return f"{self.network.prefix}-{host.role}-sdk-worker-pool"

    @property
    def parallelism(self) -> int:
        """One task per TaskManager: the other slots take a lost TaskManager's tasks."""
        return len(self.taskmanagers)


def pipeline_flags(cluster: Cluster, job_server_jar: Path | None = None) -> list[str]:
    """The flags that run a Beam Python pipeline on ``cluster``: what a run's ``--flink-*``
    flags for the cluster (its parallelism, its job server jar, its image) make."""
    parser = argparse.ArgumentParser()
    add_flink_flags(parser)
    run = parser.parse_args(
        [
            f"--flink-master={cluster.master}",
            f"--flink-version={'.'.join(fetch.FLINK_VERSION.split('.')[:2])}",
            f"--flink-job-server-jar={job_server_jar or fetch.job_server_jar()}",
            f"--flink-parallelism={cluster.parallelism}",
            f"--flink-worker-pool=localhost:{WORKER_POOL_PORT}",
            f"--flink-sdk-image={cluster.image}",
        ]
    )
    return list(local_flink_args(run))


# Configuration: Flink's own config.yaml with the cluster's addresses and ports.


def flink_settings(cluster: Cluster, host: network.Host) -> dict[str, object]:
    """The settings of ``host``'s Flink process, by Flink's dotted keys: every address other
    processes use is the host's own, every port fixed. The RPC and blob servers bind to all
    of the host's interfaces (its namespace has only its link and loopback): the JobManager's
    REST handler hands a submitted job's jars to the blob server at ``localhost``."""
    common = {
        "jobmanager.rpc.address": cluster.jobmanager.address,
        "jobmanager.rpc.port": JOBMANAGER_RPC_PORT,
        "rest.address": cluster.jobmanager.address,
        "rest.port": REST_PORT,
        "blob.server.port": BLOB_PORT,
        "metrics.internal.query-service.port": QUERY_SERVICE_PORT,
        "parallelism.default": cluster.parallelism,
        "io.tmp.dirs": str(cluster.state / "tmp" / host.role),
        # A lost TaskManager's tasks are restarted on the slots left (a cluster manager
        # such as Kubernetes would also restart the TaskManager itself).
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": RESTART_ATTEMPTS,
        "restart-strategy.fixed-delay.delay": "5 s",
        # A restart reruns the failed task's region only (Flink's shipped default). Rerunning
        # the whole job instead leaves the first attempt's temp directories of Beam's file
        # sinks in the components' output directories, which TFX's readers then open as
        # files. The cost: a region that holds a finished FinalizeWrite fails again when
        # rerun (Beam deletes the files its first run made, then finds them gone: "src and
        # dst files do not exist"), and the job with it; the run can be rerun.
        "jobmanager.execution.failover-strategy": "region",
        # A TaskManager busy on shared cores may take more than Flink's default 10 s to
        # accept a task; past it the deployment fails and the job restarts.
        "pekko.ask.timeout": RPC_TIMEOUT,
    }
    if host.role == JOBMANAGER:
        return common | {
            "jobmanager.bind-host": ANY_ADDRESS,
            "rest.bind-address": host.address,
            # A job's tasks on every TaskManager rather than filling one's slots first.
            "cluster.evenly-spread-out-slots": True,
        }
    return common | {
        "taskmanager.host": host.address,
        "taskmanager.bind-host": ANY_ADDRESS,
        "taskmanager.rpc.port": TASKMANAGER_RPC_PORT,
        "taskmanager.data.port": TASKMANAGER_DATA_PORT,
        "taskmanager.resource-id": host.namespace,
        # Classes from the JVM's own class path (the TaskManagers' lib, see ``write_lib``)
        # before a job's jar: Beam's and its dependencies' (Joda-Time's, among others, whose
        # objects Beam's classes take) then load once per TaskManager, whatever jar a job
        # brings. Not on the JobManager, which runs a submitted jar's main (Beam's reads its
        # pipeline from its own class loader's resources, the jar's).
        "classloader.resolve-order": "parent-first",
        "taskmanager.numberOfTaskSlots": cluster.slots_per_taskmanager,
        # A Beam job's tasks (TFX's components have tens of operators each, every result a
        # blocking partition that Flink's sort shuffle gives 512 buffers by default) need
        # more of Flink's network buffers than its default 128 MB holds.
        "taskmanager.memory.process.size": TASKMANAGER_MEMORY,
        "taskmanager.memory.network.min": TASKMANAGER_NETWORK_MEMORY,
        "taskmanager.memory.network.max": TASKMANAGER_NETWORK_MEMORY,
        "taskmanager.network.sort-shuffle.min-buffers": SORT_SHUFFLE_BUFFERS,
        # The portable runner's gRPC channels to the SDK workers take direct buffers from the
        # task's off-heap budget (0 by default: "Direct buffer memory" at 1.5M rows); Beam's
        # batch operators spill to managed memory, whose default 40% of the process took the
        # room for both.
        "taskmanager.memory.task.off-heap.size": TASK_OFF_HEAP_MEMORY,
        "taskmanager.memory.managed.size": MANAGED_MEMORY,
        # An error no task catches (the heap running out in a gRPC thread of the portable
        # runner) ends the TaskManager, whose tasks the restart strategy then moves, rather
        # than leaving its job waiting forever on the thread that died.
        "cluster.uncaught-exception-handling": "FAIL",
    }


def merged(defaults: dict, settings: dict[str, object]) -> dict:
    """``defaults`` (nested, as Flink's config.yaml) with each dotted key of ``settings`` set."""
    config = json.loads(json.dumps(defaults))
    for key, value in settings.items():
        *parents, leaf = key.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return config


def write_conf(cluster: Cluster, host: network.Host) -> Path:
    """``host``'s configuration directory: Flink's shipped files, its config.yaml merged."""
    shipped, conf = cluster.flink_home / "conf", cluster.state / "conf" / host.role
    shutil.rmtree(conf, ignore_errors=True)
    shutil.copytree(shipped, conf)
    defaults = yaml.safe_load((shipped / "config.yaml").read_text())
    (conf / "config.yaml").write_text(yaml.safe_dump(merged(defaults, flink_settings(cluster, host))))
    return conf


def write_lib(cluster: Cluster) -> Path:
    """The TaskManagers' ``lib``: Flink's own jars and Beam's runner with what it needs
    beyond Flink, so that Beam's classes load once per TaskManager rather than per job.
    Beam's portable runner keeps a job's SDK workers between its stages
    (``--environment_cache_millis``) only when its classes come from Flink's own class
    loader; from a job's jar, it stops them as each stage ends."""
    lib = cluster.state / "lib"
    shutil.rmtree(lib, ignore_errors=True)
    lib.mkdir(parents=True)
    flinks = sorted((cluster.flink_home / "lib").glob("*.jar"))
    for jar in [*flinks, *fetch.runner_jars(cluster.flink_home, cluster.job_server)]:
        (lib / jar.name).symlink_to(jar)
    return lib


# Processes: Flink's JVMs on their hosts, the sidecars beside the TaskManagers.


def flink_command(cluster: Cluster, host: network.Host) -> list[str]:
    script = "jobmanager.sh" if host.role == JOBMANAGER else "taskmanager.sh"
    return network.in_namespace(host, "bash", str(cluster.flink_home / "bin" / script), "start-foreground")


def flink_environment(cluster: Cluster, host: network.Host) -> dict[str, str]:
    """What Flink's scripts read: this host's configuration, logs and pid file, a
    TaskManager's lib (see ``write_lib``); the JVM's output to files in the log directory."""
    return {
        **os.environ,
        "FLINK_CONF_DIR": str(cluster.state / "conf" / host.role),
        "FLINK_LOG_DIR": str(cluster.state / "log" / host.role),
        "FLINK_PID_DIR": str(cluster.state / "pid" / host.role),
        "STD_REDIRECT_TO_FILE": "true",
    } | ({} if host.role == JOBMANAGER else {"FLINK_LIB_DIR": str(cluster.state / "lib")})


def start_flink(cluster: Cluster, host: network.Host) -> int:
    """Flink's script for ``host`` in its namespace; it execs the JVM, whose pid this is."""
    write_conf(cluster, host)
    for kind in ("log", "tmp"):
        (cluster.state / kind / host.role).mkdir(parents=True, exist_ok=True)
    with open(cluster.state / "log" / f"{host.role}.console", "w") as console:
        process = subprocess.Popen(
            flink_command(cluster, host),
            env=flink_environment(cluster, host),
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process.pid


def sidecar_command(cluster: Cluster, host: network.Host) -> list[str]:
    """``podman run`` of Beam's SDK worker pool in ``host``'s network namespace, with the
    shared directories at their own paths."""
    mounts = [arg for path in cluster.shared for arg in ("--volume", f"{path}:{path}")]
    env = [arg for key, value in cluster.sidecar_env for arg in ("--env", f"{key}={value}")]
    return [
        "run",
        "--detach",
        "--name",
        cluster.container(host),
        "--label",
        cluster.label,
        "--network",
        f"ns:/run/netns/{host.namespace}",
        *mounts,
        "--env",
        f"TMPDIR={WORKER_TMP}",
        *env,
        "--tmpfs",
        BOOT_STAGING,
        "--entrypoint",
        BOOT,
        cluster.image,
        "--worker_pool",
    ]


def up(cluster: Cluster, progress=print) -> None:
    """The whole cluster, returning once the JobManager reports every TaskManager registered
    and each sidecar's worker pool listens; on failure everything started is removed."""
    if why := missing_requirements(cluster):
        raise ClusterError(why)
    if left := leftovers(cluster):
        raise ClusterError(f"cluster {cluster.network.prefix!r} is (partly) up: {', '.join(left)}; `down` first")
    for path in cluster.shared:
        os.makedirs(path, exist_ok=True)
    cluster.state.mkdir(parents=True, exist_ok=True)
    try:
        write_lib(cluster)
        network.create(cluster.network)
        pids = {host.role: start_flink(cluster, host) for host in cluster.network.hosts}
        record(cluster, pids=pids)
        for host in cluster.taskmanagers:
            podman.run(*sidecar_command(cluster, host))
        record(cluster, pids=pids, containers=[cluster.container(host) for host in cluster.taskmanagers])
        progress(f"waiting for {len(cluster.taskmanagers)} TaskManagers to register at http://{cluster.master}")
        wait_until_ready(cluster, pids)
    except BaseException:
        down(cluster)
        raise


def record(cluster: Cluster, **state: object) -> None:
    (cluster.state / "state.json").write_text(json.dumps(state, indent=2))


def recorded(cluster: Cluster) -> dict:
    path = cluster.state / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def wait_until_ready(cluster: Cluster, pids: dict[str, int], timeout: float = STARTUP_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if dead := [role for role, pid in pids.items() if not alive(pid)]:
            raise ClusterError(f"{', '.join(dead)} exited: see {cluster.state / 'log'}")
        if registered(cluster) == {host.address for host in cluster.taskmanagers} and all(
            listening(host.address, WORKER_POOL_PORT) for host in cluster.taskmanagers
        ):
            return
        time.sleep(1)
    raise ClusterError(f"not ready after {timeout:.0f} s: see {cluster.state / 'log'} and `podman logs`")


def rest(cluster: Cluster, path: str, timeout: float = 10) -> dict:
    """The JobManager's REST API's answer to GET ``path``."""
    with urllib.request.urlopen(f"http://{cluster.master}{path}", timeout=timeout) as response:
        return json.load(response)


def registered(cluster: Cluster) -> set[str]:
    """The addresses of the TaskManagers registered at the JobManager (none while it starts)."""
    try:
        managers = rest(cluster, "/taskmanagers", timeout=3)["taskmanagers"]
    except OSError:
        return set()
    return {taskmanager_address(manager) for manager in managers}


def taskmanager_address(manager: dict) -> str:
    """The host of a TaskManager's RPC path (``pekko.tcp://flink@10.89.7.3:6122/user/...``)."""
    return manager["path"].split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)[0]


def listening(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


def down(cluster: Cluster, grace: float = 30) -> None:
    """Every process on the cluster's hosts, its sidecars, namespaces and bridge, gone."""
    if network.missing_requirements() is not None:
        return
    if podman.available():
        podman.remove_labelled(cluster.label)
    pids = set(recorded(cluster).get("pids", {}).values())
    pids |= {pid for host in cluster.network.hosts for pid in network.pids(host)}
    signal_all(pids, signal.SIGTERM)
    ended_within(pids, grace, poll_seconds=0.5)
    signal_all(pids, signal.SIGKILL)
    network.delete(cluster.network)
    shutil.rmtree(cluster.state / "tmp", ignore_errors=True)
    (cluster.state / "state.json").unlink(missing_ok=True)


def signal_all(pids: set[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def leftovers(cluster: Cluster) -> list[str]:
    """What of ``cluster`` exists on this machine: its processes, containers, namespaces, links."""
    pids = recorded(cluster).get("pids", {})
    found = [f"{role} (pid {pid})" for role, pid in pids.items() if alive(pid)]
    if podman.available():
        listed = podman.run("ps", "--all", "--format", "{{.Names}}", "--filter", f"label={cluster.label}")
        found += [f"container {name}" for name in listed.stdout.split()]
    return found + network.leftovers(cluster.network)


def missing_requirements(cluster: Cluster) -> str | None:
    """Why the cluster cannot start here, or None."""
    if why := network.missing_requirements():
        return why
    if shutil.which("java") is None:
        return "java is not installed (Flink 1.19 runs on Java 11 or 17)"
    if not podman.available():
        return "podman is not installed: `make image` installs it"
    if not (cluster.flink_home / "bin" / "jobmanager.sh").exists():
        return f"Flink is not fetched into {cluster.flink_home}: python -m flink_cluster fetch"
    if not (cluster.job_server / "lib").is_dir():
        return f"Beam's Flink job server is not fetched into {cluster.job_server}: python -m flink_cluster fetch"
    return None
