"""The cluster's configuration: each host's Flink settings name its own address and fixed
ports, merged into Flink's shipped config.yaml; the sidecars join their TaskManager's
namespace with the shared directories; the pipeline flags point at the JobManager."""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path

import pytest
import yaml

from flink_cluster import cluster, fetch
from flink_cluster.network import Network
from runtime import job_server_launcher

SHIPPED = {
    "env": {"java": {"opts": {"all": "--add-opens=java.base/java.lang=ALL-UNNAMED"}}},
    "jobmanager": {"bind-host": "localhost", "rpc": {"address": "localhost", "port": 6123}},
    "taskmanager": {"bind-host": "localhost", "host": "localhost", "numberOfTaskSlots": 1},
    "rest": {"address": "localhost", "bind-address": "localhost"},
}


@pytest.fixture
def spec(tmp_path) -> cluster.Cluster:
    """A cluster over a stand-in Flink home holding only a shipped conf/."""
    conf = tmp_path / "flink" / "conf"
    conf.mkdir(parents=True)
    (conf / "config.yaml").write_text(yaml.safe_dump(SHIPPED))
    (conf / "log4j-console.properties").write_text("rootLogger.level = INFO\n")
    return cluster.Cluster(
        Network("flt", "10.89.8.0/24"),
        image="localhost/pipeline:test",
        shared=("/tmp", "/srv/outputs"),
        state_dir=tmp_path / "state",
        flink_home=tmp_path / "flink",
        job_server=tmp_path / "job-server",
    )


def jar(path: Path, *classes: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n")
        for name in classes:
            archive.writestr(name, b"\xca\xfe\xba\xbe")
    return path


def flat(config: dict, prefix: str = "") -> dict:
    items = {}
    for key, value in config.items():
        items |= flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value}
    return items


def test_every_host_finds_the_jobmanager_at_its_address(spec):
    for host in spec.network.hosts:
        settings = cluster.flink_settings(spec, host)
        assert settings["jobmanager.rpc.address"] == settings["rest.address"] == "10.89.8.2"
        assert "localhost" not in settings.values()


def test_each_taskmanager_announces_its_own_address_and_fixed_ports(spec):
    first, second = (cluster.flink_settings(spec, host) for host in spec.taskmanagers)
    assert (first["taskmanager.host"], second["taskmanager.host"]) == ("10.89.8.3", "10.89.8.4")
    assert first["taskmanager.resource-id"] != second["taskmanager.resource-id"]
    assert first["io.tmp.dirs"] != second["io.tmp.dirs"]
    for settings in (first, second):
        assert (settings["taskmanager.rpc.port"], settings["taskmanager.data.port"]) == (6122, 6121)
        assert settings["blob.server.port"] == 6124


def test_the_rest_api_binds_to_the_jobmanagers_address(spec):
    settings = cluster.flink_settings(spec, spec.jobmanager)
    assert settings["rest.bind-address"] == "10.89.8.2" and settings["rest.port"] == 8081


def test_settings_merge_into_flinks_shipped_configuration(spec):
    conf = cluster.write_conf(spec, spec.network.host("taskmanager1"))
    written = flat(yaml.safe_load((conf / "config.yaml").read_text()))
    assert written["env.java.opts.all"] == "--add-opens=java.base/java.lang=ALL-UNNAMED"  # Flink's default kept
    assert written["taskmanager.host"] == "10.89.8.3"
    assert written["jobmanager.rpc.address"] == "10.89.8.2"
    assert (conf / "log4j-console.properties").exists()


def test_merging_leaves_the_defaults_unchanged():
    defaults = {"a": {"b": 1}}
    assert cluster.merged(defaults, {"a.c.d": 2}) == {"a": {"b": 1, "c": {"d": 2}}}
    assert defaults == {"a": {"b": 1}}


def test_flinks_own_script_starts_each_host_in_its_namespace(spec):
    command = cluster.flink_command(spec, spec.network.host("taskmanager2"))
    assert command[:4] == ["ip", "netns", "exec", "flt-taskmanager2"]
    assert command[-2:] == [str(spec.flink_home / "bin" / "taskmanager.sh"), "start-foreground"]
    environment = cluster.flink_environment(spec, spec.jobmanager)
    assert environment["FLINK_CONF_DIR"] == str(spec.state / "conf" / "jobmanager")


def test_taskmanagers_load_beams_runner_from_the_clusters_lib_before_a_jobs_jar(spec):
    for host in spec.taskmanagers:
        assert cluster.flink_environment(spec, host)["FLINK_LIB_DIR"] == str(spec.state / "lib")
        assert cluster.flink_settings(spec, host)["classloader.resolve-order"] == "parent-first"


def test_the_jobmanager_loads_a_jobs_jar_first_as_flink_does(spec):
    """The JobManager runs a submitted jar's main, whose Beam reads the jar's own resources."""
    assert "FLINK_LIB_DIR" not in cluster.flink_environment(spec, spec.jobmanager)
    assert "classloader.resolve-order" not in cluster.flink_settings(spec, spec.jobmanager)


def test_the_clusters_lib_adds_beams_runner_and_what_it_needs_beyond_flink(spec):
    flinks = jar(spec.flink_home / "lib" / "flink-dist-1.19.3.jar", "org/apache/flink/A.class", "com/kryo/Kryo.class")
    logging = jar(spec.flink_home / "lib" / "log4j-core-2.17.1.jar", "org/apache/logging/L.class")
    runner = jar(spec.job_server / "lib" / "beam-runners-flink-1.19-2.62.0.jar", "org/apache/beam/R.class")
    joda = jar(spec.job_server / "lib" / "joda-time-2.10.14.jar", "org/joda/time/Duration.class")
    jar(spec.job_server / "lib" / "flink-core-1.19.0.jar", "org/apache/flink/A.class", "org/apache/flink/B.class")
    jar(spec.job_server / "lib" / "kryo-2.24.0.jar", "com/kryo/Kryo.class")
    lib = cluster.write_lib(spec)
    assert lib == spec.state / "lib"
    assert {path.name: path.resolve() for path in lib.iterdir()} == {
        path.name: path for path in (flinks, logging, runner, joda)
    }


def test_a_sidecar_runs_beams_worker_pool_on_its_taskmanagers_host(spec):
    host = spec.network.host("taskmanager1")
    command = cluster.sidecar_command(spec, host)
    assert command[command.index("--network") + 1] == "ns:/run/netns/flt-taskmanager1"
    assert command[command.index("--label") + 1] == "flink-cluster=flt"
    volumes = [command[i + 1] for i, arg in enumerate(command) if arg == "--volume"]
    assert volumes == ["/tmp:/tmp", "/srv/outputs:/srv/outputs"]
    assert command[command.index("--tmpfs") + 1] == "/tmp/staged"  # each boot's staged files its own
    assert command[-3:] == ["/opt/apache/beam/boot", "localhost/pipeline:test", "--worker_pool"]
    # The workers' temp files stay in the sidecar, not in the shared /tmp.
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--env"] == ["TMPDIR=/var/tmp"]


def test_a_sidecars_workers_get_the_variables_the_cluster_is_given(spec):
    with_env = dataclasses.replace(spec, sidecar_env=(("https_proxy", "http://10.89.9.1:3128"), ("A", "b=c")))
    command = cluster.sidecar_command(with_env, with_env.network.host("taskmanager2"))
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--env"] == [
        "TMPDIR=/var/tmp",
        "https_proxy=http://10.89.9.1:3128",
        "A=b=c",
    ]
    assert command.index("--env") < command.index(cluster.BOOT)  # podman's option, not boot's


def test_the_pipeline_flags_point_beam_at_the_cluster(spec):
    flags = cluster.pipeline_flags(spec, Path("/jars/job-server.jar"))
    assert flags == [
        "--runner=FlinkRunner",
        "--flink_master=10.89.8.2:8081",
        "--flink_version=1.19",
        "--flink_job_server_jar=/jars/job-server.jar",
        "--parallelism=2",
        "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000",
        "--environment_cache_millis=60000",
        f"--sdk_container_image={spec.image}",
        "--experiments=disable_logging_submission_environment",
        f"--job_server_java_launcher={job_server_launcher.LAUNCHER}",
    ]


def test_a_taskmanagers_address_is_read_from_its_rpc_path():
    manager = {"path": "pekko.tcp://flink@10.89.7.3:6122/user/rpc/taskmanager_0"}
    assert cluster.taskmanager_address(manager) == "10.89.7.3"


def test_the_default_shared_storage_is_the_temp_dir_the_outputs_and_the_data():
    assert cluster.default_shared()[1:] == (str(fetch.REPO_ROOT / "outputs"), str(fetch.REPO_ROOT / "data"))
