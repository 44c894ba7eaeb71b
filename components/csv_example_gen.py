"""CsvExampleGen with a fast local executor: same inputs, same splits, same output files.

TFX's CsvExampleGen parses every CSV line in Python inside Beam, one row at a time
(docs/performance.md has the figures). When Beam would run on this machine anyway (DirectRunner: ``LocalDagRunner``,
or a Vertex/KFP container without Dataflow), this executor converts the CSV with
``components.csv_encoding`` instead: pyarrow reading, tfx_bsl's C++ encoder, one worker
process per core. With ``--runner=DataflowRunner`` (or any non-local runner) it hands over
to TFX's own Beam executor, so the data still scales out; so it does for what the fast
path does not cover (``partition_feature_name``, Parquet or non-tf.Example payloads).

Kept from CsvExampleGen, and compared record by record in the tests: column types, empty
cells, the split of every row (same hash of the same bytes), file names
(``Split-<name>/data_tfrecord-<shard>-of-<shards>.gz``) and the artifact's
``split_names``, ``payload_format`` and ``file_format``. Deliberately not kept: where
CsvExampleGen writes empty splits (a header-only file, rows that all hash into one split)
or fails with a bare decode error, this one stops with a line naming the file and the fix,
so no data never reaches Transform.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv_executor
from tfx.components.util import examples_utils
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from components import csv_encoding
from runtime import beam_args, worker_process_env

CHECKED_ROWS = 1000


def check_canonical(paths: Sequence[str], types: dict[str, csv_encoding.ColumnType]) -> None:
    """Fails loudly unless the encoded bytes of the first ``CHECKED_ROWS`` rows are
    TensorFlow's deterministic serialisation (otherwise rows would not land in the splits
    CsvExampleGen puts them in). Nothing to check when the files have no rows."""
    first = next((block for path in paths for block in csv_encoding.read_blocks(path)), None)
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
    """Runs ``csv_encoding`` worker processes (fresh interpreters: forking a process that
    runs TensorFlow and gRPC threads is unsafe); rows per split of each. If one fails, the
    others are stopped before its error is raised, so none writes on after the failure."""
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
    split_dirs: Sequence[str],
    buckets: Sequence[int] | None,
    workers: int,
    block_bytes: int = csv_encoding.BLOCK_BYTES,
) -> list[int]:
    """CSV files -> gzipped tf.Example TFRecords in ``split_dirs``; rows per split.

    Blocks of ``block_bytes`` are shared out between the workers. Inputs of one block are
    converted in this process: a worker's start-up would cost more than it saves.
    """
    types = csv_encoding.infer_column_types(paths)
    logging.info("Column types: %s", {n: t.name for n, t in types.items()})
    check_canonical(paths, types)
    for split_dir in split_dirs:
        fileio.makedirs(split_dir)
    size = sum(fileio.stat(p).length for p in paths)
    workers = max(1, min(workers, -(-size // block_bytes)))
    if workers == 1:
        return csv_encoding.write_shard(paths, types, split_dirs, buckets, block_bytes=block_bytes)
    jobs = [
        dict(
            paths=list(paths),
            types={n: t.name for n, t in types.items()},
            split_dirs=list(split_dirs),
            buckets=None if buckets is None else [int(b) for b in buckets],
            shard=shard,
            shards=workers,
            block_bytes=block_bytes,
        )
        for shard in range(workers)
    ]
    return [sum(counts) for counts in zip(*_run_workers(jobs), strict=True)]


class NoDataError(ValueError):
    """No data rows reached a split; the message says where they were looked for and why."""


def _glob_csv(pattern: str) -> list[str]:
    """The files of one input split; a missing file or a differing header is named."""
    paths = sorted(fileio.glob(pattern))
    if not paths:
        raise NoDataError(
            f"No file matches {pattern}: put the CSV file(s) in {os.path.dirname(pattern)}, or set --data-pattern."
        )
    names = csv_encoding.column_names(paths[0])
    for path in paths[1:]:
        other = csv_encoding.column_names(path)
        if other != names:
            differ = sorted(set(names) ^ set(other)) or ["the same columns in another order"]
            raise csv_encoding.CsvFileError(
                f"{path} and {paths[0]} have different headers ({', '.join(differ)}): "
                "every CSV file of a split must have one header."
            )
    return paths


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


class Executor(tfx_csv_executor.Executor):
    """TFX's CSV executor, with the local case done without Beam (see the module doc)."""

    def Do(self, input_dict: dict[str, list], output_dict: dict[str, list], exec_properties: dict[str, Any]) -> None:
        input_config = example_gen_pb2.Input()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
        output_config = example_gen_pb2.Output()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config)
        payload = exec_properties.get(
            standard_component_specs.OUTPUT_DATA_FORMAT_KEY, example_gen_pb2.FORMAT_TF_EXAMPLE
        )
        file_format = exec_properties.get(
            standard_component_specs.OUTPUT_FILE_FORMAT_KEY, example_gen_pb2.FILE_FORMAT_UNSPECIFIED
        )
        covered = (
            beam_args.runs_locally(self._beam_pipeline_args or [])
            and payload == example_gen_pb2.FORMAT_TF_EXAMPLE
            and write_split.to_file_format_str(file_format) == "tfrecords_gzip"
            and not output_config.split_config.HasField("partition_feature_name")
        )
        if not covered:
            logging.info("Using TFX's Beam executor (non-local runner or an option the fast path lacks).")
            super().Do(input_dict, output_dict, exec_properties)
            return

        self._log_startup(input_dict, output_dict, exec_properties)
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        artifact = artifact_utils.get_single_instance(examples)
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        artifact.split_names = artifact_utils.encode_split_names(split_names)
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        workers = default_workers()
        if output_config.split_config.splits:
            buckets = list(np.cumsum([s.hash_buckets for s in output_config.split_config.splits]))
            paths = _glob_csv(os.path.join(input_base, input_config.splits[0].pattern))
            counts = convert(paths, [artifact_utils.get_split_uri(examples, n) for n in split_names], buckets, workers)
            check_rows(paths, split_names, counts)
        else:
            counts = []
            for split, name in zip(input_config.splits, split_names, strict=True):
                paths = _glob_csv(os.path.join(input_base, split.pattern))
                counts += convert(paths, [artifact_utils.get_split_uri(examples, name)], None, workers)
                check_rows(paths, [name], counts[-1:])
        logging.info("Examples per split: %s", dict(zip(split_names, counts, strict=True)))
        # As TFX's executor records them (file format only when one was asked for).
        if standard_component_specs.OUTPUT_DATA_FORMAT_KEY in exec_properties:
            examples_utils.set_payload_format(artifact, payload)
        if file_format:
            examples_utils.set_file_format(artifact, write_split.to_file_format_str(file_format))


class CsvExampleGen(FileBasedExampleGen):
    """Drop-in for ``tfx.components.CsvExampleGen`` (same spec and outputs, faster locally)."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
