from __future__ import annotations

import pytest

from runtime import beam_args


@pytest.mark.parametrize(
    "args, local",
    [
        ([], True),
        (["--direct_running_mode=multi_processing", "--direct_num_workers=2"], True),
        (["--runner=DirectRunner"], True),
        (["--runner=runtime.beam_pool.PooledDirectRunner", "--direct_num_workers=2"], True),
        (["--runner=DataflowRunner", "--project=p"], False),
        (["--runner=DirectRunner", "--runner=FlinkRunner"], False),
        (["--runner", "DataflowRunner"], False),
        (["--runner", "DirectRunner"], True),
    ],
)
def test_only_local_beam_runs_take_the_fast_path(args, local):
    assert beam_args.runs_locally(args) is local


def test_beam_runs_in_process_on_small_data_and_one_process_per_core_on_large(tmp_path, monkeypatch):
    (tmp_path / "a.csv").write_bytes(b"x" * 600)
    (tmp_path / "b.csv").write_bytes(b"x" * 600)
    (tmp_path / "notes.txt").write_bytes(b"x" * 5000)
    monkeypatch.setattr(beam_args, "usable_cores", lambda: 6)
    assert beam_args.workers_for_data(str(tmp_path), "*.csv", min_bytes=1000) == 6  # 1200 bytes of CSV
    assert beam_args.workers_for_data(str(tmp_path), "a.csv", min_bytes=1000) == 1
    assert beam_args.workers_for_data(str(tmp_path), "none*.csv", min_bytes=1000) == 1


def test_pipeline_args_run_in_process_with_one_worker_and_in_processes_with_more():
    assert beam_args.pipeline_args(1) == [
        *beam_args.IN_PROCESS_ARGS,
        "--pickle_library=cloudpickle",
        beam_args.NO_STAGING_ARG,
    ]
    assert beam_args.pipeline_args(3, ("--foo=1",)) == [
        "--runner=runtime.beam_pool.PooledDirectRunner",
        "--direct_num_workers=3",
        "--pickle_library=cloudpickle",
        beam_args.NO_STAGING_ARG,
        "--foo=1",
    ]
    assert beam_args.pipeline_args(3, ("--runner", "FlinkRunner")) == ["--runner", "FlinkRunner"]
    with pytest.raises(ValueError, match="at least 1 worker"):
        beam_args.pipeline_args(0)


@pytest.mark.parametrize("workers", [1, 3])
def test_local_pipelines_pickle_with_cloudpickle_and_remote_ones_with_beams_default(workers):
    from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions

    def library(args) -> str:
        return PipelineOptions(args).view_as(SetupOptions).pickle_library

    assert library(beam_args.pipeline_args(workers)) == "cloudpickle"
    # A user's choice comes after ours, and in Beam the last flag wins.
    assert library(beam_args.pipeline_args(workers, ("--pickle_library=dill",))) == "dill"
    assert library(beam_args.pipeline_args(workers, ("--runner=DataflowRunner",))) == "default"


def test_the_no_staging_arg_names_this_python_and_beam():
    import importlib.metadata
    import sys

    assert beam_args.NO_STAGING_ARG.endswith(
        f"python{sys.version_info.major}.{sys.version_info.minor}_sdk:{importlib.metadata.version('apache-beam')}"
    )


def test_only_several_local_workers_use_the_pool():
    def uses_pool(args) -> bool:
        return beam_args.runner(args) == beam_args.POOLED_RUNNER

    assert uses_pool(beam_args.pipeline_args(2))
    assert not uses_pool(beam_args.pipeline_args(1))
    assert not uses_pool(beam_args.pipeline_args(2, ("--runner=DataflowRunner",)))
    # A later --runner wins, as in Beam: a component's in-process override leaves the pool.
    assert not uses_pool([*beam_args.pipeline_args(2), *beam_args.IN_PROCESS_ARGS])


def test_the_pools_size_is_its_workers_and_none_without_a_pool():
    assert beam_args.pool_size(beam_args.pipeline_args(3)) == 3
    assert beam_args.pool_size(beam_args.pipeline_args(1)) is None
    assert beam_args.pool_size(beam_args.pipeline_args(3, pool=False)) is None
    assert beam_args.pool_size(beam_args.pipeline_args(3, ("--runner=DataflowRunner",))) is None
    assert beam_args.pool_size([*beam_args.pipeline_args(3), *beam_args.IN_PROCESS_ARGS]) is None
