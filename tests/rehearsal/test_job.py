"""Reading the compiled job: where gs:// objects live and what is uploaded, tasks in an order the DAG allows."""

from __future__ import annotations

import json

import pytest

from rehearsal.job import CompiledJob, GcsFolder, JobError
from tests.support import cloud


def test_gs_paths_live_under_the_folder_by_bucket_and_name(tmp_path):
    gcs = GcsFolder.parse(str(tmp_path / "gcs"), [])
    assert gcs.local("gs://bucket/data/a.csv") == str(tmp_path / "gcs" / "bucket" / "data" / "a.csv")
    assert gcs.local("/already/local") == "/already/local"


def test_uploads_copy_folders_and_files_to_their_gs_prefix(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("x\n1\n")
    (tmp_path / "schema.pbtxt").write_text("feature {}")
    gcs = GcsFolder.parse(
        str(tmp_path / "gcs"),
        [f"{cloud.DATA_ROOT}=" + str(tmp_path / "data"), f"{cloud.CONTRACT}={tmp_path}/schema.pbtxt"],
    )
    gcs.upload()
    assert open(gcs.local(cloud.DATA_ROOT + "/a.csv")).read() == "x\n1\n"
    assert open(gcs.local(cloud.CONTRACT)).read() == "feature {}"


@pytest.mark.parametrize("pair", ["data=/x", "gs://b/data", "gs://b/data=", "gs://=/x"])
def test_a_malformed_upload_is_refused(pair, tmp_path):
    with pytest.raises(JobError, match="gs://bucket/prefix=LOCAL_DIR"):
        GcsFolder.parse(str(tmp_path), [pair])


def test_an_upload_of_nothing_is_refused_naming_it(tmp_path):
    with pytest.raises(JobError, match="no .*missing to upload"):
        GcsFolder.parse(str(tmp_path), [f"gs://b/data={tmp_path}/missing"])


def test_tasks_run_after_their_dependencies_and_the_producers_of_their_inputs(compiled_job):
    path, _ = compiled_job
    job = CompiledJob.load(str(path))
    order = [t.name for t in job.task_order()]
    assert order[0] in ("CsvExampleGen", "Champion") and order[-1] == "Pusher"  # neither has inputs
    for task in job.tasks().values():
        assert all(order.index(u) < order.index(task.name) for u in task.upstream), task.name
    assert order.index("Champion") < order.index("DriftGate") < order.index("Evaluator")
    assert job.pipeline_root == f"{cloud.OUTPUT_ROOT}/pipelines/taxi-big-tipper"
    assert {t.kind for t in job.tasks().values()} == {"container"}


def test_a_cycle_is_reported_with_the_tasks_in_it(compiled_job, tmp_path):
    _, raw = compiled_job
    raw = json.loads(json.dumps(raw))
    raw["pipelineSpec"]["root"]["dag"]["tasks"]["CsvExampleGen"]["dependentTasks"] = ["Pusher"]
    (tmp_path / "job.json").write_text(json.dumps(raw))
    with pytest.raises(JobError, match="cycle among .*CsvExampleGen"):
        CompiledJob.load(str(tmp_path / "job.json")).task_order()


def test_a_file_that_is_not_a_job_is_refused(tmp_path):
    (tmp_path / "spec.json").write_text("{}")
    with pytest.raises(JobError, match="not a compiled pipeline job"):
        CompiledJob.load(str(tmp_path / "spec.json"))
