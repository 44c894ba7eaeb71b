"""The open-source Kubeflow Pipelines backend's rules (rehearsal/kubeflow_backend.py, read
from its sources), and every job the project compiles for ``--kfp-host`` held to them."""

from __future__ import annotations

import copy
import json

import pytest

import kubeflow_runner as kr
from components.champion import RUN_ID_PLACEHOLDER
from rehearsal import kubeflow_backend
from tests.support import cloud
from tests.support.problems import SHIPPED_DIRS

pytestmark = pytest.mark.usefixtures("loopback_only")


def _compiled(tmp_path, *flags: str) -> dict:
    output = tmp_path / "job.json"
    argv = [*cloud.CLOUD_ARGS, "--output-file", str(output), *flags]
    args = kr.parse_args(argv)
    kr.validate(args)
    from pipeline.compiler import compile_pipeline

    return compile_pipeline(kr.config_from_args(args), args.image, str(output))


KFP_JOBS = {
    "taxi": [],
    "penguins": ["--problem", str(SHIPPED_DIRS["penguins"])],
    "body mass": ["--problem", str(SHIPPED_DIRS["penguin-body-mass"])],
    "spans": ["--data-pattern", "span-{SPAN}/*.csv", "--window-spans", "3"],
    "serving data": ["--serving-data-root", f"{cloud.DATA_ROOT}/serving"],
    "tuned": ["--tune", "--tuning-trials", "2"],
    "trained in a TFJob": ["--tfjob", "--tfjob-workers", "2", "--tfjob-parameter-servers", "1", "--tfjob-cpu", "4"],
}


@pytest.mark.parametrize("flags", KFP_JOBS.values(), ids=KFP_JOBS.keys())
def test_every_job_compiled_for_kfp_host_runs_there_as_compiled(tmp_path, flags):
    job = _compiled(tmp_path, "--infer-schema", *flags, "--kfp-host", "https://kfp.example.com", "--dry-run")
    assert kubeflow_backend.refusals(job) == []
    # No data fingerprint enters a key there: ExampleGen takes the run's id, as the Champion does.
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    for task in ("CsvExampleGen", "Champion"):
        assert tasks[task]["inputs"]["parameters"]["run_id"]["runtimeValue"]["constant"] == RUN_ID_PLACEHOLDER


def test_the_vertex_job_needs_the_driver_hook_the_open_source_backend_never_runs(compiled_job):
    _, job = compiled_job
    (refusal,) = kubeflow_backend.refusals(job)
    assert "CsvExampleGen" in refusal and "lifecycle hook" in refusal


def _with(job: dict, change) -> dict:
    changed = copy.deepcopy(job)
    change(changed["pipelineSpec"])
    return changed


@pytest.fixture(scope="module")
def kfp_job(tmp_path_factory) -> dict:
    return _compiled(tmp_path_factory.mktemp("kfp"), "--kfp-host", "https://kfp.example.com", "--dry-run")


def test_what_the_backend_does_not_implement_or_read_is_named(kfp_job):
    def resolver(spec):
        spec["deploymentSpec"]["executors"]["exec-x"] = {"resolver": {"outputArtifactQueries": {}}}

    def spec_2_0(spec):
        spec["schemaVersion"] = "2.0.0"
        champion = spec["root"]["dag"]["tasks"]["Champion"]["inputs"]["parameters"]["pipeline_root"]["runtimeValue"]
        champion["constantValue"] = {"stringValue": champion.pop("constant")}

    def partial_placeholder(spec):
        run_id = spec["root"]["dag"]["tasks"]["Champion"]["inputs"]["parameters"]["run_id"]["runtimeValue"]
        run_id["constant"] = f"run-{RUN_ID_PLACEHOLDER}"

    found = {
        name: kubeflow_backend.refusals(_with(kfp_job, change))
        for name, change in (("resolver", resolver), ("2.0", spec_2_0), ("partial", partial_placeholder))
    }
    assert found["resolver"] == [
        "executor exec-x: resolver executors are not implemented (compiler/argocompiler/dag.go)"
    ]
    assert any("pipeline spec 2.0.0" in line for line in found["2.0"])
    assert any("constantValue, which driver/resolve.go does not read" in line for line in found["2.0"])
    assert found["partial"] == [
        f"task Champion: parameter run_id holds {json.dumps(f'run-{RUN_ID_PLACEHOLDER}')[1:-1]!r}, "
        "which reaches the task unsubstituted"
    ]


def test_whole_placeholders_are_filled_in_and_other_text_is_left_alone():
    fill = dict(run_id="uuid-1", run_name="job-1", task_name="Trainer", task_id="42")
    assert kubeflow_backend.substitute(RUN_ID_PLACEHOLDER, **fill) == "uuid-1"
    assert kubeflow_backend.substitute("{{$.pipeline_task_name}}", **fill) == "Trainer"
    assert kubeflow_backend.substitute(f"x{RUN_ID_PLACEHOLDER}", **fill) == f"x{RUN_ID_PLACEHOLDER}"


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--vertex-training", "gpu", *cloud.PROJECT_ARGS], "--vertex-training"),
        (["--endpoint-name", "e", *cloud.PROJECT_ARGS], "--endpoint-name"),
    ],
)
def test_vertex_only_options_are_refused_for_an_open_source_cluster(flags, named, capsys):
    assert kr.main([*cloud.CLOUD_ARGS, *flags, "--kfp-host", "https://kfp.example.com", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert named in err and "open-source Kubeflow cluster" in err


def test_a_tfjob_trainer_carries_the_jobs_settings_and_the_image(tmp_path):
    from components.tfjob import TFJOB_KEY, TfJobTrainer

    job = _compiled(tmp_path, *KFP_JOBS["trained in a TFJob"], "--kfp-host", "https://kfp.example.com", "--dry-run")
    trainer = job["pipelineSpec"]["root"]["dag"]["tasks"]["Trainer"]
    custom_config = json.loads(trainer["inputs"]["parameters"]["custom_config"]["runtimeValue"]["constant"])
    assert custom_config[TFJOB_KEY] == {
        "image": cloud.IMAGE,
        "workers": 2,
        "parameter_servers": 1,
        "cpu": "4",
        "name_prefix": "taxi-big-tipper",
    }
    label = job["pipelineSpec"]["components"][trainer["componentRef"]["name"]]["executorLabel"]
    executor = job["pipelineSpec"]["deploymentSpec"]["executors"][label]
    assert f"{TfJobTrainer.__module__}.Executor" in json.dumps(executor)
