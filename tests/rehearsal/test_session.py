"""What ``--rehearse`` tells the user and the exit code it ends with, with the job's
execution and the served model's check stood in for (they run for real in
test_rehearsal_end_to_end.py): settings that cannot work, a failing task, a report that
cannot be written, and the served model's three outcomes."""

from __future__ import annotations

import os

import pytest

from pipeline.config import PipelineConfig
from rehearsal import podman, runner, serving
from rehearsal.runner import Rehearsal, TaskRun
from rehearsal.serving import SERVING_TF_VERSION, ServingCheck, ServingError
from rehearsal.session import RehearsalOptions, rehearse_compiled_job, rehearse_serving
from tests.support import cloud
from tests.support.problems import TAXI

CONFIG = PipelineConfig(data_root=cloud.DATA_ROOT, output_root=cloud.OUTPUT_ROOT, schema_path=cloud.CONTRACT)


def _options(root, *gcs_mappings: str, **overrides) -> RehearsalOptions:
    given = {
        "root": str(root),
        "gcs_mappings": gcs_mappings,
        "serving_python": str(root / "no-serving-python"),
        "report": False,
    }
    return RehearsalOptions(**{**given, **overrides})


@pytest.fixture(autouse=True)
def built_images(monkeypatch) -> set[str]:
    """The images podman has, as far as these tests go: the compiled job's."""
    built = {cloud.IMAGE}
    monkeypatch.setattr(podman, "image_exists", lambda image: image in built)
    return built


def test_a_job_whose_image_is_not_built_here_is_refused_naming_how_to_build_it(
    compiled_job, built_images, tmp_path, capsys
):
    built_images.clear()
    job_file, _ = compiled_job
    assert rehearse_compiled_job(_options(tmp_path), CONFIG, str(job_file)) == 2
    err = capsys.readouterr().err
    assert f"runs its tasks in the image {cloud.IMAGE}, which podman does not have here" in err
    assert f"make image IMAGE={cloud.IMAGE}" in err


def test_a_malformed_upload_is_refused_before_the_job_is_read(tmp_path, capsys):
    code = rehearse_compiled_job(_options(tmp_path, "data"), CONFIG, str(tmp_path / "no-job.json"))
    assert code == 2
    assert "error: an upload is gs://bucket/prefix=LOCAL_DIR, got 'data'" in capsys.readouterr().err


def test_without_local_data_it_says_where_it_looked_and_how_to_map_it(compiled_job, tmp_path, capsys):
    job_file, _ = compiled_job
    assert rehearse_compiled_job(_options(tmp_path), CONFIG, str(job_file)) == 2
    err = capsys.readouterr().err
    assert f"from the stand-in Cloud Storage, whose {tmp_path}/gcs/{cloud.BUCKET}/data holds no *.csv" in err
    assert f"--rehearse-gcs {cloud.DATA_ROOT}=DIR" in err


@pytest.fixture
def failing_rehearsal(compiled_job, tmp_path, monkeypatch):
    """The job's execution stood in for: the Trainer fails with exit code 3, the Pusher never runs."""
    job_file, _ = compiled_job
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "data.csv").write_text("fare,tips\n1.0,0\n")
    log = tmp_path / "Trainer.log"
    log.write_text("".join(f"line {i}\n" for i in range(40)))
    given = []

    def rehearse(job, settings):
        given.append((job, settings))
        tasks = [
            TaskRun("CsvExampleGen", "container", "SUCCEEDED", seconds=1.0),
            TaskRun("Trainer", "container", "FAILED", seconds=2.0, exit_code=3, log=str(log)),
            TaskRun("Pusher", "container", "NOT_RUN"),
        ]
        return Rehearsal("taxi-big-tipper-1", "taxi-big-tipper", str(tmp_path / "logs"), tasks)

    monkeypatch.setattr(runner, "rehearse", rehearse)
    return str(job_file), f"{cloud.DATA_ROOT}={data_dir}", log, given


def test_a_failing_task_ends_it_with_its_exit_code_and_log_tail(failing_rehearsal, tmp_path, capsys):
    job_file, mapping, log, given = failing_rehearsal
    options = _options(tmp_path / "root", mapping, enable_caching=True)
    assert rehearse_compiled_job(options, CONFIG, job_file) == 1
    ((job, settings),) = given
    assert job == job_file
    assert settings.root == str(tmp_path / "root") and settings.gcs.folder == str(tmp_path / "root" / "gcs")
    assert (settings.project, settings.region, settings.enable_caching) == ("rehearsal", "local", True)
    out, err = capsys.readouterr()
    assert f"Uploaded {tmp_path}/data to {cloud.DATA_ROOT} (the stand-in Cloud Storage, " in out
    assert (tmp_path / "root" / "gcs" / cloud.BUCKET / "data" / "data.csv").exists()
    assert f"Task logs: {tmp_path}/logs" in out and "Run report" not in out
    assert (
        f"The rehearsal FAILED at task Trainer (exit code 3); nothing downstream ran. Last lines of its log ({log})"
        in err
    )
    assert "line 15\n" in err and "line 14\n" not in err  # the last 25 lines


def test_a_failed_rehearsals_report_names_the_failed_task_and_its_log(failing_rehearsal, tmp_path, capsys):
    import glob

    job_file, mapping, log, _ = failing_rehearsal
    assert rehearse_compiled_job(_options(tmp_path / "root", mapping, report=True), CONFIG, job_file) == 1
    (page,) = glob.glob(str(tmp_path / "root" / "report" / "*" / "*" / "index.html"))
    assert f"Run report: {page}" in capsys.readouterr().out
    verdict = open(page, encoding="utf-8").read().split("<section id='verdict'>")[1].split("</section>")[0]
    assert "The run FAILED at Trainer" in verdict and "task Trainer exited with code 3" in verdict
    assert f"its whole log: <code>{log}</code>" in verdict


def test_a_report_that_cannot_be_written_does_not_hide_the_outcome(failing_rehearsal, tmp_path, capsys, monkeypatch):
    from report import write

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(write, "write_report", broken)
    job_file, mapping, _, _ = failing_rehearsal
    options = _options(tmp_path / "root", mapping, report=True, project="my-proj", region="europe-west4")
    assert rehearse_compiled_job(options, CONFIG, job_file) == 1
    assert "(no run report: OSError: disk full)" in capsys.readouterr().out


def test_without_the_serving_environment_the_served_model_is_not_rehearsed(tmp_path, capsys):
    assert rehearse_serving(str(tmp_path / "python"), "pushed", "graph", "data.csv", TAXI) == 0
    assert capsys.readouterr().out == (
        f"Served model: NOT rehearsed: no TensorFlow {SERVING_TF_VERSION} environment at {tmp_path}/python "
        "(make serving-env installs one; --serving-python points elsewhere).\n"
    )


@pytest.fixture
def serving_python(tmp_path):
    path = tmp_path / "python"
    path.write_text("")
    return str(path)


def test_a_served_model_that_answers_as_serving_default_passes(serving_python, monkeypatch, capsys):
    check = ServingCheck("2.15.1", {"instances": [{}] * 8}, {}, [0.5] * 8, 2e-7)
    monkeypatch.setattr(serving, "check_served_model", lambda *args: check)
    assert rehearse_serving(serving_python, "pushed", "graph", "data.csv", TAXI) == 0
    assert capsys.readouterr().out == (
        'Served model: answered {"instances": [...8 CSV rows...]} through serving_raw in TensorFlow 2.15.1, '
        "as serving_default does (largest difference 2.0e-07).\n"
    )


def test_a_served_model_that_fails_its_check_fails_the_rehearsal(serving_python, monkeypatch, capsys):
    def check(*args):
        raise ServingError("serving_raw and serving_default disagree")

    monkeypatch.setattr(serving, "check_served_model", check)
    assert rehearse_serving(serving_python, "pushed", "graph", "data.csv", TAXI) == 1
    assert "The served model FAILED its rehearsal: serving_raw and serving_default disagree" in capsys.readouterr().err


def test_a_second_rehearsal_on_the_same_root_is_refused_at_once_naming_the_first(compiled_job, tmp_path, capsys):
    from runs.run_lock import hold_lock

    job_file, _ = compiled_job
    root = tmp_path / "root"
    with hold_lock(str(root / "rehearsal.lock"), "a rehearsal", "wait"):
        assert rehearse_compiled_job(_options(root), CONFIG, str(job_file)) == 2
    err = capsys.readouterr().err
    assert f"error: process {os.getpid()} (started " in err and f"is rehearsing in {root}: wait for it" in err
    assert "another --rehearsal-root" in err
    assert not (root / "logs").exists()
