"""Scores a CSV (a file, a folder of them, gs:// ones) with a problem's pushed model and
writes its rows with their predictions as CSV.

    python -m runs.score --problem DIR --input new.csv --output scored.csv [--version N]
    python -m runs.score --problem DIR --input gs://.../new.csv --output gs://.../scored/ \\
        --project P --region R --output-root gs://... [--version ALIAS_OR_ID]

The input first meets the problem's contract in its SERVING environment. Locally the rows go
through the model's ``serving_raw`` signature a block at a time; on Vertex AI (``--project``)
through a batch prediction job (``runs/vertex_scoring.py``). docs/release.md, "Score a CSV
with the pushed model", says what the output holds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence

from launch import flags
from models import problem as problem_lib
from models.problem import Problem
from pipeline.config import CONTRACT_FILE, DEFAULT_OUTPUT_ROOT
from runs.after_push import run_command, runs_config
from runs.scoring import ScoreError, output_columns
from runtime.terminal import add_verbose_flag

SERVING_ENVIRONMENT = "SERVING"


def input_files(source: str) -> list[str]:
    """The CSV files ``source`` names: a file, or every ``*.csv`` in a folder (local or gs://)."""
    import tensorflow as tf

    if tf.io.gfile.isdir(source):
        found = sorted(tf.io.gfile.glob(os.path.join(source, "*.csv")))
        if not found:
            raise ScoreError(f"{source} holds no .csv file: name a CSV file, or a folder of them")
        return found
    if not tf.io.gfile.exists(source):
        raise ScoreError(f"{source} does not exist: name a CSV file, or a folder of them")
    return [source]


def served_model_dir(serving_dir: str, version: str | None) -> str:
    """The pushed model a TensorFlow Serving process on ``serving_dir`` serves (the newest
    version), or ``version``."""
    from runs.release import local_versions

    versions = local_versions(serving_dir)
    if not versions:
        raise ScoreError(f"nothing was pushed to {serving_dir} yet: a blessed run of the pipeline pushes there")
    if version is not None and version not in versions:
        raise ScoreError(f"{serving_dir} has no version {version}: it holds {', '.join(versions)}")
    return os.path.join(serving_dir, version or versions[-1])


def check_columns(path: str, needed: Sequence[str], problem: Problem) -> None:
    """Every column the model reads is in the file's header, or one line names the first missing."""
    from components import csv_encoding

    present = set(csv_encoding.feature_names(path, problem.header_names))
    for name in needed:
        if name not in present:
            raise ScoreError(
                f"{path} lacks the column {problem.header_of(name)!r}, which the model reads: add it to the header "
                "line (an empty cell is a missing value)"
            )


def check_contract(files: Sequence[str], problem: Problem, schema_path: str) -> None:
    """The rows against the contract's SERVING environment, as the pipeline checks its data."""
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    from authoring.contract import csv_statistics
    from components.anomaly_gate import describe_anomalies

    schema = io_utils.parse_pbtxt_file(schema_path, schema_pb2.Schema())
    statistics = csv_statistics(files, problem)
    anomalies = tfdv.validate_statistics(statistics, schema, environment=SERVING_ENVIRONMENT)
    # A file that still has the label (or columns the model never reads) is scored all the
    # same: those columns pass through to the output unread.
    for column in problem.not_served_columns:
        if column in anomalies.anomaly_info:
            del anomalies.anomaly_info[column]
    if anomalies.anomaly_info:
        lines = describe_anomalies({"input": anomalies})
        raise ScoreError(
            f"the rows do not meet the contract {schema_path} (its {SERVING_ENVIRONMENT} environment):\n  "
            + "\n  ".join(lines)
        )


def scored_blocks(files: Sequence[str], model_dir: str, problem: Problem) -> Iterator:
    """Each block of rows (pyarrow), with the raw signature's outputs appended and the file's
    own header names; one block at a time."""
    import numpy as np
    import pyarrow as pa
    import tensorflow as tf

    from components import csv_encoding
    from models.signatures import RAW_SIGNATURE

    signature = tf.saved_model.load(model_dir).signatures[RAW_SIGNATURE]
    needed = sorted(signature.structured_input_signature[1])
    for path in files:
        check_columns(path, needed, problem)
        headers = csv_encoding.column_names(path)
        for block in csv_encoding.read_blocks(path, headers=problem.header_names):
            inputs = {
                name: tf.constant(block.column(name).fill_null("").to_numpy(zero_copy_only=False).astype(object))
                for name in needed
            }
            outputs = signature(**inputs)
            columns, names = list(block.columns), list(headers)
            for key in sorted(outputs):
                values = outputs[key].numpy()
                values = values.reshape(len(values), -1)
                for index, column in enumerate(output_columns(key, values.shape[1], problem)):
                    if column in headers or column in block.schema.names:  # the label's own column, say
                        column = f"predicted_{column}"
                    column_values = values[:, index]
                    if column_values.dtype == object:
                        column_values = np.array([v.decode() for v in column_values], dtype=object)
                    columns.append(pa.array(column_values))
                    names.append(column)
            yield pa.RecordBatch.from_arrays(columns, names=names)


def score_locally(files: Sequence[str], model_dir: str, output: str, problem: Problem) -> int:
    """Writes the scored rows of ``files`` to ``output``; how many rows. The rows go to a
    file beside it first (here, for a gs:// output), which becomes ``output`` only once every
    row is scored: a failure leaves no half-written output."""
    import pyarrow.csv as pa_csv
    import tensorflow as tf

    remote = "://" in output
    partial = os.path.join(tempfile.mkdtemp(prefix="score-"), "scored.csv") if remote else output + ".partial"
    rows, writer = 0, None
    try:
        for block in scored_blocks(files, model_dir, problem):
            if writer is None:
                writer, names = pa_csv.CSVWriter(partial, block.schema), block.schema.names
            elif block.schema.names != names:
                raise ScoreError(f"the files' headers differ ({block.schema.names} after {names}): score each alone")
            writer.write_batch(block)
            rows += block.num_rows
        if writer is not None:
            writer.close()
            writer = None
            if remote:
                tf.io.gfile.copy(partial, output, overwrite=True)
            else:
                os.replace(partial, output)
    finally:
        if writer is not None:
            writer.close()
        if remote:
            shutil.rmtree(os.path.dirname(partial), ignore_errors=True)
        elif os.path.exists(partial):
            os.remove(partial)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Score a CSV (a file, a folder of them, gs:// ones) with a problem's pushed model: its rows "
        "with their predictions, as CSV.",
        epilog="Exit codes: 0 scored, 2 refused (the reason is printed) or a wrong flag.",
    )
    flags.add_shared_flags(parser, ("problem", "pipeline_name"))
    parser.add_argument("--input", required=True, help="The CSV file, or a folder of CSV files, to score.")
    parser.add_argument("--output", required=True, help="Where to write the scored rows (a CSV file).")
    parser.add_argument(
        "--output-root", default=DEFAULT_OUTPUT_ROOT, help="Where the runs wrote (gs:// with --project)."
    )
    parser.add_argument("--version", default=None, help="The model version to score with (default: the champion).")
    parser.add_argument(
        "--schema-path", default=None, help="The contract to check the rows against (default: the problem's)."
    )
    cloud = parser.add_argument_group("Vertex AI (a batch prediction job on the pipeline's registry model)")
    cloud.add_argument("--project", help="Google Cloud project: score on Vertex AI.")
    cloud.add_argument("--region", help="Google Cloud region, e.g. us-central1.")
    cloud.add_argument("--machine-type", default="n1-standard-2", help="The batch prediction job's machine type.")
    add_verbose_flag(parser)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> list[str]:
    config = runs_config(args, ScoreError)
    problem = config.problem
    files = input_files(args.input)
    for path in files:
        check_columns(path, problem.served_columns, problem)
    schema_path = args.schema_path or os.path.join(problem.directory, CONTRACT_FILE)
    check_contract(files, problem, schema_path)
    if args.project:
        from runs.vertex_scoring import score_on_vertex

        return score_on_vertex(
            files, args.output, config, args.project, args.region, args.version, args.machine_type, schema_path
        )
    model_dir = served_model_dir(config.serving_model_dir, args.version)
    rows = score_locally(files, model_dir, args.output, problem)
    return [f"Scored {rows} row(s) of {len(files)} file(s) with {model_dir}: {args.output}"]


def main(argv: Sequence[str] | None = None) -> int:
    warnings.filterwarnings("ignore", category=FutureWarning)
    return run_command("score", parse_args(argv), run, refusals=(ScoreError, problem_lib.ProblemError))


if __name__ == "__main__":
    raise SystemExit(main())
