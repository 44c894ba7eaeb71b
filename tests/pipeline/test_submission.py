"""Submitting the compiled job, tested up to the wire: the real clients talk to local
stand-in servers; nothing leaves the machine."""

from __future__ import annotations

import pytest
from google.auth.credentials import AnonymousCredentials

from pipeline import submission
from tests.support import cloud
from tests.support.standin_server import StandInServer, kfp_routes, vertex_routes

pytestmark = pytest.mark.usefixtures("loopback_only")


def _vertex_routes():
    return vertex_routes(cloud.PROJECT, cloud.REGION, cloud.BUCKET)


@pytest.mark.parametrize("caching", [True, False])
def test_vertex_submission_sends_the_compiled_job(compiled_job, monkeypatch, caching):
    job_file, job = compiled_job
    with StandInServer(_vertex_routes()) as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        job_submission = submission.Submission(
            project=cloud.PROJECT,
            region=cloud.REGION,
            pipeline_root=job["runtimeConfig"]["gcsOutputDirectory"],
            display_name="taxi-big-tipper",
            service_account=cloud.SERVICE_ACCOUNT,
            labels={"team": "ml", "stage": "dev"},
            enable_caching=caching,
        )
        sent = submission.submit_to_vertex(
            str(job_file), job_submission, api_endpoint=server.url, credentials=AnonymousCredentials()
        )
    (request,) = server.find("POST", "/pipelineJobs")
    body = request.body
    assert request.query["pipelineJobId"][0].startswith("taxi-big-tipper-")
    assert body["serviceAccount"] == cloud.SERVICE_ACCOUNT
    assert body["labels"] == {"team": "ml", "stage": "dev"}
    assert body["runtimeConfig"]["gcsOutputDirectory"] == job["runtimeConfig"]["gcsOutputDirectory"]
    assert body["runtimeConfig"].get("parameterValues", {}) == job["runtimeConfig"].get("parameterValues", {})
    spec = body["pipelineSpec"]
    assert spec["root"]["dag"]["tasks"].keys() == job["pipelineSpec"]["root"]["dag"]["tasks"].keys()
    assert spec["deploymentSpec"] == job["pipelineSpec"]["deploymentSpec"]
    assert {t["cachingOptions"].get("enableCache", False) for t in spec["root"]["dag"]["tasks"].values()} == {caching}
    assert sent.resource_name.endswith(request.query["pipelineJobId"][0])
    assert sent._dashboard_uri().startswith("https://console.cloud.google.com/vertex-ai/")


def test_vertex_dry_run_sends_nothing(compiled_job, monkeypatch):
    job_file, _ = compiled_job
    with StandInServer(_vertex_routes()) as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        job_submission = submission.Submission(
            project=cloud.PROJECT,
            region=cloud.REGION,
            pipeline_root=f"{cloud.OUTPUT_ROOT}/p",
            display_name="taxi-big-tipper",
        )
        job = submission.submit_to_vertex(
            str(job_file), job_submission, dry_run=True, api_endpoint=server.url, credentials=AnonymousCredentials()
        )
    assert server.requests == []
    assert job.job_id.startswith("taxi-big-tipper-")


def test_kfp_submission_sends_the_compiled_pipeline_spec(compiled_job):
    job_file, job = compiled_job
    with StandInServer(kfp_routes()) as server:
        result = submission.submit_to_kfp(
            str(job_file),
            server.url,
            "Default",
            "taxi-big-tipper",
            "gs://bucket/tfx/pipelines/taxi-big-tipper",
            enable_caching=False,
        )
    (request,) = server.find("POST", "/apis/v2beta1/runs")
    assert result.run_id == "run-123"
    assert request.body["experiment_id"] == "exp-1" and request.body["display_name"] == "taxi-big-tipper"
    assert request.body["pipeline_spec"]["components"] == job["pipelineSpec"]["components"]
    assert request.body["pipeline_spec"]["deploymentSpec"] == job["pipelineSpec"]["deploymentSpec"]
    assert request.body["runtime_config"]["pipeline_root"] == "gs://bucket/tfx/pipelines/taxi-big-tipper"
    tasks = request.body["pipeline_spec"]["root"]["dag"]["tasks"]
    assert tasks.keys() == job["pipelineSpec"]["root"]["dag"]["tasks"].keys()
    assert {t.get("cachingOptions", {}).get("enableCache", False) for t in tasks.values()} == {False}
