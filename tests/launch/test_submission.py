"""Submitting the compiled job, tested up to the wire: the real clients talk to local
stand-in servers; nothing leaves the machine."""

from __future__ import annotations

import argparse
import datetime
import json

import pytest
from google.auth.credentials import AnonymousCredentials

from launch import submission
from launch.schedule import Schedule
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


# A multi-user Kubeflow (profiles): the namespace and the bearer token, as the real kfp client sends them.

TOKEN = "tok-3f9c.multi-user"
NAMESPACE = "team-a"
KFP_RUN = ("taxi-big-tipper", "gs://bucket/tfx/pipelines/taxi-big-tipper")


@pytest.fixture
def kfp_context(monkeypatch, tmp_path):
    """kfp's client reads (and may write) ~/.config/kfp/context.json, and looks for the in-cluster
    token at its default path: both point into the test's directory, and the variable that
    overrides that path is unset."""
    import kfp

    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp-context.json"))
    monkeypatch.setattr(kfp.client, "KF_PIPELINES_SA_TOKEN_PATH", str(tmp_path / "no-projected-token"))
    monkeypatch.delenv("KF_PIPELINES_SA_TOKEN_PATH", raising=False)


def _submission_args(*argv: str):
    parser = argparse.ArgumentParser()
    submission.add_submission_flags(parser)
    return parser.parse_args(list(argv))


def _token_file(directory, name="token", text=TOKEN + "\n"):
    path = directory / name
    path.write_text(text)
    return path


def _send_to_multi_user_kfp(compiled_job, *flags: str, routes=None):
    """The compiled job sent, as the runner sends it, to a multi-user stand-in; its server and run."""
    job_file, _ = compiled_job
    with StandInServer(routes or kfp_routes(multi_user=True)) as server:
        access = submission.kfp_access(_submission_args("--kfp-host", server.url, *flags))
        run = submission.submit_to_kfp(str(job_file), server.url, "Default", *KFP_RUN, False, access=access)
    return server, run


def _assert_sent_to_the_namespace_with(server, token: str) -> None:
    """What kfp 2.13's client sends: the experiment looked up by name with ?namespace=, created
    with the namespace in its body, the run created in that experiment (its body has no
    namespace); every request with the bearer token."""
    listed, created, run = server.requests
    assert (listed.method, listed.path) == ("GET", "/apis/v2beta1/experiments")
    assert listed.query["namespace"] == [NAMESPACE]
    assert json.loads(listed.query["filter"][0])["predicates"][0]["stringValue"] == "Default"
    assert (created.method, created.path) == ("POST", "/apis/v2beta1/experiments")
    assert created.body == {"display_name": "Default", "namespace": NAMESPACE}
    assert (run.method, run.path) == ("POST", "/apis/v2beta1/runs")
    assert run.body["experiment_id"] == "exp-1" and "namespace" not in run.body
    assert {r.header("Authorization") for r in server.requests} == {f"Bearer {token}"}


def test_kfp_submission_to_a_profile_namespace_with_a_token_file(compiled_job, kfp_context, tmp_path, capsys, caplog):
    token_file = _token_file(tmp_path)
    server, run = _send_to_multi_user_kfp(
        compiled_job, "--kfp-namespace", NAMESPACE, "--kfp-token-file", str(token_file)
    )
    _assert_sent_to_the_namespace_with(server, TOKEN)
    assert run.run_id == "run-123"
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err + caplog.text


@pytest.mark.parametrize("named_by", ["kfp's default path", "KF_PIPELINES_SA_TOKEN_PATH"])
def test_kfp_submission_with_the_in_cluster_token(compiled_job, kfp_context, tmp_path, monkeypatch, named_by):
    """In a Kubeflow pod: no token flag; kfp's ServiceAccountTokenVolumeCredentials reads the
    projected token from where kfp looks for it."""
    import kfp

    projected = _token_file(tmp_path, "projected", "in-cluster-token")
    if named_by == "KF_PIPELINES_SA_TOKEN_PATH":
        monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(projected))
    else:
        monkeypatch.setattr(kfp.client, "KF_PIPELINES_SA_TOKEN_PATH", str(projected))
    server, _ = _send_to_multi_user_kfp(compiled_job, "--kfp-namespace", NAMESPACE)
    _assert_sent_to_the_namespace_with(server, "in-cluster-token")


def test_the_token_file_flag_wins_over_the_in_cluster_token(compiled_job, kfp_context, tmp_path, monkeypatch):
    monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(_token_file(tmp_path, "projected", "in-cluster-token")))
    flags = ("--kfp-namespace", NAMESPACE, "--kfp-token-file", str(_token_file(tmp_path)))
    server, _ = _send_to_multi_user_kfp(compiled_job, *flags)
    _assert_sent_to_the_namespace_with(server, TOKEN)


def test_the_token_file_is_read_on_each_request(compiled_job, kfp_context, tmp_path):
    """A token that rotates while submitting (a projected or refreshed token) is sent as it is now."""
    token_file = _token_file(tmp_path)
    routes = kfp_routes(multi_user=True)
    create_experiment = routes["POST", "/apis/v2beta1/experiments"]

    def create_and_rotate(request):
        token_file.write_text("rotated-token\n")
        return create_experiment(request)

    routes["POST", "/apis/v2beta1/experiments"] = create_and_rotate
    flags = ("--kfp-namespace", NAMESPACE, "--kfp-token-file", str(token_file))
    server, _ = _send_to_multi_user_kfp(compiled_job, *flags, routes=routes)
    assert [r.header("Authorization") for r in server.requests] == [f"Bearer {TOKEN}"] * 2 + ["Bearer rotated-token"]


def test_without_a_token_a_multi_user_kubeflow_refuses_the_client(compiled_job, kfp_context):
    """What the stand-in's refusal looks like through the real client (no token: nothing sent
    but the first request)."""
    from kfp_server_api import ApiException

    with pytest.raises(ApiException) as refused:
        _send_to_multi_user_kfp(compiled_job, "--kfp-namespace", NAMESPACE)
    assert refused.value.status == 401


def test_kfp_access_without_namespace_or_token_leaves_the_client_its_defaults(kfp_context):
    access = submission.kfp_access(_submission_args("--kfp-host", "http://127.0.0.1:1"))
    assert access == submission.KfpAccess() and access.client_kwargs() == {}


def test_the_token_paths_in_the_help_are_kfps():
    from kfp import client as kfp_client

    assert submission.KFP_TOKEN_PATH_ENV == kfp_client.KF_PIPELINES_SA_TOKEN_ENV
    assert submission.IN_CLUSTER_TOKEN_PATH == kfp_client.KF_PIPELINES_SA_TOKEN_PATH


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kfp-namespace", "Team_A"], "--kfp-namespace must be a Kubernetes namespace"),
        (["--kfp-namespace", "a" * 64], "--kfp-namespace must be a Kubernetes namespace"),
        (["--kfp-namespace=team-"], "--kfp-namespace must be a Kubernetes namespace"),
        (["--kfp-token-file", "{tmp}/missing"], "--kfp-token-file: cannot read {tmp}/missing (No such file"),
        (["--kfp-token-file", "{tmp}"], "--kfp-token-file: cannot read {tmp} (Is a directory)"),
        (["--kfp-token-file", "{tmp}/empty"], "--kfp-token-file: {tmp}/empty is empty"),
        (["--kfp-token-file", "{tmp}/two-lines"], "--kfp-token-file: {tmp}/two-lines holds more than one line"),
        (["--kfp-token-file", "{tmp}/binary"], "--kfp-token-file: cannot read {tmp}/binary (not a text file)"),
    ],
)
def test_bad_kfp_access_settings_fail_in_one_line_naming_the_flag(kfp_context, tmp_path, flags, message):
    _token_file(tmp_path, "empty", "  \n")
    _token_file(tmp_path, "two-lines", f"{TOKEN}\n{TOKEN}\n")
    (tmp_path / "binary").write_bytes(b"\xff\xfe" + TOKEN.encode())
    argv = ["--kfp-host", "https://kubeflow.example.com/pipeline", *(f.format(tmp=tmp_path) for f in flags)]
    with pytest.raises(submission.SettingsError) as err:
        submission.check_submission_values(_submission_args(*argv))
    assert str(err.value).startswith(message.format(tmp=tmp_path))
    assert "\n" not in str(err.value) and TOKEN not in str(err.value)


def test_a_missing_in_cluster_token_named_by_kfps_variable_fails_naming_it(kfp_context, tmp_path, monkeypatch):
    monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(tmp_path / "gone"))
    with pytest.raises(
        submission.SettingsError,
        match=r"^\$KF_PIPELINES_SA_TOKEN_PATH: cannot read .*gone .*"
        r"give --kfp-token-file, or unset KF_PIPELINES_SA_TOKEN_PATH$",
    ):
        submission.kfp_access(_submission_args("--kfp-host", "https://kubeflow.example.com"))


@pytest.mark.parametrize("flag", ["--kfp-namespace", "--kfp-token-file"])
def test_kfp_access_flags_need_kfp_host(flag):
    with pytest.raises(submission.SettingsError, match=f"^{flag} is for a Kubeflow endpoint: it needs --kfp-host$"):
        submission.check_submission_values(_submission_args(flag, "team-a"))
