"""The project's StatisticsGen: TFX's, which with its ``speedups`` parameter on copies the
statistics the fast CSV ExampleGen computed beside the examples (``components.csv_statistics``)
instead of decoding every example again; off, or for any other examples or options, TFX's
executor as shipped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from absl import logging
from tfx.components.statistics_gen import executor as tfx_statistics_executor
from tfx.components.statistics_gen.component import StatisticsGen as TfxStatisticsGen
from tfx.components.statistics_gen.executor import DEFAULT_FILE_NAME
from tfx.components.util import examples_utils
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact, artifact_utils, standard_component_specs
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import json_utils, stats_utils

from components import csv_statistics
from runtime import speedups

# On the Examples artifact: the directory (under its URI) holding Split-<name>/FeatureStats.pb.
STATISTICS_PROPERTY = "precomputed_statistics"
STATISTICS_DIR = "_statistics"
# The options under which StatisticsGen computes something else than the defaults.
_OPTIONS = (
    standard_component_specs.STATS_OPTIONS_JSON_KEY,
    standard_component_specs.EXCLUDE_SPLITS_KEY,
    standard_component_specs.SAMPLE_RATE_BY_SPLIT_KEY,
    standard_component_specs.SHARDED_STATS_OUTPUT_KEY,
)


def keep_statistics(examples: artifact.Artifact, statistics: Mapping[str, csv_statistics.SplitStatistics]) -> None:
    """Writes each split's statistics under the examples' URI and records where."""
    for split, split_statistics in statistics.items():
        csv_statistics.write(split_statistics, os.path.join(examples.uri, STATISTICS_DIR, f"Split-{split}"))
    examples.set_string_custom_property(STATISTICS_PROPERTY, STATISTICS_DIR)


def _defaults_only(exec_properties: dict[str, Any]) -> bool:
    """No option that changes what StatisticsGen computes (empty values are TFX's defaults)."""
    for key in _OPTIONS:
        value = exec_properties.get(key)
        if isinstance(value, str):
            value = json_utils.loads(value) if value.strip() else None
        if value:
            return False
    return True


def precomputed(examples: artifact.Artifact, split_names: list[str]) -> dict[str, str] | None:
    """Each split's statistics file kept with ``examples``, or None unless every split has one."""
    custom_splits = examples.has_custom_property(examples_utils.CUSTOM_SPLIT_PATTERN_PROPERTY_NAME)
    if custom_splits or not examples.has_custom_property(STATISTICS_PROPERTY):
        return None
    base = os.path.join(examples.uri, examples.get_string_custom_property(STATISTICS_PROPERTY))
    files = {split: os.path.join(base, f"Split-{split}", csv_statistics.FILE_NAME) for split in split_names}
    return files if all(fileio.exists(path) for path in files.values()) else None


class Executor(tfx_statistics_executor.Executor):
    """TFX's StatisticsGen executor; copies the fast ExampleGen's statistics when it kept them."""

    def Do(self, input_dict: dict[str, list], output_dict: dict[str, list], exec_properties: dict[str, Any]) -> None:
        examples = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
        split_names = artifact_utils.decode_split_names(examples.split_names)
        files = None
        if (
            not input_dict.get(standard_component_specs.SCHEMA_KEY)
            and _defaults_only(exec_properties)
            and speedups.checked_component(exec_properties, "statistics-with-the-examples")
        ):
            files = precomputed(examples, split_names)
        if files is None:
            super().Do(input_dict, output_dict, exec_properties)
            return
        self._log_startup(input_dict, output_dict, exec_properties)
        self._copy(examples, split_names, files, output_dict)

    def _copy(
        self, examples: artifact.Artifact, split_names: list[str], files: dict[str, str], output_dict: dict
    ) -> None:
        """Writes the kept statistics files, and the properties, where TFX's executor would."""
        statistics = artifact_utils.get_single_instance(output_dict[standard_component_specs.STATISTICS_KEY])
        # The properties TFX's executor sets on its output.
        statistics.split_names = artifact_utils.encode_split_names(split_names)
        statistics.span = examples.span
        try:
            link = stats_utils.generate_stats_dashboard_link(statistics)
        except Exception:  # noqa: BLE001 - as TFX: a link is not worth failing the run
            logging.exception("Failed to generate the statistics dashboard link")
            link = ""
        statistics.set_string_custom_property(tfx_statistics_executor.STATS_DASHBOARD_LINK, link)
        statistics.set_json_value_custom_property(
            tfx_statistics_executor.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME,
            json_utils.dumps({split: 1.0 for split in split_names}),
        )
        for split, path in files.items():
            output = os.path.join(artifact_utils.get_split_uri([statistics], split), DEFAULT_FILE_NAME)
            fileio.makedirs(os.path.dirname(output))
            fileio.copy(path, output, overwrite=True)
            logging.info("Statistics for split %s: computed with the examples, copied to %s.", split, output)


class StatisticsGenSpec(standard_component_specs.StatisticsGenSpec):
    """TFX's StatisticsGen spec, and whether to take the statistics ExampleGen kept."""

    PARAMETERS = {
        **standard_component_specs.StatisticsGenSpec.PARAMETERS,
        speedups.PARAMETER: ExecutionParameter(type=int, optional=True),
    }


class StatisticsGen(TfxStatisticsGen):
    """Drop-in for ``tfx.components.StatisticsGen`` (same inputs and outputs), its executor
    taking the statistics the fast CSV ExampleGen kept unless ``with_speedups`` is False."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, *, with_speedups: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.spec = speedups.with_parameter(self.spec, StatisticsGenSpec, with_speedups)
