"""Each rehearsed task runs in a fresh container of the project's image, as on Vertex: what
it writes to Cloud Storage (through the stand-in, with the default credentials Google's
client finds) reaches the next task; what it leaves on local disk does not, and the
rehearsal fails saying why. The container sees the image, not this machine: not the
repository, not this project's local environment's packages."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from pipeline.config import REPO_ROOT, PipelineConfig
from rehearsal.session import RehearsalOptions, rehearse_compiled_job

BUCKET = "gs://isolation-test"

WRITER = """
import os
from google.cloud import storage
open(os.path.join(os.environ["HOME"], "state.txt"), "w").write("left on the first container's disk")
storage.Client().bucket("isolation-test").blob("shared/state.txt").upload_from_string("kept in Cloud Storage")
"""
LOOKER = f"""
import os, sys
repository = os.path.exists({str(REPO_ROOT / "pyproject.toml")!r})
print("repository:", repository, "here:", os.getcwd(), sorted(os.listdir(".")))
print("python:", sys.executable, sys.version_info[:2])
"""
# pytest-xdist is in this project's local environment (the dev group), not in the image.
IMPORTER = "import xdist"
READER = """
import os
from google.cloud import storage
print("gs:// says:", storage.Client().bucket("isolation-test").blob("shared/state.txt").download_as_text())
print("home says:", open(os.path.join(os.environ["HOME"], "state.txt")).read())
"""


def _job(path, image: str, *tasks: tuple[str, str]) -> str:
    """A compiled job of container tasks (name, Python code), each after the one before, as
    Vertex reads one."""

    def task(name: str, after: list[str]) -> dict:
        return {"componentRef": {"name": f"comp-{name}"}, "taskInfo": {"name": name}, "dependentTasks": after}

    def executor(code: str) -> dict:
        return {"container": {"image": image, "command": ["python", "-c", code]}}

    names = [name for name, _ in tasks]
    spec = {
        "pipelineInfo": {"name": "isolation"},
        "root": {"dag": {"tasks": {n: task(n, names[:i][-1:]) for i, n in enumerate(names)}}},
        "components": {f"comp-{n}": {"executorLabel": f"exec-{n}"} for n in names},
        "deploymentSpec": {"executors": {f"exec-{n}": executor(code) for n, code in tasks}},
        "schemaVersion": "2.0.0",
    }
    path.write_text(json.dumps({"pipelineSpec": spec, "runtimeConfig": {"gcsOutputDirectory": f"{BUCKET}/root"}}))
    return str(path)


def _rehearse(folder, image: str, *tasks: tuple[str, str]):
    (folder / "data").mkdir()
    (folder / "data" / "data.csv").write_text("x\n1\n")
    options = RehearsalOptions(
        root=str(folder / "root"),
        gcs_mappings=(f"{BUCKET}/data={folder / 'data'}",),
        serving_python=str(folder / "no-python"),
        report=False,
    )
    config = PipelineConfig(data_root=f"{BUCKET}/data", output_root=f"{BUCKET}/out")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = rehearse_compiled_job(options, config, _job(folder / "job.json", image, *tasks))
    (logs,) = (folder / "root" / "logs").iterdir()
    return code, err.getvalue(), logs, folder


@pytest.fixture(scope="module")
def rehearsed(rehearsal_image, tmp_path_factory):
    tasks = (("looker", LOOKER), ("writer", WRITER), ("reader", READER))
    return _rehearse(tmp_path_factory.mktemp("isolation"), rehearsal_image, *tasks)


def test_a_task_sees_the_image_not_the_repository(rehearsed):
    _, _, logs, _ = rehearsed
    out = (logs / "looker.log").read_text()
    assert "repository: False here: /pipeline ['components', 'models', 'pipeline', 'runtime']" in out
    assert "python: /opt/venv/bin/python (3, 11)" in out


def test_a_dependency_the_image_lacks_fails_the_task_naming_it(rehearsal_image, tmp_path, capsys):
    import xdist  # noqa: F401 - here it imports: the rehearsal must not use this environment

    code, err, logs, _ = _rehearse(tmp_path, rehearsal_image, ("importer", IMPORTER), ("after", "print(1)"))
    assert code == 1
    assert "The rehearsal FAILED at task importer (exit code 1); nothing downstream ran." in err
    assert "ModuleNotFoundError: No module named 'xdist'" in err  # the log's last lines
    record = json.loads((logs / "rehearsal.json").read_text())
    assert [(t["name"], t["state"]) for t in record["tasks"]] == [("importer", "FAILED"), ("after", "NOT_RUN")]


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
    assert "Its log names files earlier tasks wrote outside gs://: /root/state.txt (by writer)" in err
    assert "On Vertex each task runs in a fresh container and only Cloud Storage outlives it" in err
    record = json.loads((logs / "rehearsal.json").read_text())
    assert {t["name"]: t["left_behind"] for t in record["tasks"]}["writer"] == ["/root/state.txt"]
