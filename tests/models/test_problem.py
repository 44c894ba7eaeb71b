"""The problem spec (models/problem.py): what it accepts, what it refuses and why, and the
label each task derives from raw columns (models/preprocessing.py's ``label``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from models import preprocessing
from models.problem import (
    ModelFamily,
    Problem,
    ProblemError,
    Task,
    evaluate_expression,
    feature_names,
    is_feature_name,
    load,
    safe_name,
)
from tests.support.problems import SHIPPED, SHIPPED_DIRS

BASE = {
    "name": "demo",
    "task": "binary",
    "label": {"column": "answer", "positive": "Yes"},
    "features": {"numeric": ["x"], "categorical": ["kind"]},
    "evaluation": {"metric": "auc", "threshold": 0.7},
}


def _spec(**changes) -> dict:
    spec = {key: (dict(value) if isinstance(value, dict) else value) for key, value in BASE.items()}
    for key, value in changes.items():
        table, _, field = key.partition("__")
        if field:
            spec[table][field] = value
        else:
            spec[table] = value
    return spec


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_spec_loads_and_round_trips_through_json(name):
    problem = load(str(SHIPPED_DIRS[name]))
    assert Problem.from_json(problem.to_json()) == problem
    assert problem.label_only_columns and set(problem.label_only_columns).isdisjoint(problem.features.inputs)
    assert problem.contract_path.startswith(str(SHIPPED_DIRS[name]))
    # Their headers are their feature names: nothing renamed, and the JSON the components get has no mapping.
    assert problem.columns == {} and problem.header_names == {} and "columns" not in problem.to_dict()
    assert all(problem.header_of(c) == problem.shown(c) == c for c in problem.raw_columns)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"task": "ranking"}, "task 'ranking': use one of binary, multiclass, regression"),
        ({"features__colour": ["x"]}, r"unknown key\(s\) features.colour"),
        ({"label__positive": None}, "label.positive: say which value of 'answer'"),
        ({"label": {"expression": "x * 2", "name": "y"}}, "a binary label needs a comparison"),
        ({"label": {"expression": "x > 2"}}, "label.name: name the label"),
        ({"label": {"expression": "__import__('os') > 1", "name": "y"}}, "is not allowed"),
        ({"label": {"column": "x", "positive": "1", "name": "big"}}, "computed only from model inputs"),
        ({"features__categorical": ["x"]}, "listed twice"),
        ({"evaluation": {"metric": "rmse", "threshold": 1.0}}, "does not apply to binary problems"),
        ({"evaluation": {"metric": "auc"}}, "evaluation.threshold is missing"),
        ({"evaluation": {"metric": "auc", "threshold": 0.7, "slices": ["nowhere"]}}, "is not a column the spec names"),
        ({"name": "Demo_Problem"}, r"must match \[a-z0-9\]"),
        ({"features__crosses": [["x", "missing"]]}, "a cross is two model inputs"),
        ({"model": {"family": "forest"}}, "model.family 'forest': use one of network, trees"),
        ({"model": {"kind": "trees"}}, r"unknown key\(s\) model.kind"),
    ],
)
def test_a_spec_that_cannot_work_is_refused_naming_the_key_and_the_fix(changes, match):
    with pytest.raises(ProblemError, match=match):
        Problem.from_dict(_spec(**changes))


def test_the_model_family_is_the_network_unless_the_spec_says_trees():
    network = Problem.from_dict(_spec())
    assert network.model == ModelFamily.NETWORK
    assert "model" not in network.to_dict()  # the components' JSON as before the choice existed
    trees = Problem.from_dict(_spec(model={"family": "trees"}))
    assert trees.model == ModelFamily.TREES and trees.to_dict()["model"] == {"family": "trees"}
    assert Problem.from_json(trees.to_json()) == trees


def test_a_multi_class_label_needs_its_classes_and_a_regression_target_arithmetic():
    with pytest.raises(ProblemError, match="label.classes: a multi-class label lists its classes"):
        Problem.from_dict(_spec(task="multiclass", label={"column": "answer"}, evaluation={"threshold": 0.5}))
    with pytest.raises(ProblemError, match="a regression target is arithmetic"):
        Problem.from_dict(
            _spec(task="regression", label={"expression": "a > b", "name": "y"}, evaluation={"threshold": 1})
        )


def test_an_expression_is_evaluated_with_the_arrays_own_operators():
    a, b = np.array([1.0, 5.0, 3.0]), np.array([10.0, 10.0, 10.0])
    assert evaluate_expression("a > 0.2 * b", {"a": a, "b": b}).tolist() == [False, True, True]
    assert evaluate_expression("(a - b) / 2", {"a": a, "b": b}).tolist() == [-4.5, -2.5, -3.5]


def _label(problem: Problem, columns: dict) -> list:
    return preprocessing.label(columns, problem)[problem.label_key].numpy().ravel().tolist()


def test_a_binary_label_from_a_positive_value_text_or_number():
    text = Problem.from_dict(_spec())
    assert _label(text, {"answer": tf.constant(["Yes", "No", "yes"])}) == [1, 0, 0]
    numeric = dataclasses.replace(text, label=dataclasses.replace(text.label, positive="1"))
    assert _label(numeric, {"answer": tf.constant([1, 0, 2], tf.int64)}) == [1, 0, 0]


def test_the_taxi_label_is_its_expression_with_missing_values_as_zero():
    taxi = SHIPPED["taxi"]
    tips = tf.SparseTensor([[0, 0], [1, 0]], [3.0, 1.0], [3, 1])  # the third row has no tip
    fare = tf.constant([10.0, 10.0, 10.0])
    assert _label(taxi, {"tips": tips, "fare": fare}) == [1, 0, 0]


def test_a_multi_class_label_is_the_class_index_and_a_value_none_of_the_classes_is_minus_one():
    penguins = SHIPPED["penguins"]
    species = tf.constant(["Gentoo", "Adelie", "Emperor", "Chinstrap"])
    assert _label(penguins, {"species": species}) == [2, 0, -1, 1]


def test_a_regression_target_is_the_number():
    mass = SHIPPED["penguin-body-mass"]
    assert mass.task == Task.REGRESSION
    assert _label(mass, {"body_mass_g": tf.constant([3750, 4200], tf.int64)}) == [3750.0, 4200.0]


# ---------------------------------------------------------------- column names


@pytest.mark.parametrize(
    ("header", "feature"),
    [
        ("Monthly Charges", "monthly_charges"),
        ("Sale Price ($)", "sale_price"),
        ("2023 Revenue", "col_2023_revenue"),
        ("Größe", "grosse"),
        ("  Ærø / Łódź  ", "aero_lodz"),
        ("od280/od315", "od280_od315"),
        ("_id", "id"),
        ("a.b-c", "a_b_c"),
        ("class", "class_"),
        ("self", "self_"),
    ],
)
def test_a_header_gets_a_feature_name_by_the_rule(header, feature):
    assert safe_name(header) == feature
    assert feature_names([header]) == {header: feature}


def test_feature_names_keep_valid_names_and_are_unique_ignoring_case():
    headers = ["Age", "age ", "AGE!", "Name", "€", "x_2", "x", "x?", "X.", "价格"]
    names = feature_names(headers)
    assert names == feature_names(list(headers))  # deterministic
    assert names["Age"] == "Age" and names["Name"] == "Name" and names["x_2"] == "x_2" and names["x"] == "x"
    assert names["age "] == "age_2" and names["AGE!"] == "age_3"  # "age" is Age's, ignoring case
    assert names["x?"] == "x_3" and names["X."] == "x_4"  # x and x_2 are taken by headers kept as they are
    assert names["€"] == "col_5" and names["价格"] == "col_10"  # nothing left: the column's position
    assert len({n.lower() for n in names.values()}) == len(headers)
    assert all(is_feature_name(n) for n in names.values())


def test_a_spec_maps_header_names_to_feature_names_both_ways():
    spec = _spec(columns={"x": "X (cm)", "answer": "Answer?"}, features__unused={"row_id": "an id"})
    problem = Problem.from_dict(spec)
    assert problem.header_of("x") == "X (cm)" and problem.header_of("kind") == "kind"
    assert problem.shown("answer") == "Answer? (answer)" and problem.shown("kind") == "kind"
    assert problem.header_names == {"x": "X (cm)", "kind": "kind", "row_id": "row_id", "answer": "Answer?"}
    assert Problem.from_json(problem.to_json()) == problem and problem.to_dict()["columns"] == spec["columns"]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        # A header written where the spec wants a feature name: the fix is the mapping, spelled out.
        ({"features__numeric": ["Monthly Charges"]}, '\\[columns\\] monthly_charges = "Monthly Charges"'),
        ({"features__numeric": ["a.b"]}, '\\[columns\\] a_b = "a.b"'),
        ({"features__numeric": ["class"]}, '\\[columns\\] class_ = "class"'),
        ({"columns": {"Monthly Charges": "x"}}, "columns.Monthly Charges: a feature name is letters"),
        ({"columns": {"x": "a,b"}}, "as the CSV header has it"),
        ({"columns": {"x": "X", "kind": "X"}}, "x and kind both name the header 'X'"),
        ({"columns": {"x": "kind"}}, "'kind' is also a column the spec names"),
    ],
)
def test_a_column_mapping_that_cannot_work_is_refused_with_the_fix(changes, match):
    with pytest.raises(ProblemError, match=match):
        Problem.from_dict(_spec(**changes))


# ---------------------------------------------------------------- dates and rare values


@pytest.mark.parametrize(
    ("dates", "match"),
    [
        ({"opened": "%Y-%m"}, r"features.dates.opened = '%Y-%m': write the format with %Y, %m and %d once each"),
        ({"opened": "%Y-%m-%d %H"}, "optionally %H:%M or %H:%M:%S"),
        ({"opened": "%d.%m.%y"}, r"%y is not one of %Y, %m, %d, %H, %M, %S"),
        ({"opened": 20240229}, "features.dates.opened = 20240229"),
        ({"x": "%Y-%m-%d"}, "'x' is listed twice: in features.numeric and features.dates"),
    ],
)
def test_a_date_format_that_cannot_parse_a_date_is_refused_naming_the_key_and_the_fix(dates, match):
    with pytest.raises(ProblemError, match=match):
        Problem.from_dict(_spec(features__dates=dates))


def test_a_date_part_named_as_another_column_is_refused():
    spec = _spec(features__dates={"opened": "%Y-%m-%d"}, features__numeric=["x", "opened_year"])
    with pytest.raises(ProblemError, match="features.dates.opened: its part.s. opened_year are named as column"):
        Problem.from_dict(spec)


def test_a_date_is_a_served_input_whose_parts_are_the_models_numbers_and_round_trips():
    problem = Problem.from_dict(_spec(features__dates={"opened": "%m/%d/%Y", "seen": "%Y-%m-%dT%H:%M:%S"}))
    assert problem.features.inputs == ("x", "kind", "opened", "seen") and "opened" in problem.served_columns
    assert problem.features.date_parts == {
        "opened": ("opened_days", "opened_year", "opened_month", "opened_weekday"),
        "seen": ("seen_days", "seen_year", "seen_month", "seen_weekday", "seen_hour"),
    }
    parts = problem.features.date_parts
    assert problem.features.numbers == ("x", *parts["opened"], *parts["seen"])
    assert Problem.from_json(problem.to_json()) == problem
    # A date part can be crossed like any number.
    Problem.from_dict(_spec(features__dates={"opened": "%Y-%m-%d"}, features__crosses=[["kind", "opened_month"]]))


def test_a_spec_without_dates_or_rare_values_has_the_json_it_had():
    spec = Problem.from_dict(_spec()).to_dict()["features"]
    assert "dates" not in spec and "vocab_min_count" not in spec


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ({"x": 10}, r"features.vocab_min_count.x: 'x' is not under features.categorical"),
        ({"kind": 0}, r"features.vocab_min_count.kind = 0: give the fewest rows"),
        ({"kind": 2.5}, r"features.vocab_min_count.kind = 2.5"),
    ],
)
def test_a_vocabularys_fewest_rows_is_a_whole_number_for_a_categorical_column(counts, match):
    with pytest.raises(ProblemError, match=match):
        Problem.from_dict(_spec(features__vocab_min_count=counts))
    assert Problem.from_dict(_spec(features__vocab_min_count={"kind": 10})).features.vocab_min_count == {"kind": 10}
