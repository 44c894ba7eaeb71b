"""The --flink flags: their checks, the Beam arguments they become, and the checks of the
cluster (a local stand-in of the JobManager's REST API) and of the job server jar."""

from __future__ import annotations

import argparse
import http.server
import json
import socket
import threading
import zipfile

import pytest

from launch import flink
from launch.flag_errors import SettingsError
from runtime import job_server_launcher


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    flink.add_flink_flags(parser)
    return parser.parse_args(argv)


def test_no_master_no_beam_args():
    args = parse()
    flink.check_flink_flags(args)
    assert flink.flink_args(args) == ()


def test_master_makes_the_flink_runner_with_the_worker_pool():
    args = parse("--flink-master", "10.0.0.2:8081", "--flink-parallelism", "2")
    flink.check_flink_flags(args)
    assert flink.flink_args(args) == (
        "--runner=FlinkRunner",
        "--flink_master=10.0.0.2:8081",
        "--flink_version=1.19",
        "--parallelism=2",
        "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000",
        "--environment_cache_millis=60000",
        f"--sdk_container_image={flink.LOCAL_IMAGE}",
        "--experiments=disable_logging_submission_environment",
    )


def test_a_running_job_server_is_reached_with_the_portable_runner():
    args = parse("--flink-master", "jm:8081", "--flink-job-endpoint", "jobserver:8099")
    beam_args = flink.flink_args(args)
    assert beam_args[:2] == ("--runner=PortableRunner", "--job_endpoint=jobserver:8099")
    assert not any(arg.startswith("--flink_master") for arg in beam_args)


def test_the_jar_is_passed_to_beam(tmp_path):
    jar = tmp_path / "server.jar"
    jar.write_bytes(b"")
    args = parse("--flink-master", "jm:8081", "--flink-job-server-jar", str(jar))
    flink.check_flink_flags(args)
    assert f"--flink_job_server_jar={jar}" in flink.flink_args(args)


def test_a_local_run_starts_beams_job_server_through_the_launcher_that_ties_it_to_the_run(tmp_path):
    """Beam's own FlinkRunner job server builds its command with the launcher; a compiled
    job's tasks, which start no job server, and a reached job server get none."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.flink_runner import FlinkJarJobServer

    jar = tmp_path / "server.jar"
    jar.write_bytes(b"")
    args = parse("--flink-master", "jm:8081", "--flink-job-server-jar", str(jar))
    beam_args = flink.local_flink_args(args)
    assert beam_args == (*flink.flink_args(args), f"--job_server_java_launcher={job_server_launcher.LAUNCHER}")
    options = PipelineOptions([*beam_args, f"--artifacts_dir={tmp_path / 'artifacts'}"])
    command, _ = FlinkJarJobServer(options).subprocess_cmd_and_endpoint()
    assert command[:3] == [job_server_launcher.LAUNCHER, "-jar", str(jar)]
    args.image = "gcr.io/p/pipeline:1"
    assert not any("java_launcher" in arg for arg in flink.compiled_job_flink_args(args))
    reached = parse("--flink-master", "jm:8081", "--flink-job-endpoint", "jobserver:8099")
    assert flink.local_flink_args(reached) == flink.flink_args(reached)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--flink-parallelism", "2"), "--flink-parallelism needs --flink-master"),
        (("--flink-master", "nohostport"), "--flink-master must be HOST:PORT"),
        (("--flink-master", "jm:8081", "--flink-parallelism", "0"), "--flink-parallelism must be at least 1"),
        (("--flink-master", "jm:8081", "--flink-worker-pool", "pool"), "--flink-worker-pool must be HOST:PORT"),
        (("--flink-master", "jm:8081", "--flink-job-server-jar", "/no/such.jar"), "there is no such file"),
        (
            ("--flink-master", "jm:8081", "--flink-job-server-jar", "https://x/y.jar", "--flink-job-endpoint", "j:1"),
            "not both",
        ),
    ],
)
def test_wrong_flags_are_refused_naming_the_flag(argv, named):
    with pytest.raises(SettingsError, match=named):
        flink.check_flink_flags(parse(*argv))


def write_jar(path, entries: dict[str, str], manifest: str | None = None) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        if manifest is not None:
            archive.writestr("META-INF/MANIFEST.MF", manifest)
        for name, text in entries.items():
            archive.writestr(name, text)
    return str(path)


def job_server_jar(path, beam: str, flink_minor: str) -> str:
    pom = f"META-INF/maven/org.apache.beam/beam-runners-flink-{flink_minor}/pom.properties"
    return write_jar(path, {pom: f"artifactId=beam-runners-flink-{flink_minor}\nversion={beam}\n"})


def test_the_job_server_versions_are_read_from_beams_maven_metadata(tmp_path):
    jar = job_server_jar(tmp_path / "uber.jar", "2.61.0", "1.19")
    assert flink.read_job_server(jar) == flink.JobServer("2.61.0", "1.19")


def test_a_launcher_jar_is_followed_through_its_class_path(tmp_path):
    (tmp_path / "lib").mkdir()
    job_server_jar(tmp_path / "lib" / "beam-runners-flink-1.19-2.62.0.jar", "2.62.0", "1.19")
    manifest = "Manifest-Version: 1.0\nClass-Path: lib/other.jar lib/beam-runners-flink-1.19-2.62.0.jar\n"
    launcher = write_jar(tmp_path / "launcher.jar", {}, manifest)
    assert flink.read_job_server(launcher) == flink.JobServer("2.62.0", "1.19")


def test_a_jar_that_is_not_a_job_server_is_refused(tmp_path):
    jar = write_jar(tmp_path / "other.jar", {"a.class": ""})
    with pytest.raises(SettingsError, match="not a Beam Flink job server"):
        flink.read_job_server(jar)


@pytest.mark.parametrize(
    ("beam", "flink_minor", "named"),
    [("2.50.0", "1.19", "Beam 2.50.0's job server"), ("2.61.0", "1.18", "runs on Flink 1.18")],
)
def test_a_job_server_of_another_beam_or_flink_is_refused(tmp_path, beam, flink_minor, named):
    jar = job_server_jar(tmp_path / "js.jar", beam, flink_minor)
    with pytest.raises(SettingsError, match=named):
        flink.check_job_server(jar, "2.61.0", "1.19")


@pytest.mark.parametrize("beam", ["2.61.0", *flink.PROVEN_JOB_SERVER_VERSIONS])
def test_the_sdks_own_or_a_proven_job_server_is_taken(tmp_path, beam):
    jar = job_server_jar(tmp_path / "js.jar", beam, "1.19")
    assert flink.check_job_server(jar, "2.61.0", "1.19").beam_version == beam


@pytest.fixture
def jobmanager():
    """A stand-in for a JobManager's REST API answering /config with a settable version."""
    served = {"flink-version": "1.19.3"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = json.dumps(served if self.path == "/config" else {}).encode()
            self.send_response(200 if self.path == "/config" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", served
    server.shutdown()


def test_the_clusters_flink_version_is_read_from_its_rest_api(jobmanager):
    address, _ = jobmanager
    assert flink.cluster_flink_version(address) == "1.19.3"
    flink.check_cluster(parse("--flink-master", address), "2.61.0")


def test_a_flink_beam_does_not_support_is_refused_before_running(jobmanager):
    address, served = jobmanager
    served["flink-version"] = "1.20.1"
    with pytest.raises(SettingsError, match="Flink 1.20.1, which Beam 2.61.0 does not support"):
        flink.check_cluster(parse("--flink-master", address), "2.61.0")


def test_a_cluster_of_another_supported_flink_asks_for_its_version_flag(jobmanager):
    address, served = jobmanager
    served["flink-version"] = "1.18.1"
    with pytest.raises(SettingsError, match="give --flink-version 1.18"):
        flink.check_cluster(parse("--flink-master", address), "2.61.0")


def test_a_wrong_job_server_is_refused_before_running(jobmanager, tmp_path):
    address, _ = jobmanager
    jar = job_server_jar(tmp_path / "js.jar", "2.50.0", "1.19")
    with pytest.raises(SettingsError, match="Beam 2.50.0's job server"):
        flink.check_cluster(parse("--flink-master", address, "--flink-job-server-jar", jar), "2.61.0")


def test_an_unreachable_cluster_is_one_line_naming_the_flag():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SettingsError, match=f"--flink-master 127.0.0.1:{port}: no Flink JobManager answers") as err:
        flink.check_cluster(parse("--flink-master", f"127.0.0.1:{port}"), "2.61.0")
    assert "\n" not in str(err.value)


def test_a_server_that_is_not_flink_is_refused(jobmanager):
    address, served = jobmanager
    served.clear()
    with pytest.raises(SettingsError, match="not a Flink JobManager"):
        flink.check_cluster(parse("--flink-master", address), "2.61.0")
