"""``python -m runs.score --project ...``: a batch prediction job for the pipeline's
registry model, through the real ``google-cloud-aiplatform`` client and TensorFlow's gs://
file system, against the rehearsal's stand-ins (Cloud Storage over a folder, the Model
Registry, the job run on the deployed model's server in TensorFlow 2.15)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

import kubeflow_runner
from pipeline.config import REPO_ROOT
from rehearsal.cloud.standins import StandIns
from tests.support import tiny_model
from tests.support.problems import SHIPPED, SHIPPED_DIRS

# Every test here scores with a pushed model (the slow ``scored`` fixture).
pytestmark = pytest.mark.slow

PROJECT, REGION = "my-proj", "us-central1"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"

# The tiny model (it reads the taxi columns ``fare`` and ``company``) pushed as the taxi
# pipeline's champion and deployed, then the command as a user runs it.
SCRIPT = """
import json, sys
from components import registry
from runs import score

given = json.loads(sys.argv[1])
model = registry.RegistryModel.of_pipeline(given["project"], given["region"], given["pipeline"], given["root"])
pushed = registry.Push("gs://bucket/pushed/1", given["image"], {"run": "r1"}, "the tiny model")
registry.push(model, pushed, registry.Deployment("taxi-endpoint", "n1-standard-2"))
argv = ["--problem", given["problem"], "--input", "gs://bucket/in/", "--output", "gs://bucket/scored", "--verbose"]
argv += ["--project", given["project"], "--region", given["region"], "--output-root", "gs://bucket/out"]
sys.exit(score.main(argv))
"""


@pytest.fixture(scope="module")
def scored(tmp_path_factory, sample_dir):
    folder = tmp_path_factory.mktemp("vertex_scoring")
    gcs = folder / "gcs"
    tiny_model.save(str(gcs / "bucket" / "pushed" / "1"))
    (source,) = sample_dir.glob("*.csv")
    (gcs / "bucket" / "in").mkdir(parents=True)
    lines = source.read_text().splitlines()[:121]  # a header and 120 rows
    (gcs / "bucket" / "in" / "rows.csv").write_text("\n".join(lines) + "\n")
    taxi = SHIPPED["taxi"]
    given = {
        "project": PROJECT,
        "region": REGION,
        "pipeline": taxi.name,
        "root": f"gs://bucket/out/pipelines/{taxi.name}",
        "image": IMAGE,
        "problem": str(SHIPPED_DIRS["taxi"]),
    }
    with StandIns(str(folder / "cloud"), str(gcs), PROJECT, serving_python=kubeflow_runner.DEFAULT_SERVING_PYTHON) as s:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(folder), **s.environment()}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, json.dumps(given)],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        refused = [c for c in s.connections() if c.refused]
        unimplemented = list(s.models.unimplemented)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    with open(gcs / "bucket" / "scored" / "scored.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(gcs / "bucket" / "in" / "rows.csv", newline="") as f:
        given_rows = list(csv.DictReader(f))
    return done, rows, given_rows, refused, unimplemented, gcs


def test_every_row_comes_back_with_the_models_answer(scored):
    done, rows, given_rows, refused, unimplemented, _ = scored
    assert len(rows) == len(given_rows) == 120
    by_fare = sorted(float(r["fare"] or 0) for r in given_rows)
    assert sorted(float(r["fare"] or 0) for r in rows) == pytest.approx(by_fare)
    for row in rows:
        expected = tiny_model.expected_probability({"fare": row["fare"] or "0", "company": row["company"]})
        assert float(row["probability"]) == pytest.approx(expected, abs=1e-6)
    assert {"predicted_company", "big_tipper"} <= set(rows[0])  # the input has a company column already
    # The columns come back as the file had them, large integers included.
    column = SHIPPED["taxi"].header_of("trip_start_timestamp")
    assert sorted(r[column] for r in rows) == sorted(r[column] for r in given_rows)
    assert "Batch prediction job projects/my-proj/locations/us-central1/batchPredictionJobs/" in done.stdout
    assert not refused and not unimplemented


def test_the_instances_and_the_jobs_own_results_stay_in_the_output_folder(scored):
    *_, gcs = scored
    assert list((gcs / "bucket" / "scored" / "instances").glob("instances-*.jsonl"))
    (results,) = (gcs / "bucket" / "scored" / "predictions").glob("prediction-*/prediction.results-00000-of-00001")
    first = json.loads(results.read_text().splitlines()[0])
    assert set(first) == {"instance", "prediction"} and "b64" in first["instance"]["examples"]
