"""The Flink cluster the slow tests of this folder run on: started once per test module, in
namespaces and a subnet of its own (beside any cluster `make flink` started), stopped after.
A module's tests run in stages: those that lose one of its TaskManagers after the others, the
one that stops it last (their markers' order: ``tests/conftest.py``)."""

from __future__ import annotations

import dataclasses
import secrets

import pytest

from flink_cluster import cluster, network


@pytest.fixture(autouse=True)
def beams_own_pickles(monkeypatch):
    """Pipelines this process hands the cluster pickle in Beam's own form, the one its SDK
    workers read: a test run earlier in the same process may have set the local runs' form
    (``runtime.start.before_pickles``, as ``local_runner.py`` does for a run on this machine)."""
    from runtime.speedups import pickle_codec

    for beam_pickler in pickle_codec.BEAM_PICKLERS:
        monkeypatch.setattr(beam_pickler, "bz2", pickle_codec.BEAM_COMPRESSOR)


def unused_network() -> network.Network:
    """Names and a subnet of this run's own: other runs of this module, and a cluster that
    `make flink` started, may be up on the machine meanwhile."""
    for _ in range(20):
        candidate = network.Network(f"ft{secrets.token_hex(2)}", f"10.89.{secrets.choice(range(8, 250))}.0/24")
        if not network.in_use(candidate):
            return candidate
    pytest.fail("no unused subnet found in 10.89.8.0 to 10.89.249.0")


@pytest.fixture(scope="module")
def cluster_settings():
    """Settings of the module's cluster given its network, beyond the defaults (a test
    module may give its own)."""
    return lambda network: {}


@pytest.fixture(scope="module")
def flink(job_server_jar, rehearsal_image, cluster_settings, tmp_path_factory) -> cluster.Cluster:
    spec = cluster.Cluster(image=rehearsal_image, state_dir=tmp_path_factory.mktemp("flink"))
    if why := cluster.missing_requirements(spec):
        pytest.skip(why)
    hosts = unused_network()
    spec = dataclasses.replace(spec, network=hosts, **cluster_settings(hosts))
    cluster.up(spec, progress=lambda line: None)
    yield spec
    cluster.down(spec)
