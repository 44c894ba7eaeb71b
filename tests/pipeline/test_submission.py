"""Submitting the compiled job, tested up to the wire: the real clients talk to local
stand-in servers; nothing leaves the machine."""

from __future__ import annotations

import datetime

import pytest
from google.auth.credentials import AnonymousCredentials

from pipeline import submission
from pipeline.schedule import Schedule
from tests.support import cloud
from tests.support.standin_server import StandInServer, kfp_routes, vertex_routes

pytestmark = pytest.mark.usefixtures("loopback_only")


def _vertex_routes():
    return vertex_routes(cloud.PROJECT, cloud.REGION, cloud.BUCKET)


NETWORK = "projects/123/global/networks/ml"
LABELS = {"team": "ml", "stage": "dev"}


def _run_settings(job: dict, caching: bool, network: str | None = None) -> submission.Submission:
    return submission.Submission(
        project=cloud.PROJECT,
        region=cloud.REGION,
        pipeline_root=job["runtimeConfig"]["gcsOutputDirectory"],
        display_name="taxi-big-tipper",
        service_account=cloud.SERVICE_ACCOUNT,
        network=network,
        labels=LABELS,
        enable_caching=caching,
    )


def _assert_is_the_compiled_job_with_its_settings(sent: dict, job: dict, caching: bool) -> None:
    """A PipelineJob as sent (a run, or a schedule's template of its runs) is the compiled one."""
    assert sent["serviceAccount"] == cloud.SERVICE_ACCOUNT
    assert sent["labels"] == LABELS
    assert sent["runtimeConfig"]["gcsOutputDirectory"] == job["runtimeConfig"]["gcsOutputDirectory"]
    assert sent["runtimeConfig"].get("parameterValues", {}) == job["runtimeConfig"].get("parameterValues", {})
    spec = sent["pipelineSpec"]
    assert spec["root"]["dag"]["tasks"].keys() == job["pipelineSpec"]["root"]["dag"]["tasks"].keys()
    assert spec["deploymentSpec"] == job["pipelineSpec"]["deploymentSpec"]
    assert {t["cachingOptions"].get("enableCache", False) for t in spec["root"]["dag"]["tasks"].values()} == {caching}


@pytest.mark.parametrize("caching", [True, False])
def test_vertex_submission_sends_the_compiled_job(compiled_job, monkeypatch, caching):
    job_file, job = compiled_job
    with StandInServer(_vertex_routes()) as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        sent = submission.submit_to_vertex(
            str(job_file), _run_settings(job, caching), api_endpoint=server.url, credentials=AnonymousCredentials()
        )
    (request,) = server.find("POST", "/pipelineJobs")
    assert request.query["pipelineJobId"][0].startswith("taxi-big-tipper-")
    _assert_is_the_compiled_job_with_its_settings(request.body, job, caching)
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


START, END = datetime.datetime(2099, 1, 5, 3, tzinfo=datetime.UTC), "2099-06-30T22:00:00Z"


def _schedule_on_standin(compiled_job, schedule: Schedule, caching=False, network=None, dry_run=False):
    """The compiled job scheduled through the real client, against the stand-in: its server and the result."""
    job_file, job = compiled_job
    with StandInServer(_vertex_routes()) as server:
        created = submission.schedule_on_vertex(
            str(job_file),
            _run_settings(job, caching, network),
            schedule,
            dry_run=dry_run,
            api_endpoint=server.url,
            credentials=AnonymousCredentials(),
        )
    return server, created


@pytest.mark.parametrize("caching", [True, False])
def test_vertex_schedule_sends_the_compiled_job_with_the_run_settings(compiled_job, caching):
    schedule = Schedule(
        cron="TZ=Europe/Berlin 0 3 * * 1",
        display_name="taxi-big-tipper-schedule",
        start_time=START,
        end_time=datetime.datetime.fromisoformat(END),
        max_run_count=12,
    )
    server, created = _schedule_on_standin(compiled_job, schedule, caching, NETWORK)
    (request,) = server.requests  # schedules.create alone: no run starts, no bucket is touched
    assert (request.method, request.path) == (
        "POST",
        f"/v1/projects/{cloud.PROJECT}/locations/{cloud.REGION}/schedules",
    )
    body = request.body
    assert body["displayName"] == "taxi-big-tipper-schedule"
    assert body["cron"] == "TZ=Europe/Berlin 0 3 * * 1"
    assert (body["startTime"], body["endTime"]) == ("2099-01-05T03:00:00Z", END)
    assert int(body["maxConcurrentRunCount"]) == 1 and int(body["maxRunCount"]) == 12
    assert "allowQueueing" not in body  # a run due while one is going is skipped
    create = body["createPipelineJobRequest"]
    assert create["parent"] == f"projects/{cloud.PROJECT}/locations/{cloud.REGION}"
    _assert_is_the_compiled_job_with_its_settings(create["pipelineJob"], compiled_job[1], caching)
    assert create["pipelineJob"]["network"] == NETWORK
    assert created.resource_name == f"projects/{cloud.PROJECT}/locations/{cloud.REGION}/schedules/1000"
    assert created._dashboard_uri().endswith(
        f"/locations/{cloud.REGION}/pipelines/schedules/1000?project={cloud.PROJECT}"
    )


def test_a_schedule_without_a_window_leaves_it_to_vertex(compiled_job):
    schedule = Schedule(cron="0 3 * * *", display_name="taxi-big-tipper-schedule")
    server, _ = _schedule_on_standin(compiled_job, schedule)
    (request,) = server.find("POST", "/schedules")
    assert request.body["cron"] == "0 3 * * *" and int(request.body["maxConcurrentRunCount"]) == 1
    assert not {"startTime", "endTime", "maxRunCount"} & request.body.keys()


def test_vertex_schedule_dry_run_sends_nothing(compiled_job):
    schedule = Schedule(cron="0 3 * * 1", display_name="taxi-big-tipper-schedule")
    server, built = _schedule_on_standin(compiled_job, schedule, dry_run=True)
    assert server.requests == []
    request = built._gca_resource  # what create would send
    assert request.display_name == "taxi-big-tipper-schedule"
    assert dict(request.create_pipeline_job_request.pipeline_job.labels) == LABELS
