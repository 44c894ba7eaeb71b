"""The data contract shipped with the embedded data, and drafting one for new data: bad
inputs break it with one line each, as AnomalyGate prints them."""

from __future__ import annotations

import csv
import functools
import glob
import os

import numpy as np
import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2

from authoring import contract
from components.anomaly_gate import (
    LABEL_BALANCE_TAG,
    MISSING_TAG,
    describe_anomalies,
    describe_missing,
    min_label_class_fraction,
)
from models import problem as problem_lib
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR, REPO_ROOT
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS, write_sample

SHIPPED = os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE)


@pytest.fixture(scope="module")
def shipped() -> schema_pb2.Schema:
    return tfdv.load_schema_text(SHIPPED)


def _lines(data_dir, schema) -> list[str]:
    """What AnomalyGate would print for this data against ``schema``."""
    statistics = contract.csv_statistics([str(data_dir / "data.csv")])
    anomalies = describe_anomalies({"train": tfdv.validate_statistics(statistics, schema)})
    return anomalies + describe_missing({"train": statistics}, schema)


def _planted(tmp_path, edit, drop: str | None = None, add: str | None = None):
    """The sample with ``edit`` applied to each row, a column dropped or a column added."""
    target = write_sample(tmp_path / "planted", SAMPLE_ROWS, every=EMBEDDED_ROWS // SAMPLE_ROWS, edit=edit)
    if drop or add:
        with open(target / "data.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        names = [n for n in rows[0] if n != drop] + ([add] if add else [])
        with open(target / "data.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({**row, **({add: "1"} if add else {})} for row in rows)
    return target


def test_the_embedded_data_meets_its_contract(shipped):
    statistics = contract.csv_statistics([os.path.join(DEFAULT_PROBLEM_DIR, "taxi.csv")])
    assert describe_anomalies({"all": tfdv.validate_statistics(statistics, shipped)}) == []
    assert describe_missing({"all": statistics}, shipped) == []


def test_the_contract_requires_what_the_model_relies_on(shipped):
    required = {f.name for f in shipped.feature if f.HasField("shape")}
    assert {"fare", "tips", "payment_type", "trip_start_hour"} <= required
    assert "company" not in required  # often empty, imputed by preprocessing_fn
    assert tfdv.get_feature(shipped, "fare").float_domain.min == 0
    assert tfdv.get_feature(shipped, "fare").float_domain.disallow_nan


def test_bad_cells_and_columns_each_break_it_with_their_own_line(tmp_path, shipped):
    def plant(row, i):
        row = dict(row)
        if i % 20 == 0:
            row["fare"] = "twelve dollars"  # 5% text in a number column
        if i % 10 == 1:
            row["payment_type"] = "Bitcoin"  # outside a closed domain
        if i % 10 == 2:
            row["trip_start_hour"] = "25"  # outside a physical range
        return row

    # The label's source missing, and a column the contract does not know.
    lines = "\n".join(_lines(_planted(tmp_path, plant, drop="tips", add="surcharge"), shipped))
    assert "feature 'fare'" in lines and "Expected data of type: FLOAT but got STRING" in lines
    assert "feature 'payment_type'" in lines and "Bitcoin" in lines
    assert "feature 'trip_start_hour'" in lines and "Out-of-range" in lines
    assert "feature 'tips'" in lines and "Column dropped" in lines
    assert "feature 'surcharge'" in lines and "New column" in lines


def test_a_hugely_negative_fare_breaks_it(tmp_path, shipped):
    """It used to be trained on, blessed and pushed."""
    lines = _lines(_planted(tmp_path, lambda row, i: {**row, "fare": "-1000000000"} if i % 10 == 0 else row), shipped)
    assert len(lines) == 1 and "feature 'fare'" in lines[0] and "Out-of-range" in lines[0]


@pytest.mark.parametrize(("cell", "reason"), [("nan", "NaN"), ("inf", "Inf"), ("-inf", "Inf")])
def test_nan_and_infinity_in_a_number_column_break_it(tmp_path, shipped, cell, reason):
    lines = _lines(_planted(tmp_path, lambda row, i: {**row, "trip_miles": cell} if i % 50 == 0 else row), shipped)
    assert len(lines) == 1 and "feature 'trip_miles'" in lines[0] and reason in lines[0], lines


def test_a_column_missing_more_values_than_it_tolerates_breaks_it(tmp_path, shipped):
    def empty_companies(row, i):
        return {**row, "company": ""} if i % 5 else row  # 80% empty; the contract allows 50%

    (line,) = _lines(_planted(tmp_path, empty_companies), shipped)
    assert line.startswith("[train] feature 'company': ")
    assert "of rows have no value; the contract allows 50% (max_missing_fraction=0.5)" in line
    share = float(line.split(": ")[1].split("%")[0])
    assert 80.0 <= share <= 90.0  # 80% emptied, plus the sample's own empty cells


def test_too_few_rows_break_it(tmp_path, shipped):
    few = write_sample(tmp_path / "few", 20, every=EMBEDDED_ROWS // 20)
    # (20 rows also miss values more often than the contract tolerates: lines of their own.)
    (line,) = [line for line in _lines(few, shipped) if "whole dataset" in line]
    assert "whole dataset" in line and "has 20 examples, which is fewer than expected" in line


@pytest.fixture(scope="module")
def taxi_draft(sample_dir, tmp_path_factory) -> schema_pb2.Schema:
    """The draft for the taxi sample, as the command writes it (the taxi problem by default)."""
    output = tmp_path_factory.mktemp("draft") / "draft.pbtxt"
    assert contract.main(["--data-root", str(sample_dir), "--output", str(output)]) == 0
    assert output.read_text().startswith("# DRAFT data contract")
    return tfdv.load_schema_text(str(output))


def test_a_draft_for_new_data_has_types_required_columns_and_observed_ranges(taxi_draft, sample_dir):
    draft = taxi_draft
    hour = tfdv.get_feature(draft, "trip_start_hour")
    assert hour.type == schema_pb2.INT and 0 <= hour.int_domain.min <= hour.int_domain.max <= 23
    assert tfdv.get_feature(draft, "fare").HasField("shape")
    assert not tfdv.get_feature(draft, "company").HasField("shape")
    assert tfdv.get_feature(draft, "company").drift_comparator.infinity_norm.threshold == contract.DRAFT_TEXT_DRIFT
    company_tags = list(tfdv.get_feature(draft, "company").annotation.tag)
    assert len(company_tags) == 1 and company_tags[0].startswith(MISSING_TAG)
    assert not tfdv.get_feature(draft, "fare").annotation.tag  # required: no tolerance needed
    fare_drift = tfdv.get_feature(draft, "fare").drift_comparator.jensen_shannon_divergence.threshold
    assert fare_drift == contract.DRAFT_NUMBER_DRIFT
    assert _lines(sample_dir, draft) == []  # the data it was drafted from meets it


def test_drafting_without_data_says_where_it_looked(tmp_path, capsys):
    assert contract.main(["--data-root", str(tmp_path)]) == 2
    assert f"No file matches *.csv in {tmp_path}" in capsys.readouterr().err


def test_drafting_data_that_lacks_the_problems_columns_names_them(sample_dir, capsys):
    penguins = os.path.join(REPO_ROOT, "data", "penguins")
    assert contract.main(["--problem", penguins, "--data-root", str(sample_dir)]) == 2
    err = capsys.readouterr().err
    assert "The problem 'penguin-species' names column(s) bill_length_mm" in err and "--problem" in err


def test_drafting_for_a_folder_without_a_spec_says_how_to_make_one(tmp_path, capsys):
    assert contract.main(["--problem", str(tmp_path)]) == 2
    assert "python -m authoring.scaffold" in capsys.readouterr().err


# ---------------------------------------------------------------- label-aware drafts


def test_the_label_only_column_is_training_data_only_like_the_shipped_contract(taxi_draft, shipped):
    tips = tfdv.get_feature(taxi_draft, "tips")
    assert list(tips.not_in_environment) == list(tfdv.get_feature(shipped, "tips").not_in_environment) == ["SERVING"]
    assert list(taxi_draft.default_environment) == list(shipped.default_environment) == ["TRAINING", "SERVING"]
    assert [f.name for f in taxi_draft.feature if f.not_in_environment] == ["tips"]
    # No threshold on the label itself; its inputs keep theirs.
    assert not tips.HasField("drift_comparator")
    assert tfdv.get_feature(taxi_draft, "fare").HasField("drift_comparator")
    # Required where every row has a value: both of the label's columns.
    assert tips.HasField("shape") and tfdv.get_feature(taxi_draft, "fare").HasField("shape")
    assert not tips.annotation.tag


def test_serving_data_without_the_label_column_meets_the_drafts_serving_environment(tmp_path, taxi_draft):
    serving = _planted(tmp_path, lambda row, i: row, drop="tips")
    statistics = contract.csv_statistics([str(serving / "data.csv")])
    serving_anomalies = tfdv.validate_statistics(statistics, taxi_draft, environment="SERVING")
    assert describe_anomalies({"serving": serving_anomalies}) == []
    # In training data the label's column is expected.
    training = describe_anomalies({"train": tfdv.validate_statistics(statistics, taxi_draft, environment="TRAINING")})
    assert len(training) == 1 and "feature 'tips'" in training[0] and "Column dropped" in training[0]


def test_the_label_class_fraction_follows_the_rarest_class_of_any_split(sample_dir):
    problem = problem_lib.load(DEFAULT_PROBLEM_DIR)
    found = contract.draft_contract(str(sample_dir), problem=problem)
    assert set(found.label_counts) == {"train", "eval"}
    assert sum(sum(counts) for counts in found.label_counts.values()) == found.rows
    assert all(counts[0] == 0 for counts in found.label_counts.values())  # every row is a class
    rarest = min(c / sum(counts) for counts in found.label_counts.values() for c in counts[1:])
    if rarest / 2 >= contract.MAX_LABEL_CLASS_FRACTION:
        assert found.min_label_class_fraction == contract.MAX_LABEL_CLASS_FRACTION
    else:
        assert rarest / 2 * 0.9 <= found.min_label_class_fraction <= rarest / 2
    assert list(found.schema.annotation.tag) == [f"{LABEL_BALANCE_TAG}{found.min_label_class_fraction:g}"]
    assert min_label_class_fraction(found.schema) == found.min_label_class_fraction
    assert "the rarest class" in " ".join(found.annotation_comments)


@pytest.mark.parametrize(
    ("counts", "fraction"),
    [
        ({"train": [0, 60, 40], "eval": [0, 30, 20]}, 0.05),  # common classes: at most 0.05
        ({"train": [0, 940, 60], "eval": [0, 470, 30]}, 0.03),  # 6%: half
        ({"train": [0, 990, 10], "eval": [0, 497, 3]}, 0.003),  # 0.6% in eval: below the default floor
        ({"train": [0, 95, 5], "eval": [0, 50, 0]}, 0.0),  # a class absent from a split
    ],
)
def test_the_label_class_fraction_rule(counts, fraction):
    found, why = contract.label_class_fraction(counts, ["no", "yes"])
    assert found == pytest.approx(fraction) and "'yes'" in why


def test_a_rare_class_lowers_the_fraction_and_says_so(tmp_path):
    rows = [[i % 13, "fraud" if i % 100 == 0 else "ok"] for i in range(2000)]
    with open(tmp_path / "data.csv", "w", newline="") as f:
        csv.writer(f).writerows([["amount", "kind"], *rows])
    problem = problem_lib.Problem.from_dict(
        {
            "name": "fraud",
            "task": "binary",
            "label": {"column": "kind", "positive": "fraud"},
            "features": {"numeric": ["amount"]},
            "evaluation": {"threshold": 0.6},
        }
    )
    found = contract.draft_contract(str(tmp_path), problem=problem)
    shares = [counts[2] / sum(counts) for counts in found.label_counts.values()]
    assert 0 < found.min_label_class_fraction <= min(shares) / 2 < problem_lib.MIN_LABEL_CLASS_FRACTION
    assert any(note.startswith("WARNING: a rare class") for note in found.notes)
    assert "# WARNING: a rare class" in contract.to_text(found)


def test_a_multiclass_draft_and_an_unused_column(tmp_path):
    """The shipped penguins problem: species is the label; year is unused."""
    penguins = os.path.join(REPO_ROOT, "data", "penguins")
    assert contract.main(["--problem", penguins, "--output", str(tmp_path / "draft.pbtxt")]) == 0
    text = (tmp_path / "draft.pbtxt").read_text()
    draft = tfdv.load_schema_text(str(tmp_path / "draft.pbtxt"))
    species = tfdv.get_feature(draft, "species")
    assert list(species.not_in_environment) == ["SERVING"] and not species.HasField("drift_comparator")
    (tag,) = draft.annotation.tag
    assert tag.startswith(LABEL_BALANCE_TAG) and 0 < min_label_class_fraction(draft) <= 0.05
    year = tfdv.get_feature(draft, "year")
    assert not year.HasField("int_domain") and not year.HasField("drift_comparator")
    assert "# Not a model input (features.unused: the year of the study" in text
    assert tfdv.get_feature(draft, "bill_length_mm").HasField("float_domain")


def test_a_regression_draft_has_no_class_fraction(tmp_path):
    body_mass = os.path.join(REPO_ROOT, "data", "penguin-body-mass")
    found = contract.draft_contract(body_mass, problem=problem_lib.load(body_mass))
    assert not found.schema.annotation.tag and found.min_label_class_fraction is None
    label = tfdv.get_feature(found.schema, "body_mass_g")
    assert list(label.not_in_environment) == ["SERVING"] and not label.HasField("drift_comparator")
    assert label.HasField("shape")  # every row has one


def test_a_label_column_with_empty_cells_is_not_required_and_the_draft_says_how_they_count(tmp_path):
    rows = [[i % 11, "" if i % 10 == 0 else i * 2.5] for i in range(100)]
    with open(tmp_path / "data.csv", "w", newline="") as f:
        csv.writer(f).writerows([["size", "price"], *rows])
    problem = problem_lib.Problem.from_dict(
        {
            "name": "prices",
            "task": "regression",
            "label": {"column": "price"},
            "features": {"numeric": ["size"]},
            "evaluation": {"threshold": 100},
        }
    )
    found = contract.draft_contract(str(tmp_path), problem=problem)
    price = tfdv.get_feature(found.schema, "price")
    assert not price.HasField("shape") and list(price.not_in_environment) == ["SERVING"]
    assert tfdv.get_feature(found.schema, "size").HasField("shape")
    assert "Empty in 10.0% of this data's rows, so not required; an empty cell counts as 0." in " ".join(
        found.feature_comments["price"]
    )


def test_the_label_is_counted_as_preprocessing_fn_computes_it():
    """``label_classes`` on raw cells against ``models.preprocessing.label`` on tensors."""
    import numpy as np
    import pyarrow as pa
    import tensorflow as tf

    from components.csv_encoding import ColumnType
    from models import preprocessing

    block = pa.RecordBatch.from_pydict(
        {
            "tip": ["1.5", None, "0", "3", "0.25"],
            "fare": ["5", "4", None, "10", "1"],
            "kind": ["b", "a", None, "c", "z"],
            "code": ["2", None, "0", "1", "7"],
        }
    )
    types = {"tip": ColumnType.FLOAT, "fare": ColumnType.FLOAT, "kind": ColumnType.STRING, "code": ColumnType.INT}

    def tensor(name):
        cells = block.column(name).to_pylist()
        parse, dtype = {
            ColumnType.STRING: (str, tf.string),
            ColumnType.INT: (int, tf.int64),
            ColumnType.FLOAT: (float, tf.float32),
        }[types[name]]
        return tf.ragged.constant([[] if c is None else [parse(c)] for c in cells], dtype=dtype)

    base = {"name": "p", "features": {"numeric": ["fare"]}, "evaluation": {"threshold": 0.5}}
    problems = [
        {"task": "binary", "label": {"name": "big", "expression": "tip > 0.2 * fare"}},
        {"task": "binary", "label": {"column": "kind", "positive": "b"}},
        {"task": "binary", "label": {"column": "code", "positive": "1"}},
        {"task": "multiclass", "label": {"column": "kind", "classes": ["a", "b", "c"]}},
        {"task": "multiclass", "label": {"column": "code", "classes": ["0", "1", "2"]}},
    ]
    for spec in problems:
        problem = problem_lib.Problem.from_dict({**base, **spec})
        inputs = {key: tensor(key) for key in problem.label.sources}
        expected = preprocessing.label(inputs, problem)[problem.label_key].numpy().reshape(-1)
        assert np.array_equal(contract.label_classes(block, types, problem), expected), spec


# ---------------------------------------------------------------- one streaming pass


def _every_rows_split(files, problem) -> dict[str, list[int]]:
    """Rows per class and split, each row's tf.Example hashed as CsvExampleGen splits it."""
    from components import csv_encoding

    types = csv_encoding.infer_column_types(files, problem.header_names)
    buckets = list(np.cumsum(list(contract.SPLIT_BUCKETS.values())))
    counts = {name: [0] * (problem.num_classes + 1) for name in contract.SPLIT_BUCKETS}
    for path in files:
        for block in csv_encoding.read_blocks(path, headers=problem.header_names):
            classes = contract.label_classes(block, types, problem)
            for record, cls in zip(csv_encoding.encode_block(block, types), classes, strict=True):
                counts[list(counts)[csv_encoding.split_index(record, buckets)]][cls + 1] += 1
    return counts


@pytest.mark.parametrize("name", ["taxi", "penguins", "penguin-body-mass"])
def test_streamed_statistics_draft_what_tfdvs_own_pipeline_statistics_draft(name, monkeypatch):
    """The draft's statistics (TFDV's in-memory generators over each block, the blocks made
    small so that there are many) against TFDV's Beam statistics over a TFRecord copy of
    every row, as StatisticsGen computes them."""
    from components import csv_encoding

    folder = os.path.join(REPO_ROOT, "data", name)
    problem = problem_lib.load(folder)
    files = sorted(glob.glob(os.path.join(folder, "*.csv")))
    beam = contract.csv_statistics(files, problem)
    monkeypatch.setattr(csv_encoding, "read_blocks", functools.partial(csv_encoding.read_blocks, block_bytes=1 << 12))
    streamed, _ = contract._statistics(files, problem, problem.header_names)
    assert tfdv.infer_schema(streamed) == tfdv.infer_schema(beam)
    ours, theirs = streamed.datasets[0], beam.datasets[0]
    assert ours.num_examples == theirs.num_examples
    by_path = {tuple(f.path.step): f for f in theirs.features}
    for feature in ours.features:
        other = by_path.pop(tuple(feature.path.step))
        kind = feature.WhichOneof("stats")
        assert kind == other.WhichOneof("stats") and feature.type == other.type
        if kind is None:
            continue
        mine, yours = getattr(feature, kind), getattr(other, kind)
        for field in ("num_non_missing", "num_missing", "min_num_values", "max_num_values", "tot_num_values"):
            assert getattr(mine.common_stats, field) == getattr(yours.common_stats, field), (feature.path, field)
        if kind == "num_stats":
            assert (mine.min, mine.max, mine.num_zeros) == (yours.min, yours.max, yours.num_zeros)
            assert (mine.mean, mine.std_dev) == pytest.approx((yours.mean, yours.std_dev), rel=1e-9)
        if kind == "string_stats":
            assert mine.unique == yours.unique
            assert {(b.label, b.sample_count) for b in mine.rank_histogram.buckets} == {
                (b.label, b.sample_count) for b in yours.rank_histogram.buckets
            }
    assert not by_path


def test_split_counts_are_every_rows_split_up_to_the_exact_size():
    problem = problem_lib.load(DEFAULT_PROBLEM_DIR)
    files = sorted(glob.glob(os.path.join(DEFAULT_PROBLEM_DIR, "*.csv")))
    assert EMBEDDED_ROWS <= contract.EXACT_SPLIT_ROWS
    found = contract.draft_contract(DEFAULT_PROBLEM_DIR, problem=problem)
    assert found.label_counts == _every_rows_split(files, problem)
    assert "divided" not in " ".join(found.annotation_comments)


def test_past_the_exact_size_rare_classes_are_counted_and_the_rest_divided(monkeypatch):
    """The penguins' species with the sizes made small: the first 100 rows and each class's
    first 80 rows hashed. Chinstrap (68 rows) is counted exactly; the other two classes' rows
    not hashed are divided between the splits as all hashed rows fell."""
    monkeypatch.setattr(contract, "EXACT_SPLIT_ROWS", 100)
    monkeypatch.setattr(contract, "RARE_CLASS_ROWS", 80)
    folder = os.path.join(REPO_ROOT, "data", "penguins")
    problem = problem_lib.load(folder)
    truth = _every_rows_split(sorted(glob.glob(os.path.join(folder, "*.csv"))), problem)
    found = contract.draft_contract(folder, problem=problem)
    rare = problem.label.classes.index("Chinstrap") + 1
    assert [found.label_counts[s][rare] for s in truth] == [truth[s][rare] for s in truth]
    for cls in range(problem.num_classes + 1):  # every class keeps its rows
        assert sum(found.label_counts[s][cls] for s in truth) == sum(truth[s][cls] for s in truth)
    for cls in (problem.label.classes.index(c) + 1 for c in ("Adelie", "Gentoo")):
        total = sum(truth[s][cls] for s in truth)
        assert found.label_counts["eval"][cls] == pytest.approx(truth["eval"][cls], abs=0.15 * total)
    (comment,) = [c for c in found.annotation_comments if "divided" in c]
    assert "'Adelie', 'Gentoo'" in comment and "Chinstrap" not in comment
