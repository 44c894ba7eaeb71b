"""The image layout the Dockerfile gives every task, staged on this machine."""

from __future__ import annotations

import os
import subprocess

import pytest

from pipeline.config import REPO_ROOT
from pipeline.rehearsal.image import Image
from pipeline.rehearsal.job import JobError


def test_the_projects_dockerfile_copies_its_packages_onto_the_python_path():
    image = Image.from_dockerfile(str(REPO_ROOT / "Dockerfile"))
    assert image.workdir == "/pipeline"
    packages = ("models", "pipeline", "components", "runtime")
    assert {(f"{p}/", f"/pipeline/{p}/") for p in packages} <= set(image.copies)
    assert dict(image.env) == {"TF_USE_LEGACY_KERAS": "1", "PYTHONPATH": "/pipeline"}


def test_a_task_sees_the_images_files_and_variables_and_nothing_of_the_callers(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_OF_THE_SHELL", "1")
    container = Image.from_dockerfile(str(REPO_ROOT / "Dockerfile")).stage(str(REPO_ROOT), str(tmp_path / "image"))
    assert container.workdir == str(tmp_path / "image" / "pipeline")
    assert os.path.exists(os.path.join(container.workdir, "models", "trainer.py"))
    assert not os.path.exists(os.path.join(container.workdir, "tests"))
    code = "import os, models; print(models.__file__); print(os.environ.get('SECRET_OF_THE_SHELL'))"
    out = subprocess.run(
        ["python", "-c", code], cwd=container.workdir, env=container.env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [os.path.join(container.workdir, "models", "__init__.py"), "None"]
    assert container.env["PYTHONPATH"] == container.workdir and container.env["TF_USE_LEGACY_KERAS"] == "1"


def test_a_copy_of_something_missing_fails_naming_it(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\nWORKDIR /app\nCOPY forgotten/ /app/forgotten/\nENV A=1 B=/app\n")
    image = Image.from_dockerfile(str(tmp_path / "Dockerfile"))
    assert dict(image.env) == {"A": "1", "B": "/app"}
    with pytest.raises(JobError, match="copies 'forgotten/'"):
        image.stage(str(tmp_path), str(tmp_path / "image"))


def test_each_fresh_container_has_its_own_files_home_and_temporary_directory(tmp_path):
    image = Image.from_dockerfile(str(REPO_ROOT / "Dockerfile")).stage(str(REPO_ROOT), str(tmp_path / "image"))
    first = image.fresh(str(tmp_path / "first"), {"EXTRA": "1"})
    code = (
        "import os, models\n"
        "open(os.path.join(os.environ['HOME'], 'state.txt'), 'w').write('x')\n"
        "open('left.txt', 'w').write('x')\n"
        "print(os.environ['TMPDIR'], os.environ['EXTRA'], os.environ['PYTHONPATH'])\n"
    )
    out = subprocess.run(
        ["python", "-c", code], cwd=first.workdir, env=first.env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [str(tmp_path / "first" / "tmp"), "1", first.workdir]
    assert first.workdir == str(tmp_path / "first" / "image" / "pipeline")
    assert first.written(image) == ["home/state.txt", "image/pipeline/left.txt"]  # bytecode caches left out
    second = image.fresh(str(tmp_path / "second"))
    assert not os.path.exists(os.path.join(second.workdir, "left.txt"))
    assert os.listdir(second.env["HOME"]) == [] and second.written(image) == []
