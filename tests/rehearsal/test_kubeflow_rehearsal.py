"""The job ``--kfp-host`` sends, rehearsed as the open-source Kubeflow Pipelines backend runs
it (``--rehearse-as kubeflow``: no driver hook, no resolver, its placeholders and output
layout): a weak first model, trained in a TFJob with a parameter server
(ParameterServerStrategy), pushed; a better one, trained in a TFJob of a chief and a worker
(MultiWorkerMirroredStrategy), warm-started from it and pushed over it; then a rollback on
the Cloud Storage serving directory, after which the Champion's own lookup, through the
stand-in Cloud Storage, finds the weak model serving again. Each TFJob goes through the
Kubernetes API stand-in (rehearsal/cloud/kubernetes.py), each replica in its own container
of the image with the training operator's TF_CONFIG."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

import kubeflow_runner
from rehearsal.cloud.standins import StandIns
from rehearsal.runner import RECORD_FILE
from tests.support.fresh_python import REPO_ROOT
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv, training_record
from tests.support.runs import SMALL_RUN

PIPELINE_ROOT = f"{BUCKET}/out/pipelines/taxi-big-tipper"
TFJOBS = {
    "MultiWorkerMirroredStrategy": ["--tfjob", "--tfjob-workers", "1"],
    "ParameterServerStrategy": ["--tfjob", "--tfjob-workers", "1", "--tfjob-parameter-servers", "1"],
}
WEAK = ["--train-steps", "1", "--epochs", "1", "--hparam", "learning_rate=1e-6", "--hparam", "min_learning_rate=0"]


def _run(root, sample_dir, *extra) -> dict:
    """One rehearsal as Kubeflow runs it; its record."""
    before = set(glob.glob(str(root / "logs" / "*" / RECORD_FILE)))
    argv = rehearsal_argv(root, sample_dir, *SMALL_RUN, "--infer-schema", "--warm-start", "--rehearse-as", "kubeflow")
    assert kubeflow_runner.main([*argv, *extra]) == 0
    (path,) = set(glob.glob(str(root / "logs" / "*" / RECORD_FILE))) - before
    with open(path) as f:
        return json.load(f)


# What the next run's Champion task would hand on: its own lookup of the record, run against
# the stand-in Cloud Storage after the rollback.
CHAMPION_LOOKUP = (
    "import json, sys\n"
    "from runtime import champion\n"
    "entry, reason = champion.champion_of(sys.argv[1])\n"
    "print(json.dumps({'model': entry and entry.model, 'blessing': entry and entry.blessing, 'reason': reason}))"
)


def _with_storage(root, *argvs: list[str]) -> list[subprocess.CompletedProcess]:
    """Each command, in turn, reaching the runs' gs:// output root through the stand-in Cloud
    Storage, as a user beside the cluster runs it."""
    with StandIns(str(root / "cloud"), str(root / "gcs"), "rehearsal") as stand_ins:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": REPO_ROOT, "HOME": str(root), **stand_ins.environment()}
        return [
            subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600) for argv in argvs
        ]


@pytest.fixture(scope="module")
def runs(rehearsal_image, sample_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("kubeflow")
    weak = _run(root, sample_dir, *WEAK, *TFJOBS["ParameterServerStrategy"])
    better = _run(root, sample_dir, *TFJOBS["MultiWorkerMirroredStrategy"])
    rolled_back, lookup = _with_storage(
        root,
        [sys.executable, "-m", "runs.release", "rollback", "--output-root", f"{BUCKET}/out", "--verbose"],
        [sys.executable, "-c", CHAMPION_LOOKUP, PIPELINE_ROOT],
    )
    return root, weak, better, rolled_back, lookup


def _tasks(record: dict) -> dict[str, dict]:
    return {t["name"]: t for t in record["tasks"]}


def _metadata(task: dict, key: str) -> dict:
    return task["outputs"][key][0]["metadata"]


@pytest.mark.slow
def test_the_job_runs_as_kubeflow_runs_it(runs):
    root, weak, _, _, _ = runs
    tasks = _tasks(weak)
    assert {t["kind"] for t in tasks.values()} == {"container"}
    assert all(t["state"] == "SUCCEEDED" for t in tasks.values())
    # Kubeflow's layout: <pipeline root>/<pipeline name>/<run id>/<task>/<output key>.
    examples = tasks["CsvExampleGen"]["outputs"]["examples"][0]
    assert examples["uri"] == f"{PIPELINE_ROOT}/taxi-big-tipper/{weak['job_id']}/CsvExampleGen/examples"
    # No driver hook ran: ExampleGen resolved its input itself, as TFX's driver would.
    assert not glob.glob(str(root / "logs" / weak["job_id"] / "*.driver_input.json"))
    assert examples["metadata"]["input_fingerprint"]
    # The run's id reached both tasks that take it, filled in.
    for name in ("CsvExampleGen", "Champion"):
        with open(root / "logs" / weak["job_id"] / f"{name}.executor_input.json") as f:
            assert json.load(f)["inputs"]["parameterValues"]["run_id"] == weak["job_id"]


@pytest.mark.slow
def test_the_second_run_compares_with_and_warm_starts_from_the_first_runs_champion(runs):
    root, weak, better, _, _ = runs
    first_model = _tasks(weak)["Trainer"]["outputs"]["model"][0]["uri"]
    tasks = _tasks(better)
    assert _metadata(tasks["Champion"], "model")["champion"] == first_model
    blessing = _metadata(tasks["Evaluator"], "blessing")
    assert blessing["baseline_model_uri"] == first_model and blessing["blessed"] == 1.0
    started = training_record(root, tasks["Trainer"])["warm_start"]
    assert started["base"] == f"{first_model}/Format-Serving" and started["copied"]
    assert _metadata(tasks["Pusher"], "pushed_model")["pushed"] == 1.0


@pytest.mark.slow
def test_a_rollback_between_runs_hands_the_next_run_the_model_that_serves_again(runs):
    """The next run's Champion finds the weak model again: its own lookup, through the
    stand-in Cloud Storage. (That the Evaluator and the Trainer take what the Champion
    hands on is the second run's test above; that a run after a rollback compares with the
    model serving again, end to end: tests/test_local_runner.py's champion-record test.)"""
    root, weak, better, rolled_back, lookup = runs
    assert rolled_back.returncode == 0, rolled_back.stderr[-3000:]
    first_model = _tasks(weak)["Trainer"]["outputs"]["model"][0]["uri"]
    first_blessing = _tasks(weak)["Evaluator"]["outputs"]["blessing"][0]["uri"]
    second_model = _tasks(better)["Trainer"]["outputs"]["model"][0]["uri"]
    assert "now serves version" in rolled_back.stdout and "champion record: the next run compares" in rolled_back.stdout
    assert lookup.returncode == 0, lookup.stderr[-3000:]
    found = json.loads(lookup.stdout.strip().splitlines()[-1])
    assert found == {"model": first_model, "blessing": first_blessing, "reason": ""} and first_model != second_model
    serving = local_uri(root, f"{BUCKET}/out/serving_model/taxi-big-tipper")
    assert os.listdir(serving + ".rolled-back")  # the rolled-back version is kept


def _tfjob(root, job_id: str) -> dict:
    """The TFJob the run's Trainer created, as the Kubernetes API stand-in recorded it."""
    found = []
    for path in glob.glob(str(root / "cloud" / "kubernetes" / "*.tfjob.json")):
        with open(path) as f:
            record = json.load(f)
        with open(root / "logs" / job_id / "Trainer.log") as log:
            if record["name"] in log.read():
                found.append(record)
    (record,) = found
    return record


@pytest.mark.slow
@pytest.mark.parametrize(("run", "strategy"), [(1, "ParameterServerStrategy"), (2, "MultiWorkerMirroredStrategy")])
def test_the_trainer_trains_in_a_tfjob_with_the_operators_tf_config(runs, run, strategy):
    root, record = runs[0], runs[run]
    tfjob = _tfjob(root, record["job_id"])
    assert tfjob["state"] == "Succeeded" and tfjob["namespace"] == "kubeflow-user-example-com"
    types = sorted(r["type"] for r in tfjob["replicas"])
    assert types == (["Chief", "PS", "Worker"] if strategy == "ParameterServerStrategy" else ["Chief", "Worker"])
    for replica in tfjob["replicas"]:
        config = json.loads(replica["tf_config"])
        assert config["task"] == {"type": replica["type"].lower(), "index": 0} and config["environment"] == "cloud"
        assert all(f"{tfjob['name']}-" in a and ".kubeflow-user-example-com.svc:" in a
                   for addresses in config["cluster"].values() for a in addresses)  # fmt: skip
    assert training_record(root, _tasks(record)["Trainer"])["strategy"] == strategy
    assert _metadata(_tasks(record)["Evaluator"], "blessing")["blessed"] == 1.0
