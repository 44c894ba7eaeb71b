"""A draft data contract for new data, for a person to review.

    python -m pipeline.contract --data-root DIR [--data-pattern '*.csv'] [--output FILE]

The pipeline validates every run's data against a curated schema (``data/taxi/schema.pbtxt``
for the embedded data: see its comments). Inferring one at each run would only catch what
differs from the very data it was inferred from. This drafts one from the data as it is
now, computed on the rows as CsvExampleGen encodes them: TFDV's inferred types, required
columns (``shape``) and string domains, plus the observed range of every number, a missing-value
tolerance for the optional columns and generic drift thresholds. A person
then turns observed ranges into physical ones, opens string domains that will grow, and
saves it as ``schema.pbtxt`` beside the data.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import sys
import tempfile
from collections.abc import Sequence

from components.anomaly_gate import MISSING_TAG, missing_share
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR

MIN_VALUES_FOR_RANGE = 10
# Starting drift thresholds for a draft (DriftGate): the looser of the embedded contract's,
# for a person to tighten per column with `python -m bench.drift` on their own data.
DRAFT_TEXT_DRIFT = 0.2  # L-infinity distance
DRAFT_NUMBER_DRIFT = 0.1  # Jensen-Shannon divergence
DRAFT_NOTE = (
    "# DRAFT data contract, drafted by `python -m pipeline.contract` from {files} on {date}.\n"
    "# Review before use: the ranges below are the ones observed in this data; make them the\n"
    "# physically possible ones, open string domains that will grow, and say why in comments.\n"
    "# Drift thresholds (drift_comparator) are generic starting points: remove them where a\n"
    "# column moves by design (timestamps, ids), tighten them where a change must stop a run.\n"
)


def csv_statistics(files: Sequence[str]):
    """TFDV statistics of the rows as CsvExampleGen encodes them (an empty cell is a feature
    with no value, not an absent one), so a contract drafted or checked with them means what
    it will mean in the pipeline."""
    import tensorflow as tf
    import tensorflow_data_validation as tfdv

    from components import csv_encoding

    with tempfile.TemporaryDirectory(prefix="contract-") as scratch:
        records = os.path.join(scratch, "examples.tfrecord")
        types = csv_encoding.infer_column_types(files)
        with tf.io.TFRecordWriter(records) as writer:
            for path in files:
                for block in csv_encoding.read_blocks(path):
                    for record in csv_encoding.encode_block(block, types):
                        writer.write(record)
        return tfdv.generate_statistics_from_tfrecord(records)


def draft(data_root: str, data_pattern: str = "*.csv"):
    """The schema TFDV infers from the CSV files, with every number's observed range."""
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2

    files = sorted(glob.glob(os.path.join(data_root, data_pattern)))
    if not files:
        raise FileNotFoundError(f"No file matches {data_pattern} in {data_root}")
    statistics = csv_statistics(files)
    schema = tfdv.infer_schema(statistics)
    rows = statistics.datasets[0].num_examples
    for feature in statistics.datasets[0].features:
        target = tfdv.get_feature(schema, feature.path.step[0])
        if not target.HasField("shape") and rows:
            # Half as much again as the share seen, plus a point: a starting tolerance.
            missing = missing_share(feature, rows)
            target.annotation.tag.append(f"{MISSING_TAG}{min(1.0, round(missing * 1.5 + 0.01, 2)):g}")
        if feature.HasField("string_stats"):
            target.drift_comparator.infinity_norm.threshold = DRAFT_TEXT_DRIFT
        # Too few values to suggest a range (a column that is nearly always empty).
        if not feature.HasField("num_stats") or feature.num_stats.common_stats.tot_num_values < MIN_VALUES_FOR_RANGE:
            continue
        target.drift_comparator.jensen_shannon_divergence.threshold = DRAFT_NUMBER_DRIFT
        low, high = feature.num_stats.min, feature.num_stats.max
        if target.type == schema_pb2.INT:
            target.int_domain.min, target.int_domain.max = int(low), int(high)
        elif target.type == schema_pb2.FLOAT:
            target.float_domain.min, target.float_domain.max = low, high
            target.float_domain.disallow_nan = target.float_domain.disallow_inf = True
    return schema, files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", default=DEFAULT_PROBLEM_DIR, help="Directory holding the CSV file(s).")
    parser.add_argument("--data-pattern", default="*.csv", help="Glob, relative to --data-root.")
    parser.add_argument("--output", help=f"Where to write the draft (default: <data-root>/{CONTRACT_FILE}.draft).")
    args = parser.parse_args(argv)
    from google.protobuf import text_format

    try:
        schema, files = draft(args.data_root, args.data_pattern)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    output = args.output or os.path.join(args.data_root, CONTRACT_FILE + ".draft")
    note = DRAFT_NOTE.format(files=", ".join(os.path.basename(f) for f in files), date=datetime.date.today())
    with open(output, "w") as f:
        f.write(note + text_format.MessageToString(schema))
    print(f"Draft data contract written to {output}: review it, then save it as {CONTRACT_FILE} beside the data.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
