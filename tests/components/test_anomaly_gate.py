"""AnomalyGate: the run stops on the anomalies ExampleValidator finds, naming each one and
the fix; clean data passes the schema on unchanged."""

from __future__ import annotations

import dataclasses
import os

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2
from tfx.utils import io_utils

from components.anomaly_gate import (
    DataAnomaliesError,
    describe_anomalies,
    describe_label,
    headers_named,
    label_counts,
    min_label_class_fraction,
    missing_tolerances,
    read_anomalies,
)
from components.drift import read_statistics_dir
from models.problem import MIN_LABEL_CLASS_FRACTION
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR
from pipeline.pipeline import create_pipeline
from tests.support.harness import node, run_component
from tests.support.problems import TAXI
from tests.support.sample_data import write_sample


def _schema_proto(schema_artifact) -> schema_pb2.Schema:
    return io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema_artifact[0].uri))


def test_each_anomaly_is_one_line_with_split_feature_and_reason():
    eval_anomalies = anomalies_pb2.Anomalies()
    info = eval_anomalies.anomaly_info["payment_type"]
    info.short_description = "Unexpected string values"
    info.reason.add(description="Examples contain values missing from the schema: Bitcoin (~10%).")
    eval_anomalies.dataset_anomaly_info.short_description = "Low num examples"
    eval_anomalies.dataset_anomaly_info.reason.add(short_description="Too few examples")
    lines = describe_anomalies({"train": anomalies_pb2.Anomalies(), "eval": eval_anomalies})
    assert lines == [
        "[eval] feature 'payment_type': Unexpected string values: "
        "Examples contain values missing from the schema: Bitcoin (~10%).",
        "[eval] whole dataset: Low num examples: Too few examples",
    ]


def test_a_missing_value_tolerance_must_be_a_number():
    schema = schema_pb2.Schema()
    schema.feature.add(name="company").annotation.tag.append("max_missing_fraction=half")
    schema.feature.add(name="fare").annotation.tag.append("max_missing_fraction=0.25")
    with pytest.raises(ValueError, match="tag 'max_missing_fraction=half' on 'company' needs a number"):
        missing_tolerances(schema)
    del schema.feature[0]
    assert missing_tolerances(schema) == {"fare": 0.25}


def test_clean_data_has_no_anomalies_and_passes_the_gate(anomalies, validated_schema, schema):
    assert describe_anomalies(read_anomalies(anomalies[0])) == []
    assert _schema_proto(validated_schema) == _schema_proto(schema)


@pytest.fixture(scope="session")
def planted_anomalies(small_config, root, schema, tmp_path_factory):
    """Data with a payment type the schema has never seen, validated against the clean schema."""

    def plant(row, i):
        return {**row, "payment_type": "Bitcoin"} if i % 10 == 0 else row

    bad_dir = write_sample(tmp_path_factory.mktemp("bad"), 300, every=50, edit=plant)
    bad = create_pipeline(dataclasses.replace(small_config, data_root=str(bad_dir)))
    bad_root = os.path.join(root, "bad")
    bad_examples = run_component(node(bad, "CsvExampleGen"), {}, bad_root)["examples"]
    bad_stats = run_component(node(bad, "StatisticsGen"), {"examples": bad_examples}, bad_root)["statistics"]
    return (
        run_component(node(bad, "ExampleValidator"), {"statistics": bad_stats, "schema": schema}, bad_root)[
            "anomalies"
        ],
        bad,
        bad_root,
        bad_examples,
        bad_stats,
    )


def test_validator_flags_a_planted_anomaly(planted_anomalies):
    anomalies = planted_anomalies[0]
    lines = describe_anomalies(read_anomalies(anomalies[0]))
    assert any("payment_type" in line and "Bitcoin" in line for line in lines), lines


def test_gate_stops_on_anomalies_naming_feature_and_fix(planted_anomalies, schema):
    anomalies, bad, bad_root, bad_examples, bad_stats = planted_anomalies
    with pytest.raises(DataAnomaliesError) as raised:
        run_component(
            node(bad, "AnomalyGate"),
            {"anomalies": anomalies, "schema": schema, "examples": bad_examples, "statistics": bad_stats},
            bad_root,
        )
    message = str(raised.value)
    assert "feature 'payment_type'" in message and "Transform and training did not run" in message
    assert "schema.pbtxt in its folder, or --schema-path" in message
    assert not os.listdir(os.path.join(bad_root, "AnomalyGate", "validated_schema"))


def _gate_lines(small_config, tmp_path, edit=None, drop=None) -> list[str]:
    """What the gate says of a sample (optionally edited, or without a column), its schema
    inferred from that very sample as a run without a contract does."""
    data = write_sample(tmp_path / "data", 300, every=50, edit=edit)
    if drop:
        rows = (data / "data.csv").read_text().splitlines()
        header = rows[0].split(",")
        at = header.index(drop)
        (data / "data.csv").write_text(
            "\n".join(",".join(c for i, c in enumerate(r.split(",")) if i != at) for r in rows) + "\n"
        )
    pipe = create_pipeline(dataclasses.replace(small_config, data_root=str(data)))
    out = str(tmp_path / "out")
    examples = run_component(node(pipe, "CsvExampleGen"), {}, out)["examples"]
    statistics = run_component(node(pipe, "StatisticsGen"), {"examples": examples}, out)["statistics"]
    schema = run_component(node(pipe, "SchemaGen"), {"statistics": statistics}, out)["schema"]
    return describe_label(examples[0], _schema_proto(schema), TAXI, read_statistics_dir(statistics[0].uri))


def _labels_one_record_at_a_time(examples, schema: schema_pb2.Schema) -> dict[str, list[int]]:
    """What label_counts must find, counted the plain way: every record of every file, in order."""
    import tensorflow as tf
    from tensorflow_transform.tf_metadata import schema_utils
    from tfx.types import artifact_utils

    from models import preprocessing

    spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    sources = {key: spec[key] for key in TAXI.label.sources}
    counts = {}
    for split in artifact_utils.decode_split_names(examples.split_names):
        files = tf.io.gfile.glob(os.path.join(artifact_utils.get_split_uri([examples], split), "*"))
        labels = [
            int(preprocessing.label(tf.io.parse_example(record[None], sources), TAXI)[TAXI.label_key])
            for record in tf.data.TFRecordDataset(files, compression_type="GZIP")
        ]
        # [neither class, class 0, class 1], as label_counts counts them.
        counts[split] = [0, len(labels) - sum(labels), sum(labels)]
    return counts


def test_the_label_of_clean_data_has_both_classes(examples, schema):
    counts = label_counts(examples[0], _schema_proto(schema), TAXI)
    assert set(counts) == {"train", "eval"}
    assert all(unknown == 0 and negatives > 0 and positives > 0 for unknown, negatives, positives in counts.values())
    assert counts == _labels_one_record_at_a_time(examples[0], _schema_proto(schema))
    assert describe_label(examples[0], _schema_proto(schema), TAXI) == []


def test_the_label_is_read_from_the_kept_columns_when_every_file_has_them(examples, schema, monkeypatch):
    from models import data
    from runtime import decoded_columns

    expected = _labels_one_record_at_a_time(examples[0], _schema_proto(schema))
    assert os.path.isdir(os.path.join(examples[0].uri, decoded_columns.COLUMNS_DIR))

    def no_records(*args, **kwargs):
        raise AssertionError("the records were parsed though their columns were kept")

    monkeypatch.setattr(data, "record_blocks", no_records)
    assert label_counts(examples[0], _schema_proto(schema), TAXI) == expected


def test_without_kept_columns_the_label_is_parsed_from_the_records(examples, schema, tmp_path):
    import shutil

    from tfx.types import standard_artifacts

    from runtime import decoded_columns

    copy = standard_artifacts.Examples()
    copy.uri = str(tmp_path / "examples")
    copy.split_names = examples[0].split_names
    shutil.copytree(examples[0].uri, copy.uri, ignore=shutil.ignore_patterns(decoded_columns.COLUMNS_DIR))
    expected = _labels_one_record_at_a_time(examples[0], _schema_proto(schema))
    assert label_counts(copy, _schema_proto(schema), TAXI) == expected


def test_the_contract_can_ask_for_more_balance_than_the_default(examples, schema):
    strict = _schema_proto(schema)
    strict.annotation.tag.append("min_label_class_fraction=0.45")  # the sample has about a fifth
    lines = describe_label(examples[0], strict, TAXI)
    assert [line[:7] for line in lines] == ["[eval] ", "[train]"]
    assert all("each class needs at least 45% of a split" in line for line in lines)
    assert all("(min_label_class_fraction=0.45)" in line for line in lines)
    shipped = io_utils.parse_pbtxt_file(os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE), schema_pb2.Schema())
    assert min_label_class_fraction(shipped) == 0.05
    assert min_label_class_fraction(schema_pb2.Schema()) == MIN_LABEL_CLASS_FRACTION


def test_a_label_with_one_class_is_named_with_what_to_check(small_config, tmp_path):
    """Every tips 0 used to train, score AUC 0.0 and exit 0 with nothing said."""
    lines = _gate_lines(small_config, tmp_path, edit=lambda row, i: {**row, "tips": "0.0"})
    assert len(lines) == 2
    assert lines[0].startswith("[eval] label 'big_tipper' (tips > 0.2 * fare): 0 of ")
    assert "are class 1 (0.0%)" in lines[0]
    assert "each class needs at least 1% of a split" in lines[0] and "column(s) fare, tips" in lines[0]


def test_text_in_a_labels_source_column_is_named_with_what_was_found(small_config, tmp_path):
    """With an inferred schema the column is text: computing the label used to fail inside
    TensorFlow (a string-to-float cast) with no column named."""
    lines = _gate_lines(small_config, tmp_path, edit=lambda row, i: {**row, "tips": "n/a"} if i == 3 else row)
    assert lines == [
        "[all] label 'big_tipper' (tips > 0.2 * fare): column 'tips' holds text (such as 'n/a') where the "
        "label needs numbers. Fix those cells, or check the data against the problem's contract (schema.pbtxt), "
        "which names them"
    ]


def test_the_labels_source_column_missing_is_named(small_config, tmp_path):
    """With an inferred schema nothing else notices: Transform used to fail with KeyError: 'tips'."""
    (line,) = _gate_lines(small_config, tmp_path, drop="tips")
    assert line.startswith("[all] label 'big_tipper'") and "column(s) tips not in the data" in line


def test_a_renamed_column_named_in_the_gates_lines_is_also_named_by_its_header():
    from tests.support.problems import binary_problem

    problem, features = binary_problem(["Monthly Charges", "Monthly Charges Total", "Churned?"])
    total = features["Monthly Charges Total"]
    lines = [f"[train] {total}: out of range"]
    assert headers_named(lines, problem) == [
        f"Named in the CSV header (problem.toml [columns]): {total} is 'Monthly Charges Total'"
    ]  # monthly_charges is part of monthly_charges_total's name, not named by the line
    assert headers_named(lines, TAXI) == []
