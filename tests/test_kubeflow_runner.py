"""Compiling for Kubeflow Pipelines v2 / Vertex AI, and submitting, tested up to the wire:
the real clients talk to local stand-in servers; nothing leaves the machine."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import socket
import tomllib
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials

import kubeflow_runner as kr
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from tests.standin_server import StandInServer

REPO = Path(kr.__file__).resolve().parent
PROJECT, REGION = "my-proj", "us-central1"
CLOUD_ARGS = ["--output-root", "gs://bucket/tfx", "--data-root", "gs://bucket/data", "--image", "gcr.io/my-proj/taxi:1"]
SERVICE_ACCOUNT = f"pipelines@{PROJECT}.iam.gserviceaccount.com"


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Any Python socket connecting anywhere but this machine fails the test."""
    real_connect = socket.socket.connect

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if host not in ("127.0.0.1", "localhost", "::1") and not str(host).startswith("/"):
            raise AssertionError(f"test tried to reach {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[Path, dict]:
    output = tmp_path_factory.mktemp("compiled") / "job.json"
    assert kr.main([*CLOUD_ARGS, "--output-file", str(output)]) == 0
    return output, json.loads(output.read_text())


def _node_of(task: str, node_ids: set[str]) -> str:
    """Vertex task names are node ids; a Resolver compiles to '<id>-<input>-resolver' tasks."""
    return task if task in node_ids else next(n for n in node_ids if task.startswith(n + "-"))


def test_compiled_tasks_and_edges_are_exactly_the_local_dag(compiled):
    _, job = compiled
    local = create_pipeline(PipelineConfig(data_root="gs://bucket/data", output_root="gs://bucket/tfx"))
    local_edges = {(up.id, c.id) for c in local.components for up in c.upstream_nodes}
    node_ids = {c.id for c in local.components}

    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    compiled_nodes = {_node_of(t, node_ids) for t in tasks}
    compiled_edges = {
        (_node_of(dep, node_ids), _node_of(t, node_ids)) for t, spec in tasks.items() for dep in spec.get("dependentTasks", [])
    }
    assert compiled_nodes == node_ids
    assert compiled_edges == local_edges


def test_every_task_runs_the_projects_image(compiled):
    _, job = compiled
    executors = job["pipelineSpec"]["deploymentSpec"]["executors"]
    images = {e["container"]["image"] for e in executors.values() if "container" in e}
    assert images == {"gcr.io/my-proj/taxi:1"}
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://bucket/tfx/pipelines/taxi-big-tipper"


def test_user_code_is_referenced_by_importable_module_paths(compiled):
    _, job = compiled
    text = json.dumps(job)
    referenced = set(re.findall(r"(?<![\w.])((?:models|components|pipeline)\.[a-z_]+(?:\.[A-Za-z_]+)*)", text))
    assert {"models.trainer.run_fn", "models.preprocessing.preprocessing_fn"} <= referenced
    assert "models.evaluation" in referenced  # the Evaluator's module_path
    assert any(ref.startswith("components.anomaly_gate") for ref in referenced)
    for ref in referenced:
        module, _, attribute = ref.rpartition(".")
        # module.attribute (models.trainer.run_fn), or a module itself (models.evaluation).
        assert hasattr(importlib.import_module(module), attribute) or importlib.util.find_spec(ref) is not None, ref
    dockerfile = (REPO / "Dockerfile").read_text()
    for package in {ref.split(".")[0] for ref in referenced}:
        assert f"COPY {package}/ /pipeline/{package}/" in dockerfile, package
    assert "ENV PYTHONPATH=/pipeline" in dockerfile


def test_dockerfile_base_image_matches_the_locked_tfx_version():
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    (locked,) = [p["version"] for p in lock["package"] if p["name"] == "tfx"]
    base = re.search(r"^FROM (\S+)$", (REPO / "Dockerfile").read_text(), re.M).group(1)
    assert base == f"gcr.io/tfx-oss-public/tfx:{locked}" == kr.TFX_BASE_IMAGE


@pytest.mark.parametrize("package", ["models", "pipeline", "components"])
def test_container_code_parses_as_python_3_10(package):
    """The TFX 1.16 image runs Python 3.10."""
    for path in (REPO / package).glob("*.py"):
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 10))


def test_dataflow_arguments_reach_every_beam_component(tmp_path):
    output = tmp_path / "job.json"
    argv = [*CLOUD_ARGS, "--output-file", str(output), "--dataflow", "--project", PROJECT, "--region", REGION,
            "--dataflow-temp-location", "gs://bucket/tmp", "--dataflow-max-workers", "8"]
    assert kr.main(argv) == 0
    executors = json.loads(output.read_text())["pipelineSpec"]["deploymentSpec"]["executors"]
    transform_args = executors["Transform_executor"]["container"]["args"]
    for expected in ("--runner=DataflowRunner", f"--project={PROJECT}", f"--region={REGION}",
                     "--temp_location=gs://bucket/tmp", "--max_num_workers=8",
                     "--sdk_container_image=gcr.io/my-proj/taxi:1"):
        assert expected in transform_args
    assert not any(a.startswith("--direct_") for a in transform_args)


def test_endpoint_deployment_swaps_in_the_vertex_pusher(tmp_path):
    output = tmp_path / "job.json"
    argv = [*CLOUD_ARGS, "--output-file", str(output), "--project", PROJECT, "--region", REGION,
            "--endpoint-name", "taxi-endpoint"]
    assert kr.main(argv) == 0
    text = output.read_text()
    assert "google_cloud_ai_platform.pusher.executor" in text
    assert "taxi-endpoint" in text and "tf2-cpu.2-15" in text


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--output-root", "/tmp/x", "--data-root", "gs://b/d", "--image", "i"], "--output-root"),
        (["--output-root", "gs://b/o", "--data-root", "data/", "--image", "i"], "--data-root"),
        ([*CLOUD_ARGS, "--pipeline-name", "Taxi_Pipeline"], "--pipeline-name"),
        ([*CLOUD_ARGS, "--submit", "--region", REGION], "--project"),
        ([*CLOUD_ARGS, "--submit", "--project", PROJECT], "--region"),
        ([*CLOUD_ARGS, "--dataflow", "--project", PROJECT, "--region", REGION], "--dataflow-temp-location"),
        ([*CLOUD_ARGS, "--kfp-host", "localhost:8888"], "--kfp-host"),
        ([*CLOUD_ARGS, "--label", "oops"], "--label"),
    ],
)
def test_bad_settings_fail_before_anything_is_sent_naming_the_flag(argv, flag, capsys):
    assert kr.main(argv) == 2
    assert flag in capsys.readouterr().err


def test_missing_kfp_is_reported_instead_of_silently_dropped():
    with pytest.raises(kr.SettingsError, match="kfp package is not installed"):
        kr.require_kfp(find_spec=lambda name: None)


def _vertex_routes():
    def create_job(request):
        job = dict(request.body)
        job["name"] = f"projects/{PROJECT}/locations/{REGION}/pipelineJobs/{request.query['pipelineJobId'][0]}"
        job["state"] = "PIPELINE_STATE_PENDING"
        return 200, job

    not_found = {"error": {"code": 404, "message": "Not Found"}}
    return {
        ("POST", f"/v1/projects/{PROJECT}/locations/{REGION}/pipelineJobs"): create_job,
        # The client makes sure the pipeline root's bucket exists (Cloud Storage API).
        ("GET", "/storage/v1/b/bucket/iam"): lambda r: (200, {"bindings": []}),
        ("PUT", "/storage/v1/b/bucket/iam"): lambda r: (200, r.body),
        ("GET", "/storage/v1/b/"): lambda r: (404, not_found),
        ("POST", "/storage/v1/b"): lambda r: (200, {**r.body, "projectNumber": "123"}),
    }


@pytest.mark.parametrize("caching", [True, False])
def test_vertex_submission_sends_the_compiled_job(compiled, monkeypatch, caching):
    job_file, job = compiled
    with StandInServer(_vertex_routes()) as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        submission = kr.Submission(
            project=PROJECT, region=REGION, pipeline_root=job["runtimeConfig"]["gcsOutputDirectory"],
            display_name="taxi-big-tipper", service_account=SERVICE_ACCOUNT,
            labels={"team": "ml", "stage": "dev"}, enable_caching=caching,
        )
        sent = kr.submit_to_vertex(str(job_file), submission, api_endpoint=server.url,
                                   credentials=AnonymousCredentials())
    (request,) = server.find("POST", "/pipelineJobs")
    body = request.body
    assert request.query["pipelineJobId"][0].startswith("taxi-big-tipper-")
    assert body["serviceAccount"] == SERVICE_ACCOUNT
    assert body["labels"] == {"team": "ml", "stage": "dev"}
    assert body["runtimeConfig"]["gcsOutputDirectory"] == job["runtimeConfig"]["gcsOutputDirectory"]
    assert body["runtimeConfig"].get("parameterValues", {}) == job["runtimeConfig"].get("parameterValues", {})
    spec = body["pipelineSpec"]
    assert spec["root"]["dag"]["tasks"].keys() == job["pipelineSpec"]["root"]["dag"]["tasks"].keys()
    assert spec["deploymentSpec"] == job["pipelineSpec"]["deploymentSpec"]
    assert {t["cachingOptions"].get("enableCache", False) for t in spec["root"]["dag"]["tasks"].values()} == {caching}
    assert sent.resource_name.endswith(request.query["pipelineJobId"][0])
    assert sent._dashboard_uri().startswith("https://console.cloud.google.com/vertex-ai/")


def test_vertex_dry_run_sends_nothing(compiled, monkeypatch):
    job_file, _ = compiled
    with StandInServer(_vertex_routes()) as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        submission = kr.Submission(project=PROJECT, region=REGION, pipeline_root="gs://bucket/tfx/p",
                                   display_name="taxi-big-tipper")
        job = kr.submit_to_vertex(str(job_file), submission, dry_run=True, api_endpoint=server.url,
                                  credentials=AnonymousCredentials())
    assert server.requests == []
    assert job.job_id.startswith("taxi-big-tipper-")


def _kfp_routes():
    return {
        ("GET", "/apis/v2beta1/healthz"): lambda r: (200, {"multi_user": False}),
        ("GET", "/apis/v2beta1/experiments"): lambda r: (
            200, {"experiments": [{"experiment_id": "exp-1", "display_name": "Default"}], "total_size": 1}),
        ("POST", "/apis/v2beta1/runs"): lambda r: (
            200, {"run_id": "run-123", "display_name": r.body["display_name"], "experiment_id": "exp-1"}),
    }


def test_kfp_submission_sends_the_compiled_pipeline_spec(compiled):
    job_file, job = compiled
    with StandInServer(_kfp_routes()) as server:
        result = kr.submit_to_kfp(str(job_file), server.url, "Default", "taxi-big-tipper",
                                  "gs://bucket/tfx/pipelines/taxi-big-tipper", enable_caching=False)
    (request,) = server.find("POST", "/apis/v2beta1/runs")
    assert result.run_id == "run-123"
    assert request.body["experiment_id"] == "exp-1" and request.body["display_name"] == "taxi-big-tipper"
    assert request.body["pipeline_spec"]["components"] == job["pipelineSpec"]["components"]
    assert request.body["pipeline_spec"]["deploymentSpec"] == job["pipelineSpec"]["deploymentSpec"]
    assert request.body["runtime_config"]["pipeline_root"] == "gs://bucket/tfx/pipelines/taxi-big-tipper"
    tasks = request.body["pipeline_spec"]["root"]["dag"]["tasks"]
    assert tasks.keys() == job["pipelineSpec"]["root"]["dag"]["tasks"].keys()
    assert {t.get("cachingOptions", {}).get("enableCache", False) for t in tasks.values()} == {False}


def test_kfp_host_from_the_command_line(compiled, tmp_path, capsys):
    with StandInServer(_kfp_routes()) as server:
        argv = [*CLOUD_ARGS, "--output-file", str(tmp_path / "job.json"), "--kfp-host", server.url]
        assert kr.main(argv) == 0
    assert server.find("POST", "/apis/v2beta1/runs")
    assert "runs/details/run-123" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "pool_text"),
    [
        (["--vertex-training", "gpu", "--accelerator-type", "NVIDIA_L4"], '"accelerator_type": "NVIDIA_L4"'),
        (["--vertex-training", "multi-worker", "--training-replicas", "2"], '"replica_count": 1'),
        (["--vertex-training", "tpu"], '"machine_type": "cloud-tpu"'),
    ],
)
def test_vertex_training_is_compiled_into_the_trainer(tmp_path, flags, pool_text):
    output = tmp_path / "job.json"
    assert kr.main([*CLOUD_ARGS, "--output-file", str(output), "--project", PROJECT, "--region", REGION, *flags]) == 0
    executors = json.loads(output.read_text())["pipelineSpec"]["deploymentSpec"]["executors"]
    trainer = json.dumps(executors["Trainer_executor"])
    assert "google_cloud_ai_platform.trainer.executor" in trainer
    job = json.loads(output.read_text())
    custom_config = json.dumps(job["pipelineSpec"]["root"]["dag"]["tasks"]["Trainer"])
    assert pool_text.replace('"', '\\"') in custom_config


def test_unknown_accelerator_names_the_flag(capsys):
    argv = [*CLOUD_ARGS, "--project", PROJECT, "--region", REGION, "--vertex-training", "gpu",
            "--accelerator-type", "NVIDIA_TESLA_T5"]
    assert kr.main(argv) == 2
    err = capsys.readouterr().err
    assert "--vertex-training gpu" in err and "NVIDIA_TESLA_T4" in err


def test_submit_dry_run_from_the_command_line_sends_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-file.json"))
    argv = [*CLOUD_ARGS, "--output-file", str(tmp_path / "job.json"), "--project", PROJECT, "--region", REGION,
            "--submit", "--dry-run", "--label", "team=ml"]
    assert kr.main(argv) == 0  # no credentials exist, and none were looked up
    out = capsys.readouterr().out
    assert "Dry run: Vertex AI PipelineJob taxi-big-tipper-" in out and "not sent" in out
