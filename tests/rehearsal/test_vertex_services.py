"""The compiled job with ``--vertex-training multi-worker`` and ``--endpoint-name``,
rehearsed as users run it (a subprocess of ``kubeflow_runner.py``): TFX's own Vertex
Trainer and Pusher executors, unmodified, submit a custom job to the JobService stand-in,
which trains on two replicas, and deploy the model to an endpoint stand-in. Every
connection the rehearsal's processes make is recorded by strace: none leaves the machine.
Then docs/vertex.md's ``rawPredict`` and ``predict`` examples (the aiplatform client and
plain HTTP) ask the deployed model."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import kubeflow_runner
from pipeline.config import REPO_ROOT
from tests.support.rehearsals import local_uri, rehearsal_argv
from tests.support.runs import SMALL_RUN

PROJECT, REGION, ENDPOINT = "my-project", "us-central1", "taxi-endpoint"
VERTEX = ["--project", PROJECT, "--region", REGION, "--vertex-training", "multi-worker", "--training-replicas", "2"]
STRACE = shutil.which("strace")
# One traced connect(2) or sendto(2) with an address: "1234 connect(5, {sa_family=AF_INET, ...}, 16) = 0".
_ADDRESS = re.compile(r"sa_family=(AF_INET6?)[^}]*?(?:inet_addr\(\"([^\"]+)\"\)|inet_pton\(AF_INET6, \"([^\"]+)\")")


@pytest.fixture(scope="module")
def rehearsed(rehearsal_image, sample_dir, tmp_path_factory):
    """The rehearsal's exit code, output and record, and its root; traced when strace is installed."""
    root = tmp_path_factory.mktemp("vertex_services")
    argv = rehearsal_argv(root, sample_dir, *SMALL_RUN, "--infer-schema", *VERTEX, "--endpoint-name", ENDPOINT)
    command = [sys.executable, "kubeflow_runner.py", *argv]
    if STRACE:
        trace = ["-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,sendto", "-e", "signal=none"]
        command = [STRACE, *trace, "-o", str(root / "connections.trace"), "--", *command]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    (logs,) = (root / "logs").iterdir()
    record = json.loads((logs / "rehearsal.json").read_text())
    return done, record, root


def _tasks(record: dict) -> dict[str, dict]:
    return {t["name"]: t for t in record["tasks"]}


@pytest.mark.slow
def test_the_trainer_ran_as_a_two_replica_custom_job_and_the_pusher_deployed(rehearsed):
    done, record, root = rehearsed
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tasks = _tasks(record)
    assert {t["state"] for t in tasks.values()} == {"SUCCEEDED"}
    trainer_log = (root / "logs" / record["job_id"] / "Trainer.log").read_text()
    # TFX's Vertex client submitted the job and polled it to the end.
    assert "Submitting custom job=" in trainer_log and "successful" in trainer_log
    out = done.stdout
    # The job ends when its primary replica succeeds; a worker still shutting down is stopped then.
    assert re.search(
        r"Vertex AI Training job tfx_\S+: SUCCEEDED, replicas workerpool0-replica-0 \(exit 0\), "
        r"workerpool1-replica-0 \((exit 0|stopped)\)\.",
        out,
    ), out
    # The model came from the replicas: MultiWorkerMirroredStrategy over two workers.
    model_run = local_uri(root, tasks["Trainer"]["outputs"]["model_run"][0]["uri"])
    training = json.loads(open(os.path.join(model_run, "training.json")).read())
    assert training["strategy"] == "MultiWorkerMirroredStrategy" and training["workers"] == 2
    pushed = tasks["Pusher"]["outputs"]["pushed_model"][0]["metadata"]
    assert pushed["pushed"] == 1.0
    assert pushed["pushed_destination"].startswith(f"projects/{PROJECT}/locations/{REGION}/models/")
    assert f"Vertex AI endpoint: {ENDPOINT} (projects/{PROJECT}/locations/{REGION}/endpoints/" in out
    assert "Served model: answered" in out
    # The clients reached Cloud Storage, the token endpoint and Vertex AI through the proxy only.
    hosts = record["connections"]
    assert {"www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com"} <= hosts.keys()
    assert f"{REGION}-aiplatform.googleapis.com" in hosts and record["refused"] == []


@pytest.mark.slow
def test_no_process_of_the_rehearsal_connected_anywhere_but_this_machine(rehearsed):
    done, _, root = rehearsed
    if not STRACE:
        pytest.skip("strace is not installed (make test installs it with apt-get where it can)")
    assert done.returncode == 0
    traced = (root / "connections.trace").read_text().splitlines()
    addresses = [(m[1], m[2] or m[3]) for line in traced if (m := _ADDRESS.search(line))]
    assert len(addresses) > 100  # not vacuous: every task, replica and stand-in connected, over loopback
    assert {address for _, address in addresses} <= {"127.0.0.1", "::1", "::ffff:127.0.0.1"}, [
        line for line in traced if "AF_INET" in line and "127.0.0.1" not in line
    ][:10]


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
def endpoint(rehearsed, tmp_path_factory):
    """The rehearsed model deployed again, by TFX's own Vertex client, to stand-ins that stay
    up for the documented calls; the endpoint's id and the environment that reaches it."""
    from rehearsal.cloud.standins import StandIns

    _, record, root = rehearsed
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
        pushed = _tasks(record)["Pusher"]["outputs"]["pushed_model"][0]["uri"]
        done = subprocess.run([sys.executable, "-c", deploy, pushed], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        (deployment,) = stand_ins.models.deployments()
        yield deployment.endpoint.split("/")[-1], env, record
        # Nothing the documented calls asked for went unanswered (a project lookup did, once).
        assert not [c for c in stand_ins.connections() if c.refused]


@pytest.mark.slow
def test_the_documented_raw_predict_and_predict_examples_get_answers(endpoint, rehearsed, sample_dir):
    import tensorflow_transform as tft

    from rehearsal.serving import instances_from_csv
    from runs.scoring import tf_example
    from tests.support.problems import TAXI

    endpoint_id, env, record = endpoint
    _, _, root = rehearsed
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
    from tests.support.problems import TAXI

    endpoint_id, env, _ = endpoint
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
