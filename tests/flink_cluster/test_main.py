"""The command line: which cluster its flags describe, and what `up` tells the person."""

from __future__ import annotations

from flink_cluster import __main__ as cli
from flink_cluster import cluster


def test_defaults_describe_the_documented_cluster():
    spec = cli.make_cluster(cli.parse_args(["up"]))
    assert spec.master == "10.89.7.2:8081"
    assert spec.shared == cluster.default_shared()


def test_shared_directories_and_names_are_the_callers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shared = ["--shared", "data", "--shared", "/srv/out"]
    spec = cli.make_cluster(cli.parse_args(["up", *shared, "--prefix", "fx", "--subnet", "10.89.9.0/24"]))
    assert spec.shared == (str(tmp_path / "data"), "/srv/out")
    assert spec.network.host("jobmanager").namespace == "fx-jobmanager"
    assert spec.master == "10.89.9.2:8081"


def test_up_prints_the_flags_a_pipeline_takes():
    spec = cli.make_cluster(cli.parse_args(["up"]))
    text = cli.describe(spec)
    assert " ".join(cluster.pipeline_flags(spec)) in text
    assert "python -m flink_cluster down" in text


def test_job_server_jar_prints_the_launchers_path(capsys):
    assert cli.main(["job-server-jar"]) == 0
    assert capsys.readouterr().out.strip().endswith("beam-runners-flink-1.19-job-server-2.62.0.jar")


def test_a_rehearsal_root_sends_the_workers_to_its_stand_ins_at_the_gateway(tmp_path):
    spec = cli.make_cluster(cli.parse_args(["up", "--subnet", "10.89.9.0/24", "--rehearsal-root", str(tmp_path)]))
    env = dict(spec.sidecar_env)
    assert env["https_proxy"] == env["http_proxy"] == "http://10.89.9.1:3128"
    assert env["REQUESTS_CA_BUNDLE"] == str(tmp_path / "cloud" / "tls" / "ca.pem")
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == str(tmp_path / "cloud" / "application_default_credentials.json")
    assert cli.make_cluster(cli.parse_args(["up"])).sidecar_env == ()
