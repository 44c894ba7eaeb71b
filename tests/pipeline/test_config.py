from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from models.problem import PROBLEM_FILE, load
from pipeline.config import DEFAULT_PROBLEM_DIR, ContractError, PipelineConfig
from runtime.beam_args import NO_STAGING_ARG, POOLED_RUNNER


def test_defaults_run_offline_under_the_repository():
    config = PipelineConfig()
    assert not config.data_root.startswith("gs://") and config.data_root.endswith(os.path.join("data", "taxi"))
    assert config.schema_path == os.path.join(config.data_root, "schema.pbtxt")
    assert config.pipeline_name == config.problem.name
    assert config.pipeline_root.startswith(config.output_root)
    assert config.serving_model_dir.startswith(config.output_root)


@pytest.mark.parametrize("name", ["Taxi", "taxi_pipeline", "-taxi", "", "x" * 129])
def test_pipeline_names_vertex_would_reject_are_refused(name):
    with pytest.raises(ValueError, match=r"\[a-z0-9\]\[a-z0-9-\]"):
        PipelineConfig(pipeline_name=name)


@pytest.mark.parametrize("field", ["train_steps", "beam_workers", "train_buckets", "eval_buckets"])
def test_counts_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        PipelineConfig(**{field: 0})


@pytest.mark.parametrize("extra", [("--runner=DataflowRunner", "--project=p"), ("--runner", "DataflowRunner")])
def test_a_runner_given_takes_only_the_extra_args(extra):
    assert PipelineConfig(beam_workers=2, extra_beam_args=extra).beam_pipeline_args == list(extra)


def test_beam_runs_in_process_with_one_worker_and_multiprocess_with_more():
    assert "--direct_running_mode=in_memory" in PipelineConfig().beam_pipeline_args
    args = PipelineConfig(beam_workers=2, extra_beam_args=("--foo=1",)).beam_pipeline_args
    assert args == [
        f"--runner={POOLED_RUNNER}",
        "--direct_num_workers=2",
        "--pickle_library=cloudpickle",
        NO_STAGING_ARG,
        "--foo=1",
    ]


@pytest.mark.parametrize("workers", [1, 2])
def test_local_beam_args_keep_tfx_from_packaging_itself_for_remote_workers(workers, monkeypatch):
    """TFX's own check, as each Beam executor calls it: with these args it must return
    them unchanged rather than build a `tfx_ephemeral` sdist (3.5 s, 52 MB in /tmp)."""
    from tfx.utils import dependency_utils

    def build_ephemeral_package():
        raise AssertionError("TFX would package itself for a DirectRunner run")

    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", build_ephemeral_package)
    args = PipelineConfig(beam_workers=workers).beam_pipeline_args
    assert dependency_utils.make_beam_dependency_flags(args) == args
    # A remote runner still gets the package its workers install.
    with pytest.raises(AssertionError, match="package itself"):
        dependency_utils.make_beam_dependency_flags(
            PipelineConfig(extra_beam_args=("--runner=DataflowRunner",)).beam_pipeline_args
        )


def test_a_transform_with_statistics_runs_in_process_and_only_when_workers_would_start():
    config = PipelineConfig(beam_workers=2, transform_statistics=True)
    assert config.component_beam_args("Transform") == [
        "--runner=DirectRunner",
        "--direct_running_mode=in_memory",
        "--direct_num_workers=1",
    ]
    assert config.component_beam_args("StatisticsGen") == []
    assert PipelineConfig(beam_workers=2).component_beam_args("Transform") == []  # no statistics
    assert PipelineConfig(beam_workers=1, transform_statistics=True).component_beam_args("Transform") == []
    dataflow = PipelineConfig(beam_workers=2, transform_statistics=True, extra_beam_args=("--runner=DataflowRunner",))
    assert dataflow.component_beam_args("Transform") == []


def test_a_problem_without_a_contract_is_refused_until_one_is_drafted(tmp_path):
    shutil.copy(os.path.join(DEFAULT_PROBLEM_DIR, PROBLEM_FILE), tmp_path / PROBLEM_FILE)
    problem = load(str(tmp_path))
    with pytest.raises(ContractError, match=r"has no data contract .*python -m authoring.contract.*--infer-schema"):
        PipelineConfig(problem=problem)
    inferred = PipelineConfig(problem=problem, infer_schema=True)
    assert inferred.schema_path is None and inferred.data_root == str(tmp_path)


def test_another_problem_gets_its_own_name_data_and_contract():
    taxi = PipelineConfig(train_steps=7)
    other = dataclasses.replace(taxi.problem, name="other-problem")
    moved = taxi.for_problem(other)
    assert moved.pipeline_name == "other-problem" and moved.train_steps == 7
    assert (moved.data_root, moved.schema_path) == (other.data_root, other.contract_path)
    assert taxi.for_problem(other, pipeline_name="given").pipeline_name == "given"


def test_the_blessing_is_the_problems_unless_overridden():
    config = PipelineConfig()
    assert config.blessing == config.problem.blessing
    assert PipelineConfig(blessing_threshold=0.5).blessing.threshold == 0.5
    with pytest.raises(ValueError, match="threshold must be in"):
        PipelineConfig(blessing_threshold=2.0)


def test_tuning_trees_is_refused_saying_what_the_tuner_searches():
    from models.problem import ModelFamily
    from pipeline.config import Tuning

    trees = dataclasses.replace(PipelineConfig().problem, model=ModelFamily.TREES)
    PipelineConfig(problem=trees)
    with pytest.raises(ValueError, match=r"tuning searches the network's hyperparameters.*drop --tune"):
        PipelineConfig(problem=trees, tuning=Tuning(trials=2))
