"""The shipped pipeline's compiled job, rehearsed through the command line users run, its
tasks reading and writing gs:// through the stand-in Cloud Storage: on the full data, with
``--vertex-training gpu`` and ``--endpoint-name`` (TFX's own Vertex Trainer and Pusher
executors, unmodified, submit a custom job that trains on one machine, its GPU rehearsed on
the CPU, and deploy the model to an endpoint stand-in), to a model as good as a local run's,
every connection of its processes recorded by strace; then against the first rehearsal's blessed model,
fully cached; stopped by bad data at the gate; and docs/vertex.md's ``rawPredict`` and
``predict`` examples (the aiplatform client and plain HTTP) asking the deployed model."""

from __future__ import annotations

import base64
import contextlib
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

import kubeflow_runner
from pipeline.config import DEFAULT_PROBLEM_DIR, REPO_ROOT
from rehearsal.cloud.standins import VERTEX_STATE_FILE
from rehearsal.runner import RECORD_FILE
from report.run_summary import RunSummary, read_evaluation
from tests.support.problems import TAXI
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv, training_record
from tests.support.runs import EXECUTED_COMPONENTS, SMALL_RUN
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS, write_sample

# The data contract beside the data (data/taxi/schema.pbtxt) is imported: ImportSchemaGen runs.
# (SchemaGen in a task's container: the --infer-schema rehearsals of test_kubeflow_rehearsal.py.)
CONTAINER_TASKS = set(EXECUTED_COMPONENTS)
PROJECT, REGION, ENDPOINT = "my-project", "us-central1", "taxi-endpoint"
# Every rehearsal of the store trains and pushes so: a rerun's Trainer is the first one's, cached.
# One machine: the full data's training in lock-step across replicas on 2 shared cores took
# minutes; a two-replica job is rehearsed on the penguins (test_two_problems.py).
VERTEX = ["--project", PROJECT, "--region", REGION, "--vertex-training", "gpu", "--endpoint-name", ENDPOINT]
STRACE = shutil.which("strace")
# One traced connect(2) or sendto(2) with an address: "1234 connect(5, {sa_family=AF_INET, ...}, 16) = 0".
_ADDRESS = re.compile(r"sa_family=(AF_INET6?)[^}]*?(?:inet_addr\(\"([^\"]+)\"\)|inet_pton\(AF_INET6, \"([^\"]+)\")")
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def _argv(root, data_dir, *extra) -> list[str]:
    return rehearsal_argv(root, data_dir, *extra)


def _rehearse_traced(root, argv: list[str]) -> subprocess.CompletedProcess:
    """``kubeflow_runner.py`` with ``argv``, as users run it; when strace is installed, every
    process it starts traced: their programs, connections and what they send."""
    command = [sys.executable, "kubeflow_runner.py", *argv]
    if STRACE:
        trace = ["-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,sendto,execve", "-e", "signal=none", "-s", "64"]
        command = [STRACE, *trace, "-o", str(root / "connections.trace"), "--", *command]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600)


def _records(root) -> list[dict]:
    """Each rehearsal's record, oldest first."""
    found = [json.loads(open(p).read()) for p in glob.glob(str(root / "logs" / "*" / RECORD_FILE))]
    return sorted(found, key=lambda r: r["job_id"])


def _tasks(record: dict) -> dict[str, dict]:
    return {t["name"]: t for t in record["tasks"]}


@pytest.fixture(scope="module")
def rehearsals(rehearsal_image, tmp_path_factory):
    """Three rehearsals in one store, caching on, on the full embedded data with its contract
    and the shipped settings, training on Vertex AI and deploying to an endpoint: the first
    as users run it, traced (with its run report; what it printed is kept), then two
    unchanged reruns. A rehearsal costs about ten seconds a task whatever the data, so the
    first is also the one compared with the local run on the full data. (A rehearsal that
    trains again against its own first model is in test_two_problems.py.)"""
    root = tmp_path_factory.mktemp("rehearsal")
    argv = _argv(root, DEFAULT_PROBLEM_DIR, "--enable-cache", *VERTEX)
    first = _rehearse_traced(root, [*argv, "--report"])
    sys.stdout.write(first.stdout)  # still shown with a failure
    sys.stderr.write(first.stderr[-5000:])
    codes, printed = [first.returncode], [first.stdout]
    for _ in range(2):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            codes.append(kubeflow_runner.main([*argv, "--no-report"]))
        printed.append(out.getvalue())
        sys.stdout.write(printed[-1])
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
    pushed = first["Pusher"]["outputs"]["pushed_model"][0]
    assert pushed["metadata"]["pushed"] == 1.0
    assert pushed["metadata"]["pushed_destination"].startswith(f"projects/{PROJECT}/locations/{REGION}/models/")
    # gs:// stays gs://: the tasks wrote through the stand-in Cloud Storage, which keeps
    # gs://BUCKET/NAME at <root>/gcs/BUCKET/NAME.
    assert os.path.exists(local_uri(root, pushed["uri"]) + "/saved_model.pb")
    # Vertex's layout: <pipeline root>/<project>/<job id>/<task>_<id>/<output key>
    examples_uri = first["CsvExampleGen"]["outputs"]["examples"][0]["uri"]
    assert examples_uri.startswith(f"{BUCKET}/out/pipelines/taxi-big-tipper/{PROJECT}/{records[0]['job_id']}/")
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
        local_uri(root, first["Pusher"]["outputs"]["pushed_model"][0]["uri"]),
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
    # One model, pushed once: one version in the registry, deployed once.
    state = json.loads((root / "cloud" / VERTEX_STATE_FILE).read_text())
    assert [list(versions) for versions in state["models"].values()] == [["1"]]
    assert [len(endpoint["deployed_models"]) for endpoint in state["endpoints"].values()] == [1]


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


@pytest.mark.slow
def test_the_trainer_ran_as_a_custom_job_and_the_pusher_deployed(rehearsals):
    root, codes, records, printed = rehearsals
    assert codes[0] == 0
    tasks = _tasks(records[0])
    trainer_log = (root / "logs" / records[0]["job_id"] / "Trainer.log").read_text()
    # TFX's Vertex client submitted the job and polled it to the end.
    assert "Submitting custom job=" in trainer_log and "successful" in trainer_log
    out = printed[0]
    job = r"Vertex AI Training job tfx_\S+: SUCCEEDED, replicas workerpool0-replica-0 \(exit 0\)\."
    assert re.search(job, out), out
    assert "  Not rehearsed: workerpool0: 1 x NVIDIA_TESLA_T4 on n1-standard-8 ran on the CPU" in out
    # The model came from the replica: no GPU here, so MirroredStrategy on the CPU.
    training = training_record(root, tasks["Trainer"])
    assert training["strategy"] == "MirroredStrategy" and training["workers"] == 1
    assert f"Vertex AI endpoint: {ENDPOINT} (projects/{PROJECT}/locations/{REGION}/endpoints/" in out
    assert "Served model: answered" in out
    # The clients reached Cloud Storage, the token endpoint and Vertex AI through the proxy only.
    hosts = records[0]["connections"]
    assert {"www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com"} <= hosts.keys()
    assert f"{REGION}-aiplatform.googleapis.com" in hosts and records[0]["refused"] == []


def _elsewhere(traced: list[str]) -> list[str]:
    """Each connection to an address off this machine, with the program its process ran last
    and what that process sent next (a name lookup shows the name asked for)."""
    programs, found = {}, []
    for i, line in enumerate(traced):
        pid = line.split(" ", 1)[0]
        if " execve(" in line:
            programs[pid] = line.split(" execve(", 1)[1].split(",", 1)[0]
        elif (m := _ADDRESS.search(line)) and (m[2] or m[3]) not in LOOPBACK:
            sent = next((later for later in traced[i + 1 :] if later.startswith(f"{pid} ") and "sendto(" in later), "")
            found.append(f"{line}  [program {programs.get(pid, '?')}; then {sent}]")
    return found


@pytest.mark.slow
def test_no_process_of_the_rehearsal_connected_anywhere_but_this_machine(rehearsals):
    root, codes, _, _ = rehearsals
    if not STRACE:
        pytest.skip("strace is not installed (make test installs it with apt-get where it can)")
    assert codes[0] == 0
    traced = (root / "connections.trace").read_text().splitlines()
    addresses = [m[2] or m[3] for line in traced if (m := _ADDRESS.search(line))]
    assert len(addresses) > 100  # not vacuous: every task, replica and stand-in connected, over loopback
    assert _elsewhere(traced) == []


# docs/vertex.md's example, run as written after this prelude sets its names: ``rows`` as the
# CSV has them, ``example`` the first one as the tf.Example serving_default parses.
PRELUDE = """
import base64, json, sys
import tensorflow as tf

given = json.loads(sys.argv[1])
ENDPOINT_ID, PROJECT, REGION, rows = given["endpoint_id"], given["project"], given["region"], given["rows"]
example = tf.train.Example.FromString(base64.b64decode(given["example"]))
"""


def _doc_block(starts_with: str) -> str:
    """The indented code block of docs/vertex.md's "Call the deployed model" that starts with
    ``starts_with``, dedented."""
    lines = (REPO_ROOT / "docs" / "vertex.md").read_text().splitlines()
    section = lines.index("## Call the deployed model")
    start = next(i for i, line in enumerate(lines) if i > section and line.strip().startswith(starts_with))
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block)


@pytest.fixture(scope="module")
def endpoint(rehearsals, tmp_path_factory):
    """The rehearsed model deployed again, by TFX's own Vertex client, to stand-ins that stay
    up for the documented calls; the endpoint's id, the environment that reaches it, and the
    first rehearsal's root and record."""
    from rehearsal.cloud.standins import StandIns

    root, _, records, _ = rehearsals
    folder = tmp_path_factory.mktemp("endpoint")
    stand_ins = StandIns(str(folder), str(root / "gcs"), PROJECT, serving_python=kubeflow_runner.DEFAULT_SERVING_PYTHON)
    with stand_ins:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT), "HOME": str(folder), **stand_ins.environment()}
        deploy = (
            "import sys\n"
            "from tfx.extensions.google_cloud_ai_platform.prediction_clients import VertexPredictionClient\n"
            "VertexPredictionClient().deploy_model(serving_path=sys.argv[1], model_version_name='v1', "
            f"ai_platform_serving_args={{'project_id': '{PROJECT}', 'endpoint_name': '{ENDPOINT}'}}, labels={{}}, "
            f"serving_container_image_uri='image', endpoint_region='{REGION}')"
        )
        pushed = _tasks(records[0])["Pusher"]["outputs"]["pushed_model"][0]["uri"]
        done = subprocess.run([sys.executable, "-c", deploy, pushed], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        (deployment,) = stand_ins.models.deployments()
        yield deployment.endpoint.split("/")[-1], env, root, records[0]
        # Nothing the documented calls asked for went unanswered (a project lookup did, once).
        assert not [c for c in stand_ins.connections() if c.refused]


@pytest.mark.slow
def test_the_documented_raw_predict_and_predict_examples_get_answers(endpoint, sample_dir):
    import tensorflow_transform as tft

    from rehearsal.serving import instances_from_csv
    from runs.scoring import tf_example

    endpoint_id, env, root, record = endpoint
    transform_graph = local_uri(root, _tasks(record)["Transform"]["outputs"]["transform_graph"][0]["uri"])
    rows = instances_from_csv(str(sample_dir / "data.csv"), 8, drop=TAXI.not_served_columns)
    example = tf_example(rows[0], tft.TFTransformOutput(transform_graph).raw_feature_spec())
    given = {
        "endpoint_id": endpoint_id,
        "project": PROJECT,
        "region": REGION,
        "rows": rows,
        "example": base64.b64encode(example).decode(),
    }
    code = PRELUDE + _doc_block("from google.cloud import aiplatform")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(given)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    raw_line, predicted_line = done.stdout.strip().splitlines()[-2:]
    raw = [p["probability"][0] for p in json.loads(raw_line.replace("'", '"'))]
    assert len(raw) == 8 and all(0.0 <= p <= 1.0 for p in raw)
    # serving_default through predict, on the first row: the same answer as serving_raw's.
    (predicted,) = json.loads(predicted_line.replace("'", '"'))
    assert predicted["probability"][0] == pytest.approx(raw[0], abs=1e-5)


@pytest.mark.slow
def test_the_documented_curl_example_gets_an_answer(endpoint, sample_dir):
    from rehearsal.serving import instances_from_csv

    endpoint_id, env, _, _ = endpoint
    command = _doc_block("curl -X POST")
    # The example's placeholders: a token where gcloud would print one, and real rows for "...".
    command = command.replace("$(gcloud auth print-access-token)", "rehearsal-token")
    command = re.sub(r"-d '.*'$", '-d "$BODY"', command, flags=re.MULTILINE)
    rows = instances_from_csv(str(sample_dir / "data.csv"), 3, drop=TAXI.not_served_columns)
    body = json.dumps({"signature_name": "serving_raw", "instances": rows})
    variables = {"REGION": REGION, "PROJECT": PROJECT, "ENDPOINT_ID": endpoint_id, "BODY": body}
    done = subprocess.run(["bash", "-c", command], env={**env, **variables}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    predictions = json.loads(done.stdout)["predictions"]
    assert len(predictions) == 3 and all(0.0 <= p["probability"][0] <= 1.0 for p in predictions)
