"""The cluster's network: each host a Linux network namespace joined to one bridge on this
machine by a veth pair, with a fixed address on a private subnet; the bridge holds the
first address, so this machine (the client, the job server) reaches every host. No route
leads anywhere else. Needs root and iproute2's ``ip``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import shutil
import subprocess


class NetworkError(RuntimeError):
    """An ``ip`` command failed; the message names it and says why."""


@dataclasses.dataclass(frozen=True)
class Host:
    """One host of the cluster: its namespace, address, and the veth pair's two ends."""

    role: str
    namespace: str
    address: str
    host_veth: str
    inner_veth: str = "eth0"


@dataclasses.dataclass(frozen=True)
class Network:
    """Where the cluster's hosts live: ``prefix`` names the namespaces, links and bridge
    (interface names stay within Linux's 15 characters), ``subnet`` their addresses."""

    prefix: str = "flink"
    subnet: str = "10.89.7.0/24"
    roles: tuple[str, ...] = ("jobmanager", "taskmanager1", "taskmanager2")

    def __post_init__(self) -> None:
        if len(self.roles) + 3 > ipaddress.ip_network(self.subnet).num_addresses:
            raise ValueError(f"subnet {self.subnet} is too small for {len(self.roles)} hosts and a gateway")
        if len(self.bridge) > 15 or any(len(host.host_veth) > 15 for host in self.hosts):
            raise ValueError(f"prefix {self.prefix!r} is too long for interface names (at most 15 characters)")

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    @property
    def gateway(self) -> str:
        """This machine's address on the bridge."""
        return str(ipaddress.ip_network(self.subnet)[1])

    @property
    def prefix_length(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    @property
    def hosts(self) -> tuple[Host, ...]:
        network = ipaddress.ip_network(self.subnet)
        return tuple(
            Host(role, f"{self.prefix}-{role}", str(network[index + 2]), f"{self.prefix}-v{index}")
            for index, role in enumerate(self.roles)
        )

    def host(self, role: str) -> Host:
        return next(host for host in self.hosts if host.role == role)


def missing_requirements() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    return None


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    process = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and process.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)} failed: {process.stderr.strip()}")
    return process


def in_namespace(host: Host, *command: str) -> list[str]:
    """``command`` as run on ``host``: inside its network namespace."""
    return ["ip", "netns", "exec", host.namespace, *command]


def namespaces() -> set[str]:
    return {line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.strip()}


def links() -> set[str]:
    return {line.split()[0].split("@")[0] for line in ip("-brief", "link").stdout.splitlines() if line.strip()}


def addresses() -> set[str]:
    """The IPv4 addresses this machine holds."""
    found = set()
    for line in ip("-brief", "-4", "addr").stdout.splitlines():
        found |= {field.split("/")[0] for field in line.split()[2:]}
    return found


def in_use(network: Network) -> bool:
    """Whether any of ``network``'s names or its bridge's address is taken on this machine."""
    return bool(leftovers(network)) or network.gateway in addresses()


def create(network: Network) -> None:
    """The bridge with this machine's address, and each host's namespace wired to it."""
    ip("link", "add", network.bridge, "type", "bridge")
    ip("addr", "add", f"{network.gateway}/{network.prefix_length}", "dev", network.bridge)
    ip("link", "set", network.bridge, "up")
    for host in network.hosts:
        ip("netns", "add", host.namespace)
        ip("link", "add", host.host_veth, "type", "veth", "peer", "name", f"{host.host_veth}p")
        ip("link", "set", f"{host.host_veth}p", "netns", host.namespace)
        ip("-n", host.namespace, "link", "set", f"{host.host_veth}p", "name", host.inner_veth)
        ip("-n", host.namespace, "addr", "add", f"{host.address}/{network.prefix_length}", "dev", host.inner_veth)
        ip("-n", host.namespace, "link", "set", host.inner_veth, "up")
        ip("-n", host.namespace, "link", "set", "lo", "up")
        ip("link", "set", host.host_veth, "master", network.bridge)
        ip("link", "set", host.host_veth, "up")


def pids(host: Host) -> list[int]:
    """Processes running in ``host``'s namespace."""
    if host.namespace not in namespaces():
        return []
    return [int(pid) for pid in ip("netns", "pids", host.namespace, check=False).stdout.split()]


def delete(network: Network) -> None:
    """The namespaces (their veth ends go with them) and the bridge, whichever exist."""
    present = namespaces()
    for host in network.hosts:
        if host.namespace in present:
            ip("netns", "delete", host.namespace)
    existing = links()
    for name in [host.host_veth for host in network.hosts] + [network.bridge]:
        # A veth's host end goes with its namespace, a moment after the namespace.
        deleted = ip("link", "delete", name, check=False)
        if name in existing and deleted.returncode != 0 and "Cannot find device" not in deleted.stderr:
            raise NetworkError(f"ip link delete {name} failed: {deleted.stderr.strip()}")


def leftovers(network: Network) -> list[str]:
    """Namespaces and links of ``network`` that exist on this machine."""
    present, existing = namespaces(), links()
    names = [host.namespace for host in network.hosts if host.namespace in present]
    return names + [name for name in [*(h.host_veth for h in network.hosts), network.bridge] if name in existing]
