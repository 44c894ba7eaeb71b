"""Reading the compiled job: gs:// paths mapped, tasks in an order the DAG allows."""

from __future__ import annotations

import json

import pytest

from pipeline.rehearsal.job import CompiledJob, JobError, PathMap
from tests.support import cloud


def test_explicit_prefixes_win_and_other_buckets_go_under_the_default(tmp_path):
    paths = PathMap.parse(str(tmp_path / "gcs"), [f"{cloud.DATA_ROOT}=data", "gs://bucket/data/special=/x"])
    assert paths.local(cloud.DATA_ROOT + "/a.csv").endswith("/data/a.csv")
    assert paths.local("gs://bucket/data/special/b") == "/x/b"
    assert paths.local("gs://bucket/database") == str(tmp_path / "gcs" / "bucket" / "database")
    assert paths.local("gs://other/tfx") == str(tmp_path / "gcs" / "other" / "tfx")
    assert paths.local("/already/local") == "/already/local"


def test_paths_inside_flags_and_json_text_are_mapped(tmp_path):
    paths = PathMap.parse(str(tmp_path), [])
    text = json.dumps({"filesystem": {"base_directory": "gs://b/serving"}})
    assert json.loads(paths.rewrite(text)) == {"filesystem": {"base_directory": f"{tmp_path}/b/serving"}}
    assert paths.rewrite("--temp_location=gs://b/tmp") == f"--temp_location={tmp_path}/b/tmp"


@pytest.mark.parametrize("pair", ["data=/x", "gs://b/data", "gs://b/data="])
def test_a_malformed_mapping_is_refused(pair, tmp_path):
    with pytest.raises(JobError, match="gs://bucket/prefix=LOCAL_DIR"):
        PathMap.parse(str(tmp_path), [pair])


def test_tasks_run_after_their_dependencies_and_the_producers_of_their_inputs(compiled_job):
    path, _ = compiled_job
    job = CompiledJob.load(str(path))
    order = [t.name for t in job.task_order()]
    assert order[0] == "CsvExampleGen" and order[-1] == "Pusher"
    for task in job.tasks().values():
        assert all(order.index(u) < order.index(task.name) for u in task.upstream), task.name
    resolver = "latest_blessed_model_resolver-model-resolver"
    assert order.index("latest_blessed_model_resolver-model-blessing-resolver") < order.index(resolver)
    assert order.index(resolver) < order.index("Evaluator")
    assert job.pipeline_root == f"{cloud.OUTPUT_ROOT}/pipelines/taxi-big-tipper"
    assert {t.kind for t in job.tasks().values()} == {"container", "resolver"}


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
