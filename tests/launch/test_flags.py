"""The flags both runners share, and how they map onto ``PipelineConfig``."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from launch.flag_errors import SettingsError
from launch.flags import FLAG_OF_FIELD, add_pipeline_flags, add_shared_flags, configured, pipeline_config_kwargs
from pipeline.config import PipelineConfig


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_pipeline_flags(parser)
    return parser.parse_args(argv)


def test_no_flags_give_the_configuration_defaults():
    assert PipelineConfig(**pipeline_config_kwargs(_parse([]))) == PipelineConfig()


def test_each_flag_reaches_its_field():
    argv = [
        "--pipeline-name",
        "taxi-dev",
        "--data-pattern",
        "2026-*.csv",
        "--train-steps",
        "120",
        "--epochs",
        "3",
        "--batch-size",
        "64",
        "--blessing-threshold",
        "0.8",
        "--transform-statistics",
        "--transform-tf1-graph",
        "--enable-cache",
        "--accept-drift",
    ]
    config = PipelineConfig(**pipeline_config_kwargs(_parse(argv)))
    defaults = PipelineConfig()
    assert config == dataclasses.replace(
        defaults,
        pipeline_name="taxi-dev",
        data_pattern="2026-*.csv",
        train_steps=120,
        blessing_threshold=0.8,
        transform_statistics=True,
        transform_tf1_graph=True,
        enable_cache=True,
        accept_drift=True,
        hparams=dataclasses.replace(defaults.hparams, epochs=3, per_replica_batch_size=64),
    )


def test_boolean_flags_can_be_turned_off_explicitly():
    args = _parse(["--enable-cache", "--no-enable-cache", "--no-transform-statistics"])
    assert not args.enable_cache and not args.transform_statistics


def test_paths_are_left_to_the_runner():
    """Local paths are made absolute, cloud ones must be gs://: each runner decides."""
    assert not {"data_root", "output_root", "schema_path"} & set(pipeline_config_kwargs(_parse([])))


def test_tune_adds_a_tuner_with_its_trial_budget():
    from pipeline.config import Tuning

    assert pipeline_config_kwargs(_parse([]))["tuning"] is None
    assert pipeline_config_kwargs(_parse(["--tune", "--tuning-trials", "4"]))["tuning"] == Tuning(trials=4)


def test_hparam_sets_any_hyperparameter_from_json_or_text():
    args = _parse(["--batch-size", "64", "--hparam", "wide_numbers=false", "--hparam", "hidden_units=[128,64]"])
    args.hparam.append("strategy=mirrored")
    hparams = pipeline_config_kwargs(args)["hparams"]
    assert hparams == dataclasses.replace(
        PipelineConfig().hparams,
        per_replica_batch_size=64,
        wide_numbers=False,
        hidden_units=(128, 64),
        strategy="mirrored",
    )


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("dropout", "give NAME=VALUE"),
        ("hidden=[8]", r"Unknown Trainer custom_config keys \['hidden'\]"),
        ("dropout=1.5", r"dropout must be in \[0, 1\)"),
    ],
)
def test_a_hparam_that_cannot_work_is_refused_naming_it(given, named):
    with pytest.raises(SettingsError, match=named):
        pipeline_config_kwargs(_parse(["--hparam", given]))


def test_each_field_a_flag_sets_names_that_flag():
    """Every entry of the map names a field of the configuration and a flag of a runner."""
    import kubeflow_runner
    import local_runner
    from pipeline.config import Tuning, VertexEndpoint
    from pipeline.kubeflow_training import TfJob

    fields = {f.name for cls in (PipelineConfig, Tuning, VertexEndpoint, TfJob) for f in dataclasses.fields(cls)}
    assert set(FLAG_OF_FIELD) <= fields
    assert set(FLAG_OF_FIELD.values()) <= _flags_of(local_runner) | _flags_of(kubeflow_runner)


def _flags_of(runner) -> set[str]:
    """The flags a runner's --help lists."""
    import contextlib
    import io
    import re

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        runner.parse_args(["--help"])
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.getvalue()))


def test_a_refused_value_names_the_flag_the_user_typed():
    with pytest.raises(SettingsError, match=r"^--window-spans must be at least 1, got 0$"):
        configured(lambda: PipelineConfig(**pipeline_config_kwargs(_parse(["--window-spans", "0"]))))
    with pytest.raises(SettingsError, match=r"^--tuning-trials must be at least 1"):
        configured(lambda: PipelineConfig(**pipeline_config_kwargs(_parse(["--tune", "--tuning-trials", "0"]))))


def test_adding_some_flags_to_another_command_keeps_their_definition():
    parser = argparse.ArgumentParser()
    add_shared_flags(parser, ("problem", "pipeline_name"))
    args = parser.parse_args(["--pipeline-name", "p"])
    assert vars(args) == {"problem": _parse([]).problem, "pipeline_name": "p"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--window-spans", "2"])


def test_no_speedups_reaches_the_configuration_both_runners_make():
    import kubeflow_runner

    assert PipelineConfig(**pipeline_config_kwargs(_parse([]))).speedups
    assert not PipelineConfig(**pipeline_config_kwargs(_parse(["--no-speedups"]))).speedups
    cloud = ["--output-root", "gs://b/o", "--data-root", "gs://b/d", "--image", "i", "--no-speedups"]
    assert not kubeflow_runner.config_from_args(kubeflow_runner.parse_args(cloud)).speedups


def test_a_tuning_budget_without_tuning_is_refused():
    with pytest.raises(SettingsError, match=r"^--tuning-trials 0 sets the Tuner's budget: add --tune$"):
        pipeline_config_kwargs(_parse(["--tuning-trials", "0"]))
