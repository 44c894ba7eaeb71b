"""The project's CsvExampleGen: TFX's, plus a rolling window of spans and headers renamed to
the problem's feature names; with its ``speedups`` parameter on (PipelineConfig.speedups),
a faster local executor that also keeps statistics and decoded columns for StatisticsGen
and Transform. Off, or on Dataflow, TFX's own CSV executor writes the examples.

The fast path (``components.csv_encoding``) writes the same rows in the same splits and
files as TFX's executor; docs/performance.md and docs/pipeline.md ("Data in spans") say how.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow as tf
from absl import logging
from tfx.components.example_gen import driver as file_based_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv_executor
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_component, executor_spec
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2, range_config_pb2
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.channel import Channel
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import proto_utils

from components import csv_encoding, csv_statistics, spans, statistics_gen
from runtime import beam_args, beam_pool, decoded_columns, speedups, worker_process_env

CHECKED_ROWS = 1000
# The rolling window (components/spans.py): how many spans, the input pattern as given (the
# driver replaces its span spec by the span it resolved), and the splits that take the older
# spans' rows (comma-separated; the others hold the newest span only).
WINDOW_SPANS_KEY = "window_spans"
SPAN_PATTERN_KEY = "span_pattern"
WINDOW_SPLITS_KEY = "window_splits"
# On the Examples artifact: the spans it holds ("13-16"), beside TFX's `span` (the newest).
WINDOW_PROPERTY = "span_window"
# The problem's header names by feature name, as JSON ({} or absent: the header names the features).
COLUMN_NAMES_KEY = "column_names"
# The run's id, where no driver runs (``CsvExampleGenWithoutDriver``).
RUN_ID_KEY = "run_id"


def check_canonical(
    paths: Sequence[str], types: dict[str, csv_encoding.ColumnType], headers: Mapping[str, str] | None = None
) -> None:
    """Fails loudly unless the encoded bytes of the first ``CHECKED_ROWS`` rows are
    TensorFlow's deterministic serialisation (otherwise rows would not land in the splits
    CsvExampleGen puts them in). Nothing to check when the files have no rows."""
    first = next((block for path in paths for block in csv_encoding.read_blocks(path, headers=headers)), None)
    if first is None:
        return
    records = csv_encoding.encode_block(first.slice(0, CHECKED_ROWS), types)
    if any(tf.train.Example.FromString(r).SerializeToString(deterministic=True) != r for r in records):
        raise RuntimeError(
            "The fast CSV encoder's bytes differ from tf.train.Example's deterministic serialisation "
            "(a tfx_bsl or protobuf change?); use tfx.components.CsvExampleGen."
        )


def default_workers() -> int:
    """One worker process per usable core (at most 8): encoding, hashing and gzip are CPU-bound."""
    return max(1, min(beam_args.usable_cores(), 8))


def _run_workers(jobs: list[dict[str, Any]]) -> list[list[int]]:
    """Runs the ``csv_encoding`` jobs, each in a process of its own: the run's Beam pool's
    when it has one (``runtime.beam_pool``, started by ``Do``: its processes import TFDV once
    for the run), else fresh interpreters (forking a process that runs TensorFlow and gRPC
    threads is unsafe); rows per split of each. If one fails, the others are stopped before
    its error is raised, so none writes on after the failure."""
    pooled = beam_pool.call_each(f"{csv_encoding.__name__}:{csv_encoding.run_job.__name__}", [[job] for job in jobs])
    if pooled is not None:
        return pooled
    env = worker_process_env()
    processes = []
    with tempfile.TemporaryDirectory(prefix="csv-example-gen-") as jobs_dir:
        try:
            for index, job in enumerate(jobs):
                job_path = os.path.join(jobs_dir, f"job-{index}.json")
                with open(job_path, "w") as job_file:
                    json.dump(job, job_file)
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "components.csv_encoding", job_path],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            results = []
            for process in processes:
                out, err = process.communicate()
                lines = out.strip().splitlines()
                if process.returncode != 0 or not lines:
                    raise RuntimeError(f"CSV conversion worker failed (exit {process.returncode}):\n{err[-3000:]}")
                results.append(json.loads(lines[-1]))
            return results
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()


def convert(
    paths: Sequence[str],
    split_dirs: Sequence[str | None],
    buckets: Sequence[int] | None,
    workers: int,
    block_bytes: int = csv_encoding.BLOCK_BYTES,
    types: dict[str, csv_encoding.ColumnType] | None = None,
    prefix: str = csv_encoding.FILE_PREFIX,
    headers: Mapping[str, str] | None = None,
    statistics: Sequence[csv_statistics.SplitStatistics | None] | None = None,
    keep_columns: bool = False,
) -> list[int]:
    """CSV files -> gzipped tf.Example TFRecords in ``split_dirs`` (None: the split's rows
    are counted, not written); rows per split.

    Blocks of ``block_bytes`` are shared out between the workers. Inputs of one block are
    converted in this process: a worker's start-up would cost more than it saves. ``types``
    are inferred from ``paths`` unless given (one window of spans shares one inference).
    ``headers``: the problem's header names by feature name (``csv_encoding.feature_names``).
    ``statistics``: one ``SplitStatistics`` per split (None for none), given every written
    row's columns, by whichever process encodes them. ``keep_columns``: each written file's
    columns are also kept for Transform, beside the split's directory
    (``runtime.decoded_columns``).
    """
    if types is None:
        types = csv_encoding.infer_column_types(paths, headers)
        logging.info("Column types: %s", {n: t.name for n, t in types.items()})
    check_canonical(paths, types, headers)
    columns_dirs = [None if d is None else decoded_columns.columns_dir(d) for d in split_dirs] if keep_columns else None
    for split_dir in [*split_dirs, *(columns_dirs or [])]:
        if split_dir is not None:
            fileio.makedirs(split_dir)
    size = sum(fileio.stat(p).length for p in paths)
    workers = max(1, min(workers, -(-size // block_bytes)))
    if workers == 1:
        return csv_encoding.write_shard(
            paths,
            types,
            split_dirs,
            buckets,
            block_bytes=block_bytes,
            prefix=prefix,
            headers=headers,
            statistics=statistics,
            columns_dirs=columns_dirs,
        )
    with tempfile.TemporaryDirectory(prefix="csv-statistics-") as scratch:
        parts = [os.path.join(scratch, f"shard-{shard}.pickle") for shard in range(workers)] if statistics else None
        jobs = _jobs(paths, types, split_dirs, buckets, workers, block_bytes, prefix, headers, parts, columns_dirs)
        counts = _run_workers(jobs)
        if statistics:
            shards = []
            for part in parts:
                with open(part, "rb") as part_file:
                    shards.append(pickle.load(part_file))
            for i, split in enumerate(statistics):
                if split is not None:
                    split.merge(shard[i] for shard in shards)
    return [sum(c) for c in zip(*counts, strict=True)]


def _jobs(
    paths: Sequence[str],
    types: dict[str, csv_encoding.ColumnType],
    split_dirs: Sequence[str | None],
    buckets: Sequence[int] | None,
    workers: int,
    block_bytes: int,
    prefix: str,
    headers: Mapping[str, str] | None,
    statistics_paths: Sequence[str] | None,
    columns_dirs: Sequence[str | None] | None = None,
) -> list[dict[str, Any]]:
    """One ``csv_encoding`` worker job per shard (JSON: ``csv_encoding.main`` reads it)."""
    return [
        dict(
            paths=list(paths),
            types={n: t.name for n, t in types.items()},
            split_dirs=list(split_dirs),
            buckets=None if buckets is None else [int(b) for b in buckets],
            shard=shard,
            shards=workers,
            block_bytes=block_bytes,
            prefix=prefix,
            headers=dict(headers) if headers else None,
            columns_dirs=columns_dirs,
            **({"statistics_path": statistics_paths[shard]} if statistics_paths else {}),
        )
        for shard in range(workers)
    ]


class NoDataError(ValueError):
    """No data rows reached a split; the message says where they were looked for and why."""


def _glob_csv(pattern: str, headers: Mapping[str, str] | None = None) -> list[str]:
    """The files of one input split; a missing file or a differing header is named."""
    paths = sorted(fileio.glob(pattern))
    if not paths:
        raise NoDataError(
            f"No file matches {pattern}: put the CSV file(s) in {os.path.dirname(pattern)}, or set --data-pattern."
        )
    _check_headers(paths, headers)
    return paths


def _check_headers(paths: Sequence[str], headers: Mapping[str, str] | None = None) -> None:
    """Every file has the first one's columns (one split, or one window of spans), by
    feature name: one file may have the header's names, another the features'."""
    names = csv_encoding.feature_names(paths[0], headers)
    for path in paths[1:]:
        other = csv_encoding.feature_names(path, headers)
        if other != names:
            differ = sorted(set(names) ^ set(other)) or ["the same columns in another order"]
            raise csv_encoding.CsvFileError(
                f"{path} and {paths[0]} have different headers ({', '.join(differ)}): "
                "every CSV file of a split (and of every span of a window) must have one header."
            )


def check_rows(paths: Sequence[str], split_names: Sequence[str], counts: Sequence[int]) -> None:
    """Stops a run with no rows, or with a split left empty, here rather than in Transform."""
    if sum(counts) == 0:
        raise NoDataError(f"{', '.join(paths)}: a header but no data rows. Add rows, or point --data-root at the data.")
    for name, count in zip(split_names, counts, strict=True):
        if count == 0:
            raise NoDataError(
                f"Split '{name}' got none of the {sum(counts)} rows of {', '.join(paths)} "
                f"(rows per split: {dict(zip(split_names, counts, strict=True))}): rows are split by hash, "
                "so a handful of rows can all land in one split. Add rows (a few hundred at least)."
            )


def _headers(exec_properties: dict[str, Any]) -> dict[str, str] | None:
    """The problem's header names by feature name (``COLUMN_NAMES_KEY``), None for none."""
    return json.loads(exec_properties.get(COLUMN_NAMES_KEY) or "{}") or None


def span_of(exec_properties: dict[str, Any]) -> int:
    """The span the driver resolved: a whole number, which a compiled job's pipeline spec
    2.1 hands over as a JSON number (1.0)."""
    return int(exec_properties[example_gen_utils.SPAN_PROPERTY_NAME])


def _older_spans(exec_properties: dict[str, Any], input_base: str) -> list[spans.Span]:
    """The spans of the window before the one the driver resolved (none without a window)."""
    size = exec_properties.get(WINDOW_SPANS_KEY) or 1
    pattern = exec_properties.get(SPAN_PATTERN_KEY)
    if size == 1 or not pattern or not spans.has_spans(pattern):
        return []
    newest = span_of(exec_properties)
    found = spans.window(spans.list_spans(input_base, pattern), newest, size)[:-1]
    logging.info("Window: span %s and the %d before it (%s)", newest, len(found), spans.describe(found))
    for span in found:
        _check_headers([*span.paths], _headers(exec_properties))
    return found


def _add_older_spans(
    older: list[spans.Span],
    exec_properties: dict[str, Any],
    split_names: Sequence[str],
    split_uris: Sequence[str],
    buckets: Sequence[int],
    types: dict[str, csv_encoding.ColumnType],
    counts: list[int],
    statistics: Sequence[csv_statistics.SplitStatistics],
) -> list[int]:
    """Writes the older spans' rows of the window splits (training) beside the newest span's,
    hashed into splits as always, so a row is in the same split whichever run reads it: the
    other splits (evaluation) keep the newest span only, on which the candidate and the
    champion are judged, neither having learnt from it."""
    kept = _window_splits(exec_properties, split_names)
    for span in older:
        dirs = [uri if keep else None for uri, keep in zip(split_uris, kept, strict=True)]
        span_counts = convert(
            span.paths,
            dirs,
            buckets,
            default_workers(),
            types=types,
            prefix=f"span-{span.number}-data_tfrecord",
            headers=_headers(exec_properties),
            statistics=[split if keep else None for split, keep in zip(statistics, kept, strict=True)],
            keep_columns=True,
        )
        check_rows(
            span.paths,
            [n for n, k in zip(split_names, kept, strict=True) if k],
            [c for c, k in zip(span_counts, kept, strict=True) if k],
        )
        counts = [c + (s if keep else 0) for c, s, keep in zip(counts, span_counts, kept, strict=True)]
    return counts


def renamed(example: tf.train.Example, renames: Mapping[str, str]) -> tf.train.Example:
    """A copy of ``example`` with the features ``renames`` names (header -> feature name)
    renamed (Beam's elements are not to be changed in place)."""
    copy = tf.train.Example()
    features = copy.features.feature
    for name, feature in example.features.feature.items():
        features[renames.get(name, name)].CopyFrom(feature)
    return copy


@beam.typehints.with_input_types(beam.Pipeline)
@beam.typehints.with_output_types(tf.train.Example)
class _RenamedCsvToExample(beam.PTransform):
    """TFX's CSV reading (``read``, the transform TFX's executor gives), then each header the
    problem maps renamed to its feature's name (TFX splits the examples afterwards, so a row
    lands where the fast path puts it)."""

    def __init__(self, read: Any, exec_properties: dict[str, Any], split_pattern: str) -> None:
        super().__init__()
        self._read = read(exec_properties, split_pattern)
        self._pattern = os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern)
        self._headers = _headers(exec_properties) or {}

    def expand(self, pipeline: beam.Pipeline) -> beam.pvalue.PCollection:
        files = fileio.glob(self._pattern)
        if files:  # TFX's transform names a pattern matching nothing
            _check_headers(files, self._headers)
        renames = {header: feature for feature, header in self._headers.items() if header != feature}
        return pipeline | "Read" >> self._read | "RenameColumns" >> beam.Map(renamed, renames)


class _GeneratedExamples(beam.PTransform):
    """TFX's examples by split (``generate``: its ``GenerateExamplesByBeam``) for other
    exec properties, under a label of their own."""

    def __init__(self, generate: Any, exec_properties: dict[str, Any]) -> None:
        super().__init__()
        self._generate, self._exec_properties = generate, exec_properties

    def expand(self, begin: beam.pvalue.PBegin) -> dict[str, beam.pvalue.PCollection]:
        return self._generate(begin, self._exec_properties)


def _window_splits(exec_properties: dict[str, Any], split_names: Sequence[str]) -> list[bool]:
    """For each split, whether it takes the older spans' rows (the first split by default)."""
    window_splits = set((exec_properties.get(WINDOW_SPLITS_KEY) or "").split(",")) - {""} or {split_names[0]}
    return [name in window_splits for name in split_names]


def _with_pattern(exec_properties: dict[str, Any], pattern: str) -> dict[str, Any]:
    """``exec_properties`` whose one input split reads ``pattern`` (under the input base)."""
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
    input_config.splits[0].pattern = pattern
    return {**exec_properties, standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(input_config)}


@dataclasses.dataclass(frozen=True)
class _Request:
    """What one execution is asked for, read from its exec properties."""

    input_config: example_gen_pb2.Input
    output_config: example_gen_pb2.Output
    payload: int
    file_format: int
    input_base: str
    headers: dict[str, str] | None

    @classmethod
    def of(cls, exec_properties: dict[str, Any]) -> _Request:
        input_config = example_gen_pb2.Input()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
        output_config = example_gen_pb2.Output()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config)
        return cls(
            input_config=input_config,
            output_config=output_config,
            payload=exec_properties.get(
                standard_component_specs.OUTPUT_DATA_FORMAT_KEY, example_gen_pb2.FORMAT_TF_EXAMPLE
            ),
            file_format=exec_properties.get(
                standard_component_specs.OUTPUT_FILE_FORMAT_KEY, example_gen_pb2.FILE_FORMAT_UNSPECIFIED
            ),
            input_base=exec_properties[standard_component_specs.INPUT_BASE_KEY],
            headers=_headers(exec_properties),
        )

    @property
    def split_names(self) -> list[str]:
        return example_gen_utils.generate_output_split_names(self.input_config, self.output_config)

    def fast_path_covers(self) -> bool:
        """What the fast path writes: tf.Examples in gzipped TFRecords, split by hash or as input."""
        return (
            self.payload == example_gen_pb2.FORMAT_TF_EXAMPLE
            and write_split.to_file_format_str(self.file_format) == "tfrecords_gzip"
            and not self.output_config.split_config.HasField("partition_feature_name")
        )


def _set_window_property(artifact: Any, exec_properties: dict[str, Any], older: list[spans.Span]) -> None:
    """Records the spans the examples hold (``WINDOW_PROPERTY``) when the data is in spans."""
    if spans.has_spans(exec_properties.get(SPAN_PATTERN_KEY) or ""):
        newest = spans.Span(span_of(exec_properties), None, ())
        artifact.set_string_custom_property(WINDOW_PROPERTY, spans.describe([*older, newest]))


class Executor(tfx_csv_executor.Executor):
    """TFX's CSV executor with the rolling window and renamed headers; with the speedups on
    and Beam on this machine, the fast path (see the module doc)."""

    # Whether TFX's Beam path renames headers, and the older spans of its window (set by ``Do``).
    _renaming = False
    _older: list[spans.Span] = []

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
        """TFX's CSV reading, with the problem's headers renamed when it maps any."""
        read = super().GetInputSourceToExamplePTransform()
        return functools.partial(_RenamedCsvToExample, read) if self._renaming else read

    def GenerateExamplesByBeam(
        self, pipeline: beam.Pipeline, exec_properties: dict[str, Any]
    ) -> dict[str, beam.pvalue.PCollection]:
        """TFX's examples by split, the window splits with the older spans' rows added (each
        span read and split by TFX's own code)."""
        splits = super().GenerateExamplesByBeam(pipeline, exec_properties)
        names = list(splits)
        for span in self._older:
            older = pipeline | f"Span[{span.number}]" >> _GeneratedExamples(
                super().GenerateExamplesByBeam, _with_pattern(exec_properties, span.pattern)
            )
            for name, keep in zip(names, _window_splits(exec_properties, names), strict=True):
                if keep:
                    splits[name] = (splits[name], older[name]) | f"Window[{span.number}][{name}]" >> beam.Flatten()
        return splits

    def Do(self, input_dict: dict[str, list], output_dict: dict[str, list], exec_properties: dict[str, Any]) -> None:
        if example_gen_utils.SPAN_PROPERTY_NAME not in exec_properties:
            exec_properties = resolve_span(exec_properties, output_dict)
        request = _Request.of(exec_properties)
        fast = request.fast_path_covers() and speedups.checked_component(
            exec_properties, "fast-csv-example-gen", "statistics-with-the-examples"
        )
        if fast and beam_args.runs_locally(self._beam_pipeline_args or []):
            self._fast_path(request, output_dict, exec_properties)
        else:
            self._tfx_path(request, input_dict, output_dict, exec_properties)

    def _tfx_path(
        self,
        request: _Request,
        input_dict: dict[str, list],
        output_dict: dict[str, list],
        exec_properties: dict[str, Any],
    ) -> None:
        """TFX's own executor (Beam, tfx_bsl's CSV decoder), with the window's older spans."""
        logging.info("Using TFX's Beam executor (speedups off, a non-local runner or an option the fast path lacks).")
        self._renaming = bool(request.headers)
        self._older = _older_spans(exec_properties, request.input_base)
        if self._older:
            pattern = os.path.join(request.input_base, request.input_config.splits[0].pattern)
            newest = _glob_csv(pattern, request.headers)
            _check_headers([newest[0], *(span.paths[0] for span in self._older)], request.headers)
        super().Do(input_dict, output_dict, exec_properties)
        examples = artifact_utils.get_single_instance(output_dict[standard_component_specs.EXAMPLES_KEY])
        _set_window_property(examples, exec_properties, self._older)

    def _fast_path(self, request: _Request, output_dict: dict[str, list], exec_properties: dict[str, Any]) -> None:
        """The examples written by ``convert``, each split's statistics and decoded columns beside them."""
        self._log_startup({}, output_dict, exec_properties)
        pool_size = beam_args.pool_size(self._beam_pipeline_args or [])
        if pool_size:
            # The run's Beam pool, for the components after this one: started now, its
            # processes import their libraries while this one infers the column types, and
            # then take the encoding jobs (``_run_workers``).
            beam_pool.start_in_background(pool_size)
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        artifact = artifact_utils.get_single_instance(examples)
        split_names = request.split_names
        artifact.split_names = artifact_utils.encode_split_names(split_names)
        statistics = [csv_statistics.SplitStatistics() for _ in split_names]
        if request.output_config.split_config.splits:
            counts = _convert_hash_splits(request, examples, exec_properties, statistics)
        else:
            counts = _convert_input_splits(request, examples, statistics)
        logging.info("Examples per split: %s", dict(zip(split_names, counts, strict=True)))
        statistics_gen.keep_statistics(artifact, dict(zip(split_names, statistics, strict=True)))
        # As TFX's executor records them (file format only when one was asked for).
        if standard_component_specs.OUTPUT_DATA_FORMAT_KEY in exec_properties:
            examples_utils.set_payload_format(artifact, request.payload)
        if request.file_format:
            examples_utils.set_file_format(artifact, write_split.to_file_format_str(request.file_format))


def _convert_hash_splits(
    request: _Request,
    examples: list,
    exec_properties: dict[str, Any],
    statistics: list[csv_statistics.SplitStatistics],
) -> list[int]:
    """One input split hashed into the output splits, the window's older spans added; rows per split."""
    split_names, headers = request.split_names, request.headers
    buckets = list(np.cumsum([s.hash_buckets for s in request.output_config.split_config.splits]))
    paths = _glob_csv(os.path.join(request.input_base, request.input_config.splits[0].pattern), headers)
    split_uris = [artifact_utils.get_split_uri(examples, n) for n in split_names]
    older = _older_spans(exec_properties, request.input_base)
    if older:
        _check_headers([paths[0], *(span.paths[0] for span in older)], headers)
    types = csv_encoding.infer_column_types([*paths, *(p for span in older for p in span.paths)], headers)
    logging.info("Column types: %s", {n: t.name for n, t in types.items()})
    counts = convert(
        paths,
        split_uris,
        buckets,
        default_workers(),
        types=types,
        headers=headers,
        statistics=statistics,
        keep_columns=True,
    )
    check_rows(paths, split_names, counts)
    if older:
        counts = _add_older_spans(older, exec_properties, split_names, split_uris, buckets, types, counts, statistics)
    _set_window_property(artifact_utils.get_single_instance(examples), exec_properties, older)
    return counts


def _convert_input_splits(
    request: _Request, examples: list, statistics: list[csv_statistics.SplitStatistics]
) -> list[int]:
    """Each input split into the output split of its name; rows per split."""
    counts: list[int] = []
    for i, (split, name) in enumerate(zip(request.input_config.splits, request.split_names, strict=True)):
        paths = _glob_csv(os.path.join(request.input_base, split.pattern), request.headers)
        counts += convert(
            paths,
            [artifact_utils.get_split_uri(examples, name)],
            None,
            default_workers(),
            headers=request.headers,
            statistics=statistics[i : i + 1],
            keep_columns=True,
        )
        check_rows(paths, [name], counts[-1:])
    return counts


def resolve_span(exec_properties: dict[str, Any], output_dict: dict[str, list]) -> dict[str, Any]:
    """What TFX's ExampleGen driver does before the executor, where no orchestrator ran it
    (the open-source Kubeflow backend runs no driver hooks): TFX's own driver code resolves
    the span, version and input fingerprint and puts the span's files in the split patterns;
    the Examples artifact gets them as the driver gives them."""
    resolved = file_based_driver.FileBasedDriver(None).resolve_exec_properties(dict(exec_properties), None, None)
    artifact = artifact_utils.get_single_instance(output_dict[standard_component_specs.EXAMPLES_KEY])
    file_based_driver.update_output_artifact(resolved, artifact.mlmd_artifact)
    logging.info(
        "Span %s (version %s) resolved here, as TFX's driver does; input fingerprint: %s",
        resolved[example_gen_utils.SPAN_PROPERTY_NAME],
        resolved[example_gen_utils.VERSION_PROPERTY_NAME],
        resolved[example_gen_utils.FINGERPRINT_PROPERTY_NAME],
    )
    return resolved


class CsvExampleGenSpec(standard_component_specs.FileBasedExampleGenSpec):
    """TFX's FileBasedExampleGen spec, the rolling window's parameters, and the run's id
    (``CsvExampleGenWithoutDriver``)."""

    PARAMETERS = {
        **standard_component_specs.FileBasedExampleGenSpec.PARAMETERS,
        WINDOW_SPANS_KEY: ExecutionParameter(type=int, optional=True),
        SPAN_PATTERN_KEY: ExecutionParameter(type=str, optional=True),
        WINDOW_SPLITS_KEY: ExecutionParameter(type=str, optional=True),
        COLUMN_NAMES_KEY: ExecutionParameter(type=str, optional=True),
        RUN_ID_KEY: ExecutionParameter(type=str, optional=True),
        # 1: the fast path where it covers the request, keeping statistics and decoded
        # columns for StatisticsGen and Transform; 0: TFX's executor (runtime/speedups).
        speedups.PARAMETER: ExecutionParameter(type=int, optional=True),
    }


def _spec(
    input_base: str,
    input_config: example_gen_pb2.Input | None = None,
    output_config: example_gen_pb2.Output | None = None,
    range_config: range_config_pb2.RangeConfig | None = None,
    window_spans: int = 1,
    window_splits: Sequence[str] = (),
    column_names: Mapping[str, str] | None = None,
    run_id: str | None = None,
    with_speedups: bool = True,
) -> CsvExampleGenSpec:
    if window_spans < 1:
        raise ValueError(f"window_spans must be at least 1, got {window_spans}")
    input_config = input_config or example_gen_utils.make_default_input_config()
    output_config = output_config or example_gen_utils.make_default_output_config(input_config)
    return CsvExampleGenSpec(
        input_base=input_base,
        input_config=input_config,
        output_config=output_config,
        range_config=range_config,
        output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
        output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
        window_spans=window_spans,
        span_pattern=input_config.splits[0].pattern,
        window_splits=",".join(window_splits),
        column_names=json.dumps(dict(column_names), sort_keys=True) if column_names else None,
        run_id=run_id,
        examples=Channel(type=standard_artifacts.Examples),
        **{speedups.PARAMETER: int(with_speedups)},
    )


class CsvExampleGen(FileBasedExampleGen):
    """Drop-in for ``tfx.components.CsvExampleGen`` (same spec and outputs, faster locally),
    which can also read a rolling window of spans: with ``window_spans`` > 1 and a span
    pattern, the ``window_splits`` also hold the rows of the spans before the one ingested.
    ``column_names``: the problem's header names by feature name (``Problem.header_names``),
    for the headers CsvExampleGen renames; none when every header is its feature's name.
    ``with_speedups``: the fast local path and what it keeps for the components after it
    (``PipelineConfig.speedups``); False: TFX's executor."""

    SPEC_CLASS = CsvExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(
        self,
        input_base: str,
        input_config: example_gen_pb2.Input | None = None,
        output_config: example_gen_pb2.Output | None = None,
        range_config: range_config_pb2.RangeConfig | None = None,
        window_spans: int = 1,
        window_splits: Sequence[str] = (),
        column_names: Mapping[str, str] | None = None,
        with_speedups: bool = True,
    ) -> None:
        spec = _spec(
            input_base,
            input_config,
            output_config,
            range_config,
            window_spans,
            window_splits,
            column_names,
            with_speedups=with_speedups,
        )
        # FileBasedExampleGen's own __init__ builds TFX's spec, without the window.
        base_component.BaseComponent.__init__(self, spec=spec)


class CsvExampleGenWithoutDriver(base_component.BaseComponent):
    """``CsvExampleGen`` for an orchestrator that runs no TFX driver (the open-source Kubeflow
    Pipelines backend): not a FileBasedExampleGen, so no driver hook is compiled; its executor
    resolves the span as TFX's driver would (``resolve_span``). No data fingerprint enters its
    cache key there, so ``run_id`` (the run's own id) keeps a cache from answering with data
    that has changed since: it runs on every run."""

    SPEC_CLASS = CsvExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, input_base: str, run_id: str, **options) -> None:
        """``options``: ``CsvExampleGen``'s arguments."""
        super().__init__(spec=_spec(input_base, run_id=run_id, **options))
