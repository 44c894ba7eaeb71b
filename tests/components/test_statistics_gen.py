"""StatisticsGen taking the fast ExampleGen's statistics against TFX's StatisticsGen on the
same examples: same files, same artifact properties; TFX's executor wherever it cannot."""

from __future__ import annotations

import dataclasses
import os

import pytest
from tensorflow_data_validation.utils import stats_util
from tfx import v1 as tfx
from tfx.components.statistics_gen import executor as tfx_statistics_executor
from tfx.types import artifact_utils

from components import statistics_gen
from pipeline.pipeline import create_pipeline
from runtime import speedups
from tests.support.harness import node, run_component
from tests.support.statistics import assert_same_statistics


def _split_statistics(statistics) -> dict:
    return {
        split: stats_util.load_stats_binary(
            os.path.join(artifact_utils.get_split_uri([statistics], split), statistics_gen.csv_statistics.FILE_NAME)
        )
        for split in artifact_utils.decode_split_names(statistics.split_names)
    }


@pytest.fixture(scope="module")
def examples(small_config, tmp_path_factory):
    """The fast ExampleGen's output on the sample, statistics kept beside it."""
    example_gen = node(create_pipeline(small_config), "CsvExampleGen")
    return run_component(example_gen, {}, str(tmp_path_factory.mktemp("example-gen")))["examples"][0]


def _both(examples, root, **options):
    channel = tfx.dsl.Channel(type=tfx.types.standard_artifacts.Examples)
    theirs = tfx.components.StatisticsGen(examples=channel, **options)
    ours = statistics_gen.StatisticsGen(examples=channel, **options)
    inputs = {"examples": [examples]}
    return (
        run_component(theirs, inputs, str(root / "tfx"))["statistics"][0],
        run_component(ours, inputs, str(root / "ours"))["statistics"][0],
    )


@pytest.fixture
def computed(monkeypatch) -> list:
    """One entry per run of TFX's own StatisticsGen executor (its Beam pipeline)."""
    runs = []
    tfx_do = tfx_statistics_executor.Executor.Do

    def counted(self, *args):
        runs.append(type(self))
        return tfx_do(self, *args)

    monkeypatch.setattr(tfx_statistics_executor.Executor, "Do", counted)
    return runs


def test_the_kept_statistics_are_statistics_gen_s(examples, tmp_path, computed):
    theirs, ours = _both(examples, tmp_path)
    assert computed == [tfx_statistics_executor.Executor]  # TFX's run only: ours copied
    assert examples.get_string_custom_property(statistics_gen.STATISTICS_PROPERTY) == statistics_gen.STATISTICS_DIR
    expected, actual = _split_statistics(theirs), _split_statistics(ours)
    assert set(actual) == set(expected) == {"train", "eval"}
    for split in expected:
        assert_same_statistics(actual[split], expected[split])
    assert ours.split_names == theirs.split_names
    assert ours.span == theirs.span
    assert ours.mlmd_artifact.custom_properties == theirs.mlmd_artifact.custom_properties


def _assert_same_outputs(theirs, ours) -> None:
    expected, actual = _split_statistics(theirs), _split_statistics(ours)
    assert actual.keys() == expected.keys()
    for split in expected:
        assert_same_statistics(actual[split], expected[split])
    assert ours.split_names == theirs.split_names


def test_an_excluded_split_runs_tfx_executor(examples, tmp_path, computed):
    theirs, ours = _both(examples, tmp_path, exclude_splits=["eval"])
    assert len(computed) == 2
    _assert_same_outputs(theirs, ours)
    assert artifact_utils.decode_split_names(ours.split_names) == ["train"]


def test_statistics_options_run_tfx_executor(examples, tmp_path, computed):
    import tensorflow_data_validation as tfdv

    theirs, ours = _both(examples, tmp_path, stats_options=tfdv.StatsOptions(num_top_values=3))
    assert len(computed) == 2
    _assert_same_outputs(theirs, ours)
    tops = [len(f.string_stats.top_values) for f in _split_statistics(ours)["train"].datasets[0].features]
    assert max(tops) == 3


def test_with_its_parameter_off_the_kept_statistics_are_ignored(examples, tmp_path, computed):
    """Examples a run with the speedups kept statistics beside (a cached ExampleGen, say)
    are read by a StatisticsGen without them as TFX reads them."""
    channel = tfx.dsl.Channel(type=tfx.types.standard_artifacts.Examples)
    plain = statistics_gen.StatisticsGen(examples=channel, with_speedups=False)
    assert plain.exec_properties[speedups.PARAMETER] == 0
    assert statistics_gen.precomputed(examples, ["train", "eval"])
    ours = run_component(plain, {"examples": [examples]}, str(tmp_path))["statistics"][0]
    assert computed == [statistics_gen.Executor]
    assert artifact_utils.decode_split_names(ours.split_names) == ["train", "eval"]


def test_with_the_speedups_off_statistics_gen_computes_them_as_tfx_ships_it(small_config, tmp_path, computed):
    plain_config = dataclasses.replace(small_config, speedups=False)
    example_gen = node(create_pipeline(plain_config), "CsvExampleGen")
    plain = run_component(example_gen, {}, str(tmp_path / "example-gen"))["examples"][0]
    assert not plain.has_custom_property(statistics_gen.STATISTICS_PROPERTY)
    assert not os.path.exists(os.path.join(plain.uri, statistics_gen.STATISTICS_DIR))
    theirs, ours = _both(plain, tmp_path)
    assert len(computed) == 2
    _assert_same_outputs(theirs, ours)
