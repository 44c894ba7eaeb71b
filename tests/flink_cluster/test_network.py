"""The cluster's hosts: names within Linux's limits, one address each on the subnet, the
bridge holding the first."""

from __future__ import annotations

import pytest

from flink_cluster.network import Network, in_namespace


def test_each_host_has_its_namespace_address_and_link():
    network = Network()
    assert network.bridge == "flink-br" and network.gateway == "10.89.7.1"
    assert [(h.role, h.namespace, h.address, h.host_veth) for h in network.hosts] == [
        ("jobmanager", "flink-jobmanager", "10.89.7.2", "flink-v0"),
        ("taskmanager1", "flink-taskmanager1", "10.89.7.3", "flink-v1"),
        ("taskmanager2", "flink-taskmanager2", "10.89.7.4", "flink-v2"),
    ]
    assert network.host("taskmanager2").address == "10.89.7.4"


def test_another_cluster_shares_no_name_or_address():
    first, second = Network(), Network("flt", "10.89.8.0/24")
    names = lambda n: {n.bridge} | {h.namespace for h in n.hosts} | {h.host_veth for h in n.hosts}  # noqa: E731
    addresses = lambda n: {n.gateway} | {h.address for h in n.hosts}  # noqa: E731
    assert not names(first) & names(second)
    assert not addresses(first) & addresses(second)


def test_names_too_long_for_an_interface_are_refused():
    with pytest.raises(ValueError, match="15 characters"):
        Network(prefix="a-very-long-prefix")


def test_a_subnet_too_small_for_the_hosts_is_refused():
    with pytest.raises(ValueError, match="too small"):
        Network(subnet="10.89.7.0/30")


def test_a_command_runs_on_a_host_inside_its_namespace():
    host = Network().host("jobmanager")
    assert in_namespace(host, "java", "-version") == ["ip", "netns", "exec", "flink-jobmanager", "java", "-version"]
