"""The shipped pipeline's compiled job, rehearsed through the command line users run, its
tasks reading and writing gs:// through the stand-in Cloud Storage: on the full data to a
pushed model as good as a local run's, against the first rehearsal's blessed model, fully
cached, and stopped by bad data at the gate."""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import sys

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

import kubeflow_runner
from pipeline.config import DEFAULT_PROBLEM_DIR
from rehearsal.runner import RECORD_FILE
from report.run_summary import RunSummary, read_evaluation
from tests.support.problems import TAXI
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv
from tests.support.runs import EXECUTED_COMPONENTS, SMALL_RUN
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS, write_sample

# The data contract beside the data (data/taxi/schema.pbtxt) is imported: ImportSchemaGen runs.
# (SchemaGen in a task's container: the --infer-schema rehearsals of test_kubeflow_rehearsal.py
# and test_vertex_services.py.)
CONTAINER_TASKS = set(EXECUTED_COMPONENTS)


def _argv(root, data_dir, *extra) -> list[str]:
    return rehearsal_argv(root, data_dir, *extra)


def _records(root) -> list[dict]:
    """Each rehearsal's record, oldest first."""
    found = [json.loads(open(p).read()) for p in glob.glob(str(root / "logs" / "*" / RECORD_FILE))]
    return sorted(found, key=lambda r: r["job_id"])


def _tasks(record: dict) -> dict[str, dict]:
    return {t["name"]: t for t in record["tasks"]}


@pytest.fixture(scope="module")
def rehearsals(rehearsal_image, tmp_path_factory):
    """Three rehearsals in one store, caching on, on the full embedded data with its contract
    and the shipped settings: the first (with its run report; what it printed is kept), then
    two unchanged reruns. A rehearsal costs about ten seconds a task whatever the data, so the
    first is also the one compared with the local run on the full data. (A rehearsal that
    trains again against its own first model is in test_two_problems.py.)"""
    root = tmp_path_factory.mktemp("rehearsal")
    codes, printed = [], []
    for extra in (["--report"], ["--no-report"], ["--no-report"]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            codes.append(kubeflow_runner.main(_argv(root, DEFAULT_PROBLEM_DIR, "--enable-cache", *extra)))
        printed.append(out.getvalue())
        sys.stdout.write(printed[-1])  # still shown with a failure
    records = _records(root)
    assert len(records) == 3
    return root, codes, records, printed


@pytest.mark.slow
def test_the_compiled_job_rehearses_to_a_pushed_model(rehearsals):
    root, codes, records, _ = rehearsals
    assert codes == [0, 0, 0]
    first = _tasks(records[0])
    assert {n for n, t in first.items() if t["kind"] == "container"} == CONTAINER_TASKS
    assert all(t["state"] == "SUCCEEDED" for t in first.values())
    pushed = first["Pusher"]["outputs"]["pushed_model"][0]["metadata"]
    assert pushed["pushed"] == 1.0
    # gs:// stays gs://: the tasks wrote through the stand-in Cloud Storage, which keeps
    # gs://BUCKET/NAME at <root>/gcs/BUCKET/NAME.
    assert pushed["pushed_destination"].startswith(f"{BUCKET}/out/serving_model/")
    assert os.path.exists(local_uri(root, pushed["pushed_destination"]) + "/saved_model.pb")
    # Vertex's layout: <pipeline root>/<project>/<job id>/<task>_<id>/<output key>
    examples_uri = first["CsvExampleGen"]["outputs"]["examples"][0]["uri"]
    assert examples_uri.startswith(f"{BUCKET}/out/pipelines/taxi-big-tipper/rehearsal/{records[0]['job_id']}/")
    assert "/CsvExampleGen_" in examples_uri
    assert os.path.isdir(local_uri(root, examples_uri) + "/Split-train")
    # Each task ran in a fresh container: nothing of theirs is left on local disk.
    assert not os.path.exists(root / "containers" / records[0]["job_id"])
    # The driver's span and fingerprint travelled on the artifact to its consumers.
    assert "input_fingerprint" in first["CsvExampleGen"]["outputs"]["examples"][0]["metadata"]
    # The run report, from the rehearsal's own record, under the rehearsal root.
    (report,) = glob.glob(str(root / "report" / "taxi-big-tipper" / records[0]["job_id"] / "index.html"))
    page = open(report).read()
    assert "id='evaluation'" in page and "data-slice='Overall'" in page and 'data-plot="roc"' in page


@pytest.mark.slow
def test_the_served_model_answered_a_vertex_request_in_tensorflow_2_15(rehearsals, sample_dir):
    root, _, records, _ = rehearsals
    assert os.path.exists(kubeflow_runner.DEFAULT_SERVING_PYTHON), "make test installs it (make serving-env)"
    from rehearsal.serving import SERVING_TF_VERSION, check_served_model

    first = _tasks(records[0])
    check = check_served_model(
        local_uri(root, first["Pusher"]["outputs"]["pushed_model"][0]["metadata"]["pushed_destination"]),
        local_uri(root, first["Transform"]["outputs"]["transform_graph"][0]["uri"]),
        str(sample_dir / "data.csv"),
        kubeflow_runner.DEFAULT_SERVING_PYTHON,
        TAXI,
    )
    assert check.tensorflow == SERVING_TF_VERSION
    predictions = check.response["predictions"]
    assert len(predictions) == len(check.request["instances"]) == 8
    assert set(check.request["instances"][0]) >= {"fare", "payment_type", "company"}
    assert all(isinstance(v, str) for v in check.request["instances"][0].values())
    assert all(0.0 <= p["probability"][0] <= 1.0 for p in predictions)
    assert check.largest_difference <= 1e-5


@pytest.mark.slow
def test_a_rerun_evaluates_against_the_first_rehearsals_blessed_model(rehearsals):
    _, _, records, _ = rehearsals
    first, second = _tasks(records[0]), _tasks(records[1])
    assert _metadata(first["Evaluator"], "blessing")["baseline_model_uri"] == ""
    first_model = first["Trainer"]["outputs"]["model"][0]
    assert _metadata(first["Evaluator"], "blessing")["blessed"] == 1.0
    # The Champion read the record the first rehearsal's Pusher wrote.
    assert _metadata(second["Champion"], "model")["champion"] == first_model["uri"]
    assert _metadata(second["Evaluator"], "blessing")["baseline_model_uri"] == first_model["uri"]
    assert second["Evaluator"]["inputs"]["model"] == [first_model["name"]]  # the same, cached, Trainer
    assert _metadata(second["Evaluator"], "blessing")["baseline_is_candidate"] == 1.0
    assert {n for n, t in second.items() if t["state"] == "CACHED"} >= {"CsvExampleGen", "Transform", "Trainer"}


CHAMPIONS_TASKS = {"Champion", "DriftGate", "Evaluator", "Pusher"}


@pytest.mark.slow
def test_an_unchanged_rerun_executes_only_the_champions_readers_and_recomputes_nothing(rehearsals):
    root, _, records, _ = rehearsals
    second, third = (_tasks(r) for r in records[1:3])

    def executed(tasks: dict) -> set[str]:
        return {n for n, t in tasks.items() if t["state"] == "SUCCEEDED" and t["kind"] == "container"}

    # The Champion reads the record on every run (its parameter is the run's own id), so its
    # readers run again: the Evaluator copies the evaluation the second rehearsal made of the
    # same model against the same champion, and the Pusher finds that model serving already.
    # The third, an unchanged rerun after an unchanged one, is the steady state.
    assert executed(second) == CHAMPIONS_TASKS
    assert executed(third) == CHAMPIONS_TASKS
    assert {n: t["state"] for n, t in third.items() if n not in CHAMPIONS_TASKS} == dict.fromkeys(
        CONTAINER_TASKS - CHAMPIONS_TASKS, "CACHED"
    )
    assert _metadata(third["Evaluator"], "evaluation")["reused_evaluation_from"]
    assert _metadata(third["Pusher"], "pushed_model")["already_serving"] == 1.0
    assert len(glob.glob(str(root / "gcs" / "rehearsal-test" / "out" / "serving_model" / "*" / "*"))) == 1


def _metadata(task: dict, key: str) -> dict:
    return task["outputs"][key][0]["metadata"]


@pytest.mark.slow
def test_every_executor_input_built_parses_as_kfp_executor_input(rehearsals):
    root, _, _, _ = rehearsals
    files = glob.glob(str(root / "logs" / "*" / "*_input.json"))
    # Every task of the first rehearsal, and at least the Evaluator and Pusher of the second.
    assert len(files) >= len(CONTAINER_TASKS) + 2
    for path in files:
        with open(path) as f:
            proto = json_format.Parse(f.read(), pipeline_spec_pb2.ExecutorInput())  # unknown fields fail
        assert proto.outputs.output_file.endswith("/executor_output.json"), path
        for artifacts in list(proto.inputs.artifacts.values()) + list(proto.outputs.artifacts.values()):
            for artifact in artifacts.artifacts:
                assert "/metadataStores/default/artifacts/" in artifact.name and artifact.uri, path
                assert artifact.type.instance_schema.startswith("title: tfx."), path


@pytest.mark.slow
def test_a_planted_anomaly_stops_the_rehearsal_at_the_gate_naming_it(rehearsals, tmp_path_factory, capsys):
    first_root, _, records, _ = rehearsals
    # A curated schema: the data contract the first rehearsal imported (its closed
    # payment_type domain refuses Bitcoin).
    schema_dir = local_uri(first_root, _tasks(records[0])["ImportSchemaGen"]["outputs"]["schema"][0]["uri"])

    def plant(row, i):
        return {**row, "payment_type": "Bitcoin"} if i % 10 == 0 else row

    bad_dir = write_sample(tmp_path_factory.mktemp("bad"), SAMPLE_ROWS, every=EMBEDDED_ROWS // SAMPLE_ROWS, edit=plant)
    root = tmp_path_factory.mktemp("anomalous")
    capsys.readouterr()
    code = kubeflow_runner.main(
        _argv(
            root,
            bad_dir,
            "--schema-path",
            f"{BUCKET}/schema/schema.pbtxt",
            "--rehearse-gcs",
            f"{BUCKET}/schema={schema_dir}",
            *SMALL_RUN,
        )
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "FAILED at task AnomalyGate" in err and "payment_type" in err and "Bitcoin" in err
    (record,) = _records(root)
    tasks = _tasks(record)
    assert tasks["AnomalyGate"]["state"] == "FAILED" and tasks["AnomalyGate"]["exit_code"] != 0
    assert {n for n, t in tasks.items() if t["state"] == "NOT_RUN"} >= {"Transform", "Trainer", "Evaluator", "Pusher"}
    assert tasks["ImportSchemaGen"]["state"] == "SUCCEEDED"
    logs = root / "logs" / record["job_id"]
    assert {"CsvExampleGen.log", "ExampleValidator.log", "AnomalyGate.log"} <= set(os.listdir(logs))
    assert not glob.glob(str(root / "gcs" / "rehearsal-test" / "out" / "serving_model" / "*" / "*"))


@pytest.mark.slow
def test_on_the_full_data_the_rehearsed_model_scores_as_the_local_run_does(rehearsals, full_local_run):
    """Same data, same code, trained in a task's container rather than in-process: the eval
    AUC agrees within run-to-run noise (training is not bit-for-bit deterministic)."""
    root, _, records, printed = rehearsals
    tasks = _tasks(records[0])
    assert tasks["ImportSchemaGen"]["state"] == "SUCCEEDED"  # the data contract, data/taxi/schema.pbtxt
    rehearsed = RunSummary(run_id="", components=[])
    read_evaluation(rehearsed, local_uri(root, tasks["Evaluator"]["outputs"]["evaluation"][0]["uri"]))
    assert f"auc {rehearsed.metrics['auc']:.4f}" in printed[0]
    assert rehearsed.metrics["example_count"] == full_local_run.metrics["example_count"]
    assert abs(rehearsed.metrics["auc"] - full_local_run.metrics["auc"]) <= 0.01, (rehearsed.metrics, full_local_run)
