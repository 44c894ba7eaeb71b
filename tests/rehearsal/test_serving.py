"""Pieces of the served-model rehearsal: requests from CSV rows, tf.Examples from them, and
the serving runtime the Makefile installs."""

from __future__ import annotations

import re

import tensorflow as tf

from models.problem import feature_names
from pipeline.config import REPO_ROOT
from rehearsal.serving import SERVING_TF_VERSION, instances_from_csv
from runs.scoring import tf_example
from tests.support.problems import as_spreadsheet_export
from tests.support.sample_data import EMBEDDED_CSV

RAW_SPEC = {
    "fare": tf.io.FixedLenFeature([], tf.float32),
    "company": tf.io.VarLenFeature(tf.string),
    "trip_start_hour": tf.io.FixedLenFeature([], tf.int64),
}


def test_instances_are_csv_rows_as_text_without_the_dropped_columns():
    instances = instances_from_csv(str(EMBEDDED_CSV), 5, drop=("tips",))
    assert len(instances) == 5
    assert all("tips" not in i and "fare" in i for i in instances)
    assert all(isinstance(v, str) for i in instances for v in i.values())


def test_a_row_becomes_the_tf_example_serving_default_parses():
    row = {"fare": "12.5", "company": "", "trip_start_hour": "7", "tips": "3"}
    parsed = tf.io.parse_example([tf_example(row, RAW_SPEC)], RAW_SPEC)
    assert parsed["fare"].numpy().tolist() == [12.5]
    assert parsed["trip_start_hour"].numpy().tolist() == [7]
    assert parsed["company"].values.numpy().tolist() == []  # an empty cell is left out


def test_the_makefile_installs_the_tensorflow_the_rehearsal_names():
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^SERVING_TF := (\S+)$", makefile, re.M).group(1) == SERVING_TF_VERSION


def test_instances_from_a_csv_of_spreadsheet_headers_use_the_feature_names(tmp_path):
    renamed = as_spreadsheet_export(EMBEDDED_CSV, tmp_path / "export.csv")
    feature_of = feature_names(list(renamed.values()))
    headers = {feature: header for header, feature in feature_of.items()}
    tips = feature_of[renamed["tips"]]
    instances = instances_from_csv(str(tmp_path / "export.csv"), 5, drop=(tips,), headers=headers)
    originals = instances_from_csv(str(EMBEDDED_CSV), 5, drop=("tips",))
    assert instances == [{feature_of[renamed[k]]: v for k, v in row.items()} for row in originals]
    assert all(tips not in i and set(i) <= set(headers) for i in instances)
