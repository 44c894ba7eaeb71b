"""kubeflow_runner.py, the command line: flags become the compiled job's settings, bad
settings fail naming the flag before anything is sent, and submission is wired to the
clients (which tests/launch/test_submission.py tests up to the wire)."""

from __future__ import annotations

import json

import pytest
from google.auth.credentials import AnonymousCredentials

import kubeflow_runner as kr
from rehearsal.session import RehearsalOptions
from tests.support import cloud
from tests.support.standin_server import StandInServer, kfp_routes, vertex_routes

pytestmark = pytest.mark.usefixtures("loopback_only")


def test_compiles_to_the_output_file_what_the_compiler_compiles(compiled_job, tmp_path, capsys):
    _, job = compiled_job
    output = tmp_path / "job.json"
    assert kr.main([*cloud.CLOUD_ARGS, "--output-file", str(output)]) == 0
    written = json.loads(output.read_text())
    assert written["pipelineSpec"]["root"] == job["pipelineSpec"]["root"]
    assert written["pipelineSpec"]["deploymentSpec"] == job["pipelineSpec"]["deploymentSpec"]
    assert written["runtimeConfig"] == job["runtimeConfig"]
    assert f"Compiled taxi-big-tipper for Kubeflow Pipelines v2 / Vertex AI: {output}" in capsys.readouterr().out


def test_missing_kfp_fails_before_compiling(monkeypatch, tmp_path, capsys):
    def missing():
        raise kr.KfpMissingError("The kfp package is not installed")

    monkeypatch.setattr(kr, "require_kfp", missing)
    assert kr.main([*cloud.CLOUD_ARGS, "--output-file", str(tmp_path / "job.json")]) == 2
    assert "kfp package is not installed" in capsys.readouterr().err
    assert not (tmp_path / "job.json").exists()


def test_dataflow_arguments_reach_every_beam_component(tmp_path):
    output = tmp_path / "job.json"
    argv = [
        *cloud.CLOUD_ARGS,
        "--output-file",
        str(output),
        "--dataflow",
        *cloud.PROJECT_ARGS,
        "--dataflow-temp-location",
        "gs://bucket/tmp",
        "--dataflow-max-workers",
        "8",
    ]
    assert kr.main(argv) == 0
    executors = json.loads(output.read_text())["pipelineSpec"]["deploymentSpec"]["executors"]
    transform_args = executors["Transform_executor"]["container"]["args"]
    for expected in (
        "--runner=DataflowRunner",
        f"--project={cloud.PROJECT}",
        f"--region={cloud.REGION}",
        "--temp_location=gs://bucket/tmp",
        "--max_num_workers=8",
        f"--sdk_container_image={cloud.IMAGE}",
    ):
        assert expected in transform_args
    assert not any(a.startswith("--direct_") for a in transform_args)


def test_flink_arguments_reach_every_beam_component(tmp_path):
    output = tmp_path / "job.json"
    argv = [*cloud.CLOUD_ARGS, "--output-file", str(output), "--flink-master", "flink-jobmanager:8081"]
    assert kr.main([*argv, "--flink-parallelism", "4"]) == 0
    executors = json.loads(output.read_text())["pipelineSpec"]["deploymentSpec"]["executors"]
    beam_components = ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator")
    for component in beam_components:
        args = executors[f"{component}_executor"]["container"]["args"]
        for expected in (
            "--runner=FlinkRunner",
            "--flink_master=flink-jobmanager:8081",
            "--parallelism=4",
            "--environment_type=EXTERNAL",
            "--flink_submit_uber_jar",
            f"--sdk_container_image={cloud.IMAGE}",
        ):
            assert expected in args, (component, expected)
        assert not any(a.startswith("--direct_") for a in args)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--dataflow", "--dataflow-temp-location", "gs://b/tmp", "--flink-master", "jm:8081"], "not both"),
        (["--flink-master", "jm:8081", "--flink-job-server-jar", "/tmp/js.jar"], "cannot read this machine's disk"),
        (["--flink-master", "jm:8081"], "needs --flink-parallelism"),
    ],
)
def test_flink_flags_a_compiled_job_cannot_use_are_refused(tmp_path, capsys, flags, named):
    argv = [*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, "--output-file", str(tmp_path / "job.json"), *flags]
    assert kr.main(argv) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "job.json").exists()


def test_endpoint_deployment_swaps_in_the_vertex_pusher(tmp_path):
    output = tmp_path / "job.json"
    argv = [
        *cloud.CLOUD_ARGS,
        "--output-file",
        str(output),
        *cloud.PROJECT_ARGS,
        "--endpoint-name",
        "taxi-endpoint",
    ]
    assert kr.main(argv) == 0
    text = output.read_text()
    assert "components.vertex_pusher.Executor" in text
    assert "taxi-endpoint" in text and "tf2-cpu.2-15" in text


KFP = ["--kfp-host", "https://kfp.example.com", "--dry-run"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--output-root", "/tmp/x", "--data-root", "gs://b/d", "--image", "i"], "--output-root"),
        (["--output-root", "gs://b/o", "--data-root", "data/", "--image", "i"], "--data-root"),
        ([*cloud.CLOUD_ARGS, "--serving-data-root", "requests/"], "--serving-data-root"),
        ([*cloud.CLOUD_ARGS, "--pipeline-name", "Taxi_Pipeline"], "--pipeline-name"),
        ([*cloud.CLOUD_ARGS, "--submit", "--region", cloud.REGION], "--project"),
        ([*cloud.CLOUD_ARGS, "--submit", "--project", cloud.PROJECT], "--region"),
        (
            [*cloud.CLOUD_ARGS, "--dataflow", *cloud.PROJECT_ARGS],
            "--dataflow-temp-location",
        ),
        ([*cloud.CLOUD_ARGS, *KFP, "--tfjob", "--tfjob-workers", "-1"], "--tfjob-workers cannot be negative"),
        ([*cloud.CLOUD_ARGS, "--canary-percent", "10"], "--canary-percent needs an endpoint (--endpoint-name)"),
        ([*cloud.CLOUD_ARGS, "--problem", "/no/such/problem"], "--problem /no/such/problem: No problem spec"),
        ([*cloud.CLOUD_ARGS, "--blessing-threshold", "7"], "--blessing-threshold 7.0"),
        ([*cloud.CLOUD_ARGS, "--kfp-host", "localhost:8888"], "--kfp-host"),
        ([*cloud.CLOUD_ARGS, "--label", "oops"], "--label"),
        ([*cloud.CLOUD_ARGS, "--rehearse", "--submit", *cloud.PROJECT_ARGS], "--rehearse"),
        ([*cloud.CLOUD_ARGS, "--rehearse", "--rehearse-gcs", "data"], "gs://bucket/prefix=LOCAL_DIR"),
        ([*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, "--register-model", "--canary-percent", "20"], "--endpoint-name"),
        ([*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, "--endpoint-name", "e", "--canary-percent", "100"], "1 and 99"),
        ([*cloud.CLOUD_ARGS, "--explanations"], "--register-model"),
        ([*cloud.CLOUD_ARGS, "--register-model", "--region", cloud.REGION], "--project"),
        # An open-source Kubeflow cluster: a root it can reach, its own options only.
        (["--output-root", "/tmp/x", "--data-root", "gs://b/d", "--image", "i", *KFP], "--output-root"),
        ([*cloud.CLOUD_ARGS, "--tfjob"], "add --kfp-host"),
        ([*cloud.CLOUD_ARGS, *KFP, "--tfjob-workers", "2"], "add --tfjob"),
        ([*cloud.CLOUD_ARGS, *KFP, "--tfjob", "--tfjob-parameter-servers", "1"], "at least one worker"),
        ([*cloud.CLOUD_ARGS, *KFP, "--tfjob", "--tfjob-memory", "lots"], "Kubernetes quantity"),
        ([*cloud.CLOUD_ARGS, *KFP, *cloud.PROJECT_ARGS, "--tfjob", "--vertex-training", "gpu"], "--vertex-training"),
    ],
)
def test_bad_settings_fail_before_anything_is_sent_naming_the_flag(argv, flag, capsys):
    assert kr.main(argv) == 2
    assert flag in capsys.readouterr().err


def test_kfp_host_from_the_command_line(tmp_path, capsys):
    with StandInServer(kfp_routes()) as server:
        argv = [*cloud.CLOUD_ARGS, "--output-file", str(tmp_path / "job.json"), "--kfp-host", server.url]
        assert kr.main(argv) == 0
    assert server.find("POST", "/apis/v2beta1/runs")
    assert "runs/details/run-123" in capsys.readouterr().out


@pytest.fixture
def kfp_context(monkeypatch, tmp_path):
    """kfp's client context file and in-cluster token path point into the test's directory."""
    import kfp

    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp-context.json"))
    monkeypatch.setattr(kfp.client, "KF_PIPELINES_SA_TOKEN_PATH", str(tmp_path / "no-projected-token"))
    monkeypatch.delenv("KF_PIPELINES_SA_TOKEN_PATH", raising=False)


def test_kfp_host_of_a_multi_user_kubeflow_from_the_command_line(kfp_context, tmp_path, capsys):
    token_file = tmp_path / "token"
    token_file.write_text("tok-from-the-command-line\n")
    with StandInServer(kfp_routes(multi_user=True)) as server:
        argv = [
            *cloud.CLOUD_ARGS,
            "--output-file",
            str(tmp_path / "job.json"),
            "--kfp-host",
            server.url,
            "--kfp-namespace",
            "team-a",
            "--kfp-token-file",
            str(token_file),
        ]
        assert kr.main(argv) == 0
    (listed,) = server.find("GET", "/apis/v2beta1/experiments")
    assert listed.query["namespace"] == ["team-a"]
    (created,) = server.find("POST", "/apis/v2beta1/experiments")
    assert created.body == {"display_name": "Default", "namespace": "team-a"}
    assert server.find("POST", "/apis/v2beta1/runs")
    assert {r.header("Authorization") for r in server.requests} == {"Bearer tok-from-the-command-line"}
    out = capsys.readouterr()
    assert "runs/details/run-123" in out.out and "tok-from-the-command-line" not in out.out + out.err


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--kfp-namespace", "Team_A"], "--kfp-namespace"),
        (["--kfp-token-file", "{tmp}/missing"], "--kfp-token-file"),
        (["--kfp-token-file", "{tmp}/two-lines"], "--kfp-token-file"),
        (["--kfp-token-file", "{tmp}/two-lines", "--dry-run"], "--kfp-token-file"),
    ],
)
def test_bad_kfp_access_settings_fail_before_compiling_naming_the_flag(kfp_context, tmp_path, capsys, flags, flag):
    (tmp_path / "two-lines").write_text("tok-secret\ntok-secret\n")
    output = tmp_path / "job.json"
    argv = [*cloud.CLOUD_ARGS, "--output-file", str(output), "--kfp-host", "https://kubeflow.example.com/pipeline"]
    assert kr.main([*argv, *(f.format(tmp=tmp_path) for f in flags)]) == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert flag in line and "tok-secret" not in err
    assert not output.exists()


@pytest.mark.parametrize("flag", ["--kfp-namespace", "--kfp-token-file"])
def test_kfp_access_flags_without_kfp_host_fail_naming_the_flag(flag, capsys):
    assert kr.main([*cloud.CLOUD_ARGS, flag, "team-a"]) == 2
    assert f"{flag} is for a Kubeflow endpoint: it needs --kfp-host" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "pool_text"),
    [
        (["--vertex-training", "gpu", "--accelerator-type", "NVIDIA_L4"], '"accelerator_type": "NVIDIA_L4"'),
        (["--vertex-training", "multi-worker", "--training-replicas", "2"], '"replica_count": 1'),
        (["--vertex-training", "parameter-server", "--ps-machine-type", "n2-highmem-8"], '"n2-highmem-8"'),
        (["--vertex-training", "tpu"], '"machine_type": "cloud-tpu"'),
    ],
)
def test_vertex_training_is_compiled_into_the_trainer(tmp_path, flags, pool_text):
    output = tmp_path / "job.json"
    assert (
        kr.main(
            [
                *cloud.CLOUD_ARGS,
                "--output-file",
                str(output),
                *cloud.PROJECT_ARGS,
                *flags,
            ]
        )
        == 0
    )
    executors = json.loads(output.read_text())["pipelineSpec"]["deploymentSpec"]["executors"]
    trainer = json.dumps(executors["Trainer_executor"])
    assert "google_cloud_ai_platform.trainer.executor" in trainer
    job = json.loads(output.read_text())
    custom_config = json.dumps(job["pipelineSpec"]["root"]["dag"]["tasks"]["Trainer"])
    assert pool_text.replace('"', '\\"') in custom_config


def test_parameter_server_training_compiles_the_three_pools_the_strategy_choice_expects(tmp_path):
    from models import strategy as strategy_lib

    output = tmp_path / "job.json"
    flags = ["--vertex-training", "parameter-server", "--training-replicas", "3", "--parameter-servers", "2"]
    assert kr.main([*cloud.CLOUD_ARGS, "--output-file", str(output), *cloud.PROJECT_ARGS, *flags]) == 0
    task = json.loads(output.read_text())["pipelineSpec"]["root"]["dag"]["tasks"]["Trainer"]
    custom_config = json.loads(task["inputs"]["parameters"]["custom_config"]["runtimeValue"]["constant"])
    pools = custom_config["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]
    assert [pool["replica_count"] for pool in pools] == [1, 2, 2]
    assert pools[2]["machine_spec"] == {"machine_type": "n1-highmem-4"}
    # The TF_CONFIG Vertex derives from these pools (chief, worker, ps) selects the strategy.
    cluster = {
        role: [f"{role}-{i}:2222" for i in range(pool["replica_count"])]
        for role, pool in zip(("chief", "worker", "ps"), pools, strict=True)
    }
    tf_config = json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})
    assert strategy_lib.choose_strategy({"TF_CONFIG": tf_config}).kind == strategy_lib.PARAMETER_SERVER


def _compiled_task(tmp_path, flags: list[str], task: str) -> dict:
    output = tmp_path / "job.json"
    assert kr.main([*cloud.CLOUD_ARGS, "--output-file", str(output), *cloud.PROJECT_ARGS, *flags]) == 0
    return json.loads(output.read_text())["pipelineSpec"]["root"]["dag"]["tasks"][task]


def _parameter(task: dict, name: str):
    return task["inputs"]["parameters"][name]["runtimeValue"]["constant"]


def test_tuning_on_vertex_compiles_the_cloud_tuner_with_parallel_trials(tmp_path):
    flags = ["--vertex-training", "gpu", "--accelerator-type", "NVIDIA_L4", "--tune", "--tuning-trials", "6"]
    tuner = _compiled_task(tmp_path, [*flags, "--parallel-trials", "3"], "Tuner")
    config = json.loads(_parameter(tuner, "custom_config"))
    assert config["ai_platform_enable_vertex"] is True and config["ai_platform_vertex_region"] == cloud.REGION
    assert config["max_trials"] == 6
    args = config["ai_platform_tuning_args"]
    assert args["project"] == cloud.PROJECT
    pools = args["job_spec"]["worker_pool_specs"]
    # One machine per parallel trial: the first, and the other two in pool 1.
    assert [pool["replica_count"] for pool in pools] == [1, 2]
    assert {pool["machine_spec"]["accelerator_type"] for pool in pools} == {"NVIDIA_L4"}
    assert config["remote_trials_working_dir"].startswith(cloud.OUTPUT_ROOT)
    assert json.loads(_parameter(tuner, "tune_args")) == {"num_parallel_trials": 3}
    trainer = _compiled_task(tmp_path, flags, "Trainer")
    assert "hyperparameters" in trainer["inputs"]["artifacts"]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--parallel-trials", "2"], "--parallel-trials"),
        (["--tune", "--vertex-training", "tpu"], "--vertex-training tpu"),
        (["--tune", "--tuning-trials", "0"], "--tuning-trials must be at least 1"),
    ],
)
def test_tuning_settings_that_cannot_work_name_the_flag(capsys, flags, named):
    assert kr.main([*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, *flags]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--vertex-training", "gpu", "--accelerator-type", "NVIDIA_TESLA_T5"], "NVIDIA_TESLA_T4"),
        (["--vertex-training", "tpu", "--training-machine-type", "n1-standard-8"], "drop --training-machine-type"),
    ],
)
def test_vertex_training_settings_that_cannot_work_name_the_flag(capsys, flags, named):
    assert kr.main([*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, *flags]) == 2
    err = capsys.readouterr().err
    assert f"error: --vertex-training {flags[1]}: " in err and named in err


def test_submit_dry_run_from_the_command_line_sends_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-file.json"))
    argv = [
        *cloud.CLOUD_ARGS,
        "--output-file",
        str(tmp_path / "job.json"),
        *cloud.PROJECT_ARGS,
        "--submit",
        "--dry-run",
        "--label",
        "team=ml",
    ]
    assert kr.main(argv) == 0  # no credentials exist, and none were looked up
    out = capsys.readouterr().out
    assert "Dry run: Vertex AI PipelineJob taxi-big-tipper-" in out and "not sent" in out


@pytest.fixture
def image_built_here(monkeypatch):
    """The compiled job's image, as if `make image` had built it under that name."""
    from rehearsal import podman

    monkeypatch.setattr(podman, "image_exists", lambda image: image == cloud.IMAGE)


def test_dataflow_is_not_rehearsed_and_says_why(tmp_path, capsys):
    flags = ["--dataflow", "--dataflow-temp-location", f"{cloud.OUTPUT_ROOT}/tmp"]
    argv = [*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, "--rehearse", "--rehearsal-root", str(tmp_path), *flags]
    assert kr.main([*argv, "--output-file", str(tmp_path / "job.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot be rehearsed: its Beam pipeline runs on Dataflow (--dataflow)" in err
    assert "(the job graph, the worker VMs, autoscaling, the staging to GCS) has no stand-in here" in err
    # What is rehearsed instead is named by its test, which exists.
    from pipeline.config import REPO_ROOT

    (named,) = [word.strip("().,") for word in err.split() if word.startswith("(tests/")]
    path, test = named.split("::")
    assert f"\ndef {test}(" in (REPO_ROOT / path).read_text() and "dataflow" in test
    assert not (tmp_path / "logs").exists()  # refused before any task ran


def test_an_endpoint_without_the_serving_environment_is_refused_naming_it(tmp_path, capsys):
    argv = [*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, "--rehearse", "--rehearsal-root", str(tmp_path)]
    missing = str(tmp_path / "no-python")
    flags = ["--endpoint-name", "taxi-endpoint", "--serving-python", missing]
    assert kr.main([*argv, *flags, "--output-file", str(tmp_path / "job.json")]) == 2
    err = capsys.readouterr().err
    assert "(--endpoint-name)" in err and f"no such Python at {missing}" in err and "make serving-env" in err
    assert not (tmp_path / "logs").exists()


def test_a_rehearsal_without_local_data_says_where_it_looked_and_how_to_map_it(image_built_here, tmp_path, capsys):
    argv = [
        *cloud.CLOUD_ARGS,
        "--rehearse",
        "--rehearsal-root",
        str(tmp_path),
        "--output-file",
        str(tmp_path / "j.json"),
    ]
    assert kr.main(argv) == 2
    err = capsys.readouterr().err
    assert (
        f"reads --data-root {cloud.DATA_ROOT} from the stand-in Cloud Storage, whose {tmp_path}/gcs/{cloud.BUCKET}/data"
        in err
    )
    assert f"--rehearse-gcs {cloud.DATA_ROOT}=DIR" in err


def test_the_rehearsal_flags_reach_the_rehearsal(tmp_path, monkeypatch):
    given = []
    monkeypatch.setattr(kr, "rehearse_compiled_job", lambda *args: given.append(args) or 7)
    argv = [
        *cloud.CLOUD_ARGS,
        "--rehearse",
        "--rehearsal-root",
        str(tmp_path),
        "--rehearse-gcs",
        f"{cloud.DATA_ROOT}=data",
        "--no-report",
        "--enable-cache",
        "--output-file",
        str(tmp_path / "j.json"),
    ]
    assert kr.main(argv) == 7  # the rehearsal's exit code is the command's
    ((options, config, job_file),) = given
    assert options == RehearsalOptions(
        root=str(tmp_path),
        gcs_mappings=(f"{cloud.DATA_ROOT}=data",),
        serving_python=kr.DEFAULT_SERVING_PYTHON,
        project=None,
        region=None,
        enable_caching=True,
        report=False,
    )
    assert (config.data_root, job_file) == (cloud.DATA_ROOT, str(tmp_path / "j.json"))


WEEKLY = ["--schedule-cron", "TZ=Europe/Berlin 0 3 * * 1"]


@pytest.fixture
def vertex_standin(monkeypatch):
    """The real Vertex AI client behind --schedule-cron, pointed at a stand-in server; a real
    run would look up its credentials, anonymous ones stand in (a dry run brings its own)."""
    real = kr.schedule_on_vertex
    with StandInServer(vertex_routes(cloud.PROJECT, cloud.REGION, cloud.BUCKET)) as server:

        def pointed(*args, credentials=None, **kwargs):
            return real(*args, api_endpoint=server.url, credentials=credentials or AnonymousCredentials(), **kwargs)

        monkeypatch.setattr(kr, "schedule_on_vertex", pointed)
        yield server


def test_a_schedule_from_the_command_line_carries_the_run_settings(tmp_path, capsys, vertex_standin):
    argv = [
        *cloud.CLOUD_ARGS,
        "--output-file",
        str(tmp_path / "job.json"),
        *cloud.PROJECT_ARGS,
        "--data-pattern",
        "span-{SPAN}/*.csv",
        *WEEKLY,
        "--schedule-start",
        "2099-01-05T04:00+01:00",
        "--schedule-end",
        "2099-06-30T22:00Z",
        "--schedule-max-runs",
        "26",
        "--service-account",
        cloud.SERVICE_ACCOUNT,
        "--network",
        "projects/123/global/networks/ml",
        "--label",
        "team=ml",
        "--enable-cache",
    ]
    assert kr.main(argv) == 0
    (request,) = vertex_standin.requests
    body = request.body
    assert body["displayName"] == "taxi-big-tipper-schedule" and body["cron"] == "TZ=Europe/Berlin 0 3 * * 1"
    assert (body["startTime"], body["endTime"]) == ("2099-01-05T03:00:00Z", "2099-06-30T22:00:00Z")
    assert (int(body["maxConcurrentRunCount"]), int(body["maxRunCount"])) == (1, 26)
    run = body["createPipelineJobRequest"]["pipelineJob"]
    assert run["serviceAccount"] == cloud.SERVICE_ACCOUNT and run["network"] == "projects/123/global/networks/ml"
    assert run["labels"] == {"team": "ml"}
    assert run["runtimeConfig"]["gcsOutputDirectory"] == f"{cloud.OUTPUT_ROOT}/pipelines/taxi-big-tipper"
    spec, compiled = run["pipelineSpec"], json.loads((tmp_path / "job.json").read_text())["pipelineSpec"]
    assert spec["deploymentSpec"] == compiled["deploymentSpec"]
    tasks = spec["root"]["dag"]["tasks"]
    assert tasks.keys() == compiled["root"]["dag"]["tasks"].keys()
    assert {t["cachingOptions"].get("enableCache", False) for t in tasks.values()} == {True}
    out = capsys.readouterr().out
    assert (
        f"Created Vertex AI Pipelines schedule projects/{cloud.PROJECT}/locations/{cloud.REGION}/schedules/1000 "
        "(cron 'TZ=Europe/Berlin 0 3 * * 1', from 2099-01-05T03:00:00Z until 2099-06-30T22:00:00Z, "
        "at most 26 runs, 1 run at a time)"
    ) in out
    assert f"pipelines/schedules/1000?project={cloud.PROJECT}" in out
    assert f"resolves the newest span matching {cloud.DATA_ROOT}/span-{{SPAN}}/*.csv when the run starts" in out
    assert "without recompiling" in out


def test_a_schedule_dry_run_sends_nothing_and_looks_up_no_credentials(tmp_path, capsys, monkeypatch, vertex_standin):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-file.json"))
    argv = [*cloud.CLOUD_ARGS, "--output-file", str(tmp_path / "job.json"), *cloud.PROJECT_ARGS, *WEEKLY, "--dry-run"]
    assert kr.main(argv) == 0
    assert vertex_standin.requests == []
    out = capsys.readouterr().out
    assert (
        "Dry run: Vertex AI schedule taxi-big-tipper-schedule (cron 'TZ=Europe/Berlin 0 3 * * 1', from now, no end, "
        f"1 run at a time) built for {cloud.PROJECT}/{cloud.REGION}, not sent."
    ) in out
    assert f"reads the files matching {cloud.DATA_ROOT}/*.csv as they are when the run starts" in out


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ([*WEEKLY, "--submit"], "--schedule-cron creates a Vertex AI schedule and --submit starts one run now: drop"),
        ([*WEEKLY, "--kfp-host", "https://kfp.example.com"], "drop --kfp-host"),
        ([*WEEKLY, "--rehearse"], "rehearse without --schedule-cron first"),
        ([*WEEKLY, "--data-pattern", "span-{SPAN}/*.csv", "--span", "0"], "drop --span"),
        (["--schedule-cron", "0 3 * *"], "--schedule-cron '0 3 * *' has 4 fields; Vertex AI takes 5"),
        (["--schedule-cron", ""], "--schedule-cron '' has 0 fields"),
        (
            ["--schedule-cron", "TZ=Europe/Berlinn 0 3 * * 1"],
            "'Europe/Berlinn' in 'TZ=Europe/Berlinn 0 3 * * 1' is not",
        ),
        ([*WEEKLY, "--schedule-start", "next monday"], "--schedule-start expects an ISO-8601 date and time"),
        ([*WEEKLY, "--schedule-start", "2099-01-05T03:00"], "--schedule-start '2099-01-05T03:00' has no time zone"),
        (
            [*WEEKLY, "--schedule-start", "2099-02-01T00:00Z", "--schedule-end", "2099-01-01T00:00Z"],
            "--schedule-end 2099-01-01T00:00Z is not after --schedule-start 2099-02-01T00:00Z",
        ),
        ([*WEEKLY, "--schedule-end", "2001-01-01T00:00Z"], "--schedule-end 2001-01-01T00:00Z is in the past"),
        ([*WEEKLY, "--schedule-max-runs", "0"], "--schedule-max-runs must be at least 1"),
        (["--schedule-end", "2099-01-01T00:00Z"], "--schedule-end shapes a Vertex AI schedule: add --schedule-cron"),
        (["--schedule-max-runs", "3", "--submit"], "--schedule-max-runs shapes a Vertex AI schedule"),
    ],
)
def test_schedule_settings_that_cannot_work_name_the_flag_before_compiling(tmp_path, capsys, flags, named):
    output = tmp_path / "job.json"
    assert kr.main([*cloud.CLOUD_ARGS, *cloud.PROJECT_ARGS, "--output-file", str(output), *flags]) == 2
    assert named in capsys.readouterr().err
    assert not output.exists()


def test_a_schedule_needs_the_project_and_region(capsys):
    assert kr.main([*cloud.CLOUD_ARGS, *WEEKLY, "--region", cloud.REGION]) == 2
    assert "--project is required with --schedule-cron" in capsys.readouterr().err
