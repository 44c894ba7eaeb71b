"""Each rehearsed task runs as in a fresh Vertex container: what it writes to Cloud Storage
(through the stand-in, with the default credentials Google's client finds) reaches the
next task; what it leaves on local disk does not, and the rehearsal fails saying why."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from pipeline.config import REPO_ROOT, PipelineConfig
from pipeline.rehearsal.session import RehearsalOptions, rehearse_compiled_job

BUCKET = "gs://isolation-test"

WRITER = """
import os
from google.cloud import storage
open(os.path.join(os.environ["HOME"], "state.txt"), "w").write("left on the first container's disk")
storage.Client().bucket("isolation-test").blob("shared/state.txt").upload_from_string("kept in Cloud Storage")
"""
READER = """
import os
from google.cloud import storage
print("gs:// says:", storage.Client().bucket("isolation-test").blob("shared/state.txt").download_as_text())
print("home says:", open(os.path.join(os.environ["HOME"], "state.txt")).read())
"""


def _job(path) -> str:
    """A compiled job of two container tasks, ``writer`` then ``reader``, as Vertex reads one."""

    def task(name: str, after: list[str]) -> dict:
        return {"componentRef": {"name": f"comp-{name}"}, "taskInfo": {"name": name}, "dependentTasks": after}

    def executor(code: str) -> dict:
        return {"container": {"image": "pipeline:test", "command": ["python", "-c", code]}}

    spec = {
        "pipelineInfo": {"name": "isolation"},
        "root": {"dag": {"tasks": {"writer": task("writer", []), "reader": task("reader", ["writer"])}}},
        "components": {f"comp-{n}": {"executorLabel": f"exec-{n}"} for n in ("writer", "reader")},
        "deploymentSpec": {"executors": {"exec-writer": executor(WRITER), "exec-reader": executor(READER)}},
        "schemaVersion": "2.0.0",
    }
    path.write_text(json.dumps({"pipelineSpec": spec, "runtimeConfig": {"gcsOutputDirectory": f"{BUCKET}/root"}}))
    return str(path)


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("isolation")
    (folder / "data").mkdir()
    (folder / "data" / "data.csv").write_text("x\n1\n")
    options = RehearsalOptions(
        root=str(folder / "root"),
        gcs_mappings=(f"{BUCKET}/data={folder / 'data'}",),
        serving_python=str(folder / "no-python"),
        dockerfile=str(REPO_ROOT / "Dockerfile"),
        context_dir=str(REPO_ROOT),
        report=False,
    )
    config = PipelineConfig(data_root=f"{BUCKET}/data", output_root=f"{BUCKET}/out")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = rehearse_compiled_job(options, config, _job(folder / "job.json"))
    (logs,) = (folder / "root" / "logs").iterdir()
    return code, err.getvalue(), logs, folder


def test_what_a_task_writes_to_gs_reaches_the_next_task(rehearsed):
    _, _, logs, folder = rehearsed
    assert "gs:// says: kept in Cloud Storage" in (logs / "reader.log").read_text()
    # The stand-in keeps the object where a person can look at it.
    assert (folder / "root" / "gcs" / "isolation-test" / "shared" / "state.txt").read_text() == "kept in Cloud Storage"


def test_a_file_left_on_local_disk_does_not_and_the_rehearsal_says_why(rehearsed):
    code, err, logs, _ = rehearsed
    assert code == 1
    assert "FileNotFoundError" in (logs / "reader.log").read_text()
    assert "The rehearsal FAILED at task reader" in err
    assert "Its log names files earlier tasks wrote outside gs://: home/state.txt (by writer)" in err
    assert "On Vertex each task runs in a fresh container and only Cloud Storage outlives it" in err
    record = json.loads((logs / "rehearsal.json").read_text())
    assert {t["name"]: t["left_behind"] for t in record["tasks"]}["writer"] == ["home/state.txt"]
