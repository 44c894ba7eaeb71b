"""Scoring a CSV on Vertex AI (``python -m runs.score --project ...``): a batch
prediction job for the pipeline's registry model, then the scored rows as CSV.

Each row is staged as one JSON Lines instance, a tf.Example for ``serving_default`` (the
signature Vertex calls), under ``<output>/instances/``; the job writes under
``<output>/predictions/`` and the scored rows go to ``<output>/scored.csv``.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Sequence

from pipeline.config import PipelineConfig


def _raw_spec(schema_path: str, columns: Sequence[str]) -> dict:
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tensorflow_transform.tf_metadata import schema_utils
    from tfx.utils import io_utils

    schema = io_utils.parse_pbtxt_file(schema_path, schema_pb2.Schema())
    spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    return {name: spec[name] for name in columns if name in spec}


def stage_instances(files: Sequence[str], folder: str, problem, raw_spec: dict) -> list[str]:
    """Writes the rows of ``files`` as JSON Lines of tf.Examples (``raw_spec``: the served
    columns' types) under ``folder``, one file per input file, a block of rows at a time;
    their URIs."""
    import tensorflow as tf

    from components import csv_encoding
    from runs.scoring import tf_example

    served = problem.served_columns
    staged = []
    for index, path in enumerate(files):
        uri = f"{folder.rstrip('/')}/instances-{index:05d}.jsonl"
        with tf.io.gfile.GFile(uri, "w") as out:
            for block in csv_encoding.read_blocks(path, headers=problem.header_names):
                columns = {name: block.column(name).to_pylist() for name in served}
                for row in range(block.num_rows):
                    values = {name: columns[name][row] or "" for name in served}
                    example = base64.b64encode(tf_example(values, raw_spec)).decode()
                    out.write(json.dumps({"examples": {"b64": example}}) + "\n")
        staged.append(uri)
    return staged


def _row_of(instance: dict, raw_spec: dict) -> dict[str, str]:
    """The columns a staged instance carried, as text (a missing value empty)."""

    from report.importance import raw_columns

    example = base64.b64decode(instance["examples"]["b64"])
    return {name: values[0] for name, values in raw_columns([example], list(raw_spec)).items()}


def write_scored(results: Sequence[str], output: str, problem, raw_spec: dict) -> int:
    """The job's result lines as CSV rows: the columns the model read, then its outputs."""
    import tensorflow as tf

    from runs.scoring import output_columns

    buffer, writer, rows = io.StringIO(), None, 0
    for uri in results:
        with tf.io.gfile.GFile(uri) as f:
            for line in f:
                answer = json.loads(line)
                row = {problem.header_of(k): v for k, v in _row_of(answer["instance"], raw_spec).items()}
                for key in sorted(answer["prediction"]):
                    value = answer["prediction"][key]
                    values = value if isinstance(value, list) else [value]
                    for column, item in zip(output_columns(key, len(values), problem), values, strict=True):
                        row[f"predicted_{column}" if column in row else column] = item
                if writer is None:
                    writer = csv.DictWriter(buffer, list(row))
                    writer.writeheader()
                writer.writerow(row)
                rows += 1
    with tf.io.gfile.GFile(output, "w") as f:
        f.write(buffer.getvalue())
    return rows


def score_on_vertex(
    files: Sequence[str],
    output: str,
    config: PipelineConfig,
    project: str,
    region: str,
    version: str | None,
    machine_type: str,
    schema_path: str,
) -> list[str]:
    """Stages ``files``, runs the batch prediction job on the registry model's ``version``
    (default: the champion) and writes ``<output>/scored.csv``; what was done."""
    import tensorflow as tf
    from google.cloud import aiplatform

    from components import registry
    from runs.scoring import ScoreError

    if not output.startswith("gs://"):
        raise ScoreError(f"--output must be a gs:// folder when scoring on Vertex AI, not {output}")
    model = registry.RegistryModel.of_pipeline(project, region, config.pipeline_name, config.pipeline_root)
    aiplatform.init(project=project, location=region)
    found = registry.find(model)
    if found is None:
        raise ScoreError(f"the pipeline {config.pipeline_name} has no model in the registry of {project}/{region}")
    target = aiplatform.Model(found.resource_name, version=version or registry.CHAMPION)
    folder = output.rstrip("/")
    problem = config.problem
    raw_spec = _raw_spec(schema_path, problem.served_columns)
    staged = stage_instances(files, f"{folder}/instances", problem, raw_spec)
    job = target.batch_predict(
        job_display_name=f"{config.pipeline_name}-score",
        gcs_source=staged,
        instances_format="jsonl",
        predictions_format="jsonl",
        gcs_destination_prefix=f"{folder}/predictions",
        machine_type=machine_type,
        sync=True,
    )
    if job.state != aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED:
        raise ScoreError(f"the batch prediction job {job.resource_name} ended {job.state.name}: {job.error.message}")
    directory = job.output_info.gcs_output_directory
    results = sorted(tf.io.gfile.glob(f"{directory}/prediction.results-*"))
    rows = write_scored(results, f"{folder}/scored.csv", problem, raw_spec)
    return [
        f"Batch prediction job {job.resource_name}: {rows} row(s) scored by {found.display_name} version "
        f"{target.version_id}",
        f"Scored rows: {folder}/scored.csv (the job's own results: {directory})",
    ]
