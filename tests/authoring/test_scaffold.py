"""The scaffold command: each inference rule on small CSVs, the folder it writes, and (slow)
public data sets nobody here wrote scaffolded and run end to end to a pushed model."""

from __future__ import annotations

import csv
import datetime
import glob
import json
import os
import re
import statistics
from collections.abc import Sequence

import pytest
import tensorflow as tf
import tensorflow_data_validation as tfdv

from authoring import contract, scaffold
from authoring.scaffold import ScaffoldError
from models import budget
from models import problem as problem_lib
from models.hparams import HParams
from models.problem import CONTRACT_FILE, PROBLEM_FILE, ModelFamily, Problem, Task
from pipeline.config import REPO_ROOT, PipelineConfig
from tests.support.problems import SHIPPED, SHIPPED_DIRS, as_spreadsheet_export


def _write(path, header: Sequence[str], rows: Sequence[Sequence], newline: str = "\n", bom: bool = False) -> str:
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        writer = csv.writer(f, lineterminator=newline)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def _labelled(tmp_path, labels: Sequence, name: str = "data.csv", **extra_columns) -> str:
    """A CSV with a label column and a numeric feature (plus ``extra_columns``: name -> values)."""
    header = ["x", *extra_columns, "y"]
    rows = [[i % 7, *(values[i] for values in extra_columns.values()), label] for i, label in enumerate(labels)]
    return _write(tmp_path / name, header, rows)


def _plan(tmp_path, labels: Sequence, task: str | None = None, **extra_columns) -> scaffold.Plan:
    return scaffold.plan(_labelled(tmp_path, labels, **extra_columns), "y", task)


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("file_name", "name"),
    [
        ("Breast Cancer.csv", "breast-cancer"),
        ("house_prices_2024.CSV", "house-prices-2024"),
        ("__weird--name__.csv", "weird-name"),
        ("___.csv", "problem"),
    ],
)
def test_the_name_comes_from_the_file_name(file_name, name):
    derived = scaffold.derive_name(f"/some/where/{file_name}")
    assert derived == name and scaffold.PIPELINE_NAME_PATTERN.fullmatch(derived)


def test_a_bad_name_is_refused(tmp_path):
    with pytest.raises(ScaffoldError, match="--name 'My_Problem' must match"):
        scaffold.plan(_labelled(tmp_path, ["a", "b"] * 10), "y", name="My_Problem")


def test_headers_that_cannot_name_a_feature_get_one_and_keep_their_own(tmp_path):
    header = ["mean radius", "ok", "od280/od315", "2023 Revenue", "Größe", "Is Spam?"]
    rows = [[i % 5, i % 7, i % 3, i * 1.5, i % 4, "yes" if i % 3 else "no"] for i in range(30)]
    planned = scaffold.plan(_write(tmp_path / "d.csv", header, rows), "Is Spam?")
    expected = problem_lib.feature_names(header)
    assert [c.name for c in planned.columns] == [expected[h] for h in header]
    assert planned.renamed == {expected[h]: h for h in header if h != "ok"}
    assert next(c for c in planned.columns if c.name == "ok").header == ""  # a feature name already: kept
    assert planned.label["column"] == expected["Is Spam?"] and "name" not in planned.label
    # --label takes the feature name too, with the same plan.
    assert scaffold.plan(str(tmp_path / "d.csv"), expected["Is Spam?"]).label == planned.label


def test_the_label_must_be_a_column_with_a_value_in_every_row(tmp_path):
    path = _labelled(tmp_path, ["a", "b", "", "a"])
    with pytest.raises(ScaffoldError, match="is not a column of the CSV; its columns: x, y"):
        scaffold.plan(path, "z")
    with pytest.raises(ScaffoldError, match="empty in 1 of 4 rows.*Remove those rows"):
        scaffold.plan(path, "y")
    with pytest.raises(ScaffoldError, match="one value only"):
        _plan(tmp_path, ["a"] * 10)


# ---------------------------------------------------------------- the task


@pytest.mark.parametrize(
    ("labels", "task", "because"),
    [
        (["cat", "dog"] * 20, Task.BINARY, "2 distinct values"),
        ([0, 1, 1] * 20, Task.BINARY, "2 distinct values"),
        (["a", "b", "c"] * 20, Task.MULTICLASS, "text with 3 distinct values"),
        ([1, 2, 3, 4] * 25, Task.MULTICLASS, "integers with few distinct values (4"),
        (["1.0", "2.0", "3.0"] * 40, Task.MULTICLASS, "integers with few distinct values (3"),
        (list(range(100)), Task.REGRESSION, "integers with many distinct values (100"),
        ([0.5, 1.5, 2.5] * 20, Task.REGRESSION, "numbers with fractions"),
    ],
)
def test_the_task_is_inferred_from_the_label_as_autogluon_does(tmp_path, labels, task, because):
    planned = _plan(tmp_path, labels)
    assert planned.task == task and because in planned.task_reason


def test_integer_labels_are_classes_only_when_few_relative_to_the_rows(tmp_path):
    # 12 distinct values: classes in 240 rows (5%), a quantity in 60 rows (20% > 10%).
    assert _plan(tmp_path, list(range(12)) * 20).task == Task.MULTICLASS
    assert _plan(tmp_path, list(range(12)) * 5).task == Task.REGRESSION
    # Above 1,000 rows the share is 5%: 60 values in 1,200 rows (5%) are classes, in 1,080 rows (5.6%) not.
    assert _plan(tmp_path, list(range(60)) * 20).task == Task.MULTICLASS
    assert _plan(tmp_path, list(range(60)) * 18).task == Task.REGRESSION


def test_a_given_task_is_taken_and_checked_against_the_label(tmp_path):
    planned = _plan(tmp_path, [1, 2, 3, 4] * 25, task="regression")
    assert planned.task == Task.REGRESSION and planned.task_reason == "given (--task)"
    with pytest.raises(ScaffoldError, match="has 3 distinct values; a binary label has 2"):
        _plan(tmp_path, ["a", "b", "c"] * 20, task="binary")
    with pytest.raises(ScaffoldError, match="2 distinct values: use --task binary"):
        _plan(tmp_path, ["a", "b"] * 20, task="multiclass")
    with pytest.raises(ScaffoldError, match="holds text \\(such as 'high'.*regression needs numbers"):
        _plan(tmp_path, ["high", "low", "mid"] * 20, task="regression")
    with pytest.raises(ScaffoldError, match="needs whole numbers"):
        _plan(tmp_path, [0.5, 1.5, 2.5] * 20, task="multiclass")


# ---------------------------------------------------------------- the label


@pytest.mark.parametrize(
    ("labels", "positive", "because"),
    [
        (["No", "Yes", "No"] * 10, "Yes", "reads as positive"),
        (["false", "TRUE"] * 10, "TRUE", "reads as positive"),
        ([0, 1, 0] * 10, "1", "reads as positive"),
        (["benign", "benign", "malignant"] * 10, "malignant", "the less frequent one, 10 of 30 rows"),
        ([1, 2, 2] * 10, "1", "the less frequent one"),
        ([2, 1, 1] * 10, "2", "the less frequent one"),  # 1 reads as positive only against 0
    ],
)
def test_the_positive_class_reads_as_positive_else_is_the_rarer(tmp_path, labels, positive, because):
    planned = _plan(tmp_path, labels)
    assert planned.label == {"column": "y", "positive": positive}
    assert because in planned.label_reason and repr(positive) in planned.label_reason


def test_multiclass_classes_are_sorted_as_text_as_the_pipeline_reads_them(tmp_path):
    assert _plan(tmp_path, ["b", "c", "a", "b"] * 10).label["classes"] == ["a", "b", "c"]
    # Numbers are read as integers by preprocessing_fn: "2.0" is class "2"; sorted as text.
    assert _plan(tmp_path, ["10.0", "2.0", "9.0"] * 40).label["classes"] == ["10", "2", "9"]


def test_rare_classes_and_too_many_classes_are_refused(tmp_path):
    labels = ["a", "b", "c"] * 10 + ["d"] * (scaffold.MIN_CLASS_ROWS - 1)
    with pytest.raises(ScaffoldError, match=f"fewer than {scaffold.MIN_CLASS_ROWS} rows: 'd' \\(9 rows\\)"):
        _plan(tmp_path, labels)
    with pytest.raises(ScaffoldError, match="'yes' \\(4 rows\\).*collect more rows"):
        _plan(tmp_path, ["no"] * 50 + ["yes"] * 4)
    many = [f"class{i}" for i in range(scaffold.MAX_CLASSES + 1)]
    with pytest.raises(ScaffoldError, match="1001 distinct values, more than the 1000 classes"):
        _plan(tmp_path, many, task="multiclass")


def test_a_label_named_no_identifier_is_its_feature_name_in_the_spec(tmp_path):
    path = _write(tmp_path / "d.csv", ["x", "is-spam"], [[i % 9, "yes" if i % 3 else "no"] for i in range(30)])
    planned = scaffold.plan(path, "is-spam")
    feature = problem_lib.feature_names(["x", "is-spam"])["is-spam"]
    assert planned.label == {"column": feature, "positive": "yes"} and planned.renamed == {feature: "is-spam"}


# ---------------------------------------------------------------- the columns


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> str:
    """100 rows with one column per treatment rule, and a binary label."""
    rows = []
    for i in range(100):
        rows.append(
            [
                f"user{i:03d}",  # id (text)
                1000 + i,  # id (integers)
                "same",  # constant
                "x" if i < 3 else "",  # empty in 97%
                f"free text number {i // 1}" if i % 10 else "",  # free text
                ["red", "green", "blue"][i % 3],  # categories
                i % 5,  # integer codes
                (i * 37) % 90,  # integers with many values
                round(1 + (i % 10) * 0.5, 2) if i != 7 else 500.0,  # heavy tail, non-negative
                round(-5 + (i % 10) * 0.5, 2) if i != 7 else 500.0,  # heavy tail but negative
                "" if i % 20 == 0 else round(i * 0.3, 1),  # numbers, sometimes empty
                "NA" if i % 25 == 0 else str(i),  # numbers with a token for "no value"
                "yes" if i % 3 == 0 else "no",  # the label
            ]
        )
    header = [
        "user_id",
        "order_number",
        "country",
        "comment",
        "notes",
        "colour",
        "grade",
        "minutes",
        "amount",
        "balance",
        "weight",
        "age",
        "churned",
    ]
    return _write(tmp_path_factory.mktemp("mixed") / "Customer Churn.csv", header, rows)


@pytest.fixture(scope="module")
def mixed_plan(mixed) -> scaffold.Plan:
    return scaffold.plan(mixed, "churned")


@pytest.mark.parametrize(
    ("column", "kind", "because"),
    [
        ("user_id", "unused", "unique in every row: an identifier"),
        ("order_number", "unused", "unique in every row: an identifier"),
        ("country", "unused", "constant: 'same'"),
        ("comment", "unused", "empty in 97% of the rows"),
        ("notes", "unused", "free text or an id"),
        ("colour", "categorical", "text with 3 distinct values"),
        ("grade", "categorical", "integers with 5 distinct values"),
        ("minutes", "numeric", "numbers from 0 to 89"),
        ("amount", "log_numeric", "max 500 > 10x the median"),
        ("balance", "numeric", "numbers from -5 to 500"),
        ("weight", "numeric", "numbers from"),
        ("age", "unused", "free text or an id"),
        ("churned", "label", "not a model input"),
    ],
)
def test_each_column_is_treated_by_its_rule_with_a_reason(mixed_plan, column, kind, because):
    (found,) = [c for c in mixed_plan.columns if c.name == column]
    assert found.kind == kind and because in found.reason


def test_a_text_column_of_numbers_but_for_a_token_is_pointed_out(mixed_plan):
    (note,) = [n for n in mixed_plan.notes if "'age'" in n]
    assert "'NA' (4 rows)" in note and "empty those cells" in note


def test_slices_are_categorical_inputs_with_few_values(mixed_plan):
    assert mixed_plan.slices == ["colour", "grade"]


def test_types_are_the_pipelines_a_bom_and_crlf_change_nothing(tmp_path):
    rows = [[i, ["a", "b"][i % 2], "yes" if i % 4 == 0 else "no"] for i in range(40)]
    plain = scaffold.plan(_write(tmp_path / "plain.csv", ["n", "t", "y"], rows), "y")
    windows = scaffold.plan(_write(tmp_path / "excel.csv", ["n", "t", "y"], rows, newline="\r\n", bom=True), "y")
    assert [(c.name, c.kind, c.type) for c in windows.columns] == [(c.name, c.kind, c.type) for c in plain.columns]
    assert windows.label == plain.label == {"column": "y", "positive": "yes"}


def test_a_csv_split_by_semicolons_is_named(tmp_path, capsys):
    path = tmp_path / "semi.csv"
    path.write_text("a;b;y\n1;2;x\n")
    assert scaffold.main(["--csv", str(path), "--label", "y", "--output", str(tmp_path / "out")]) == 2
    assert "split by semicolons" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_csv_with_nothing_to_learn_from_is_refused(tmp_path):
    path = _write(tmp_path / "d.csv", ["id", "y"], [[f"r{i}", "a" if i % 2 else "b"] for i in range(20)])
    with pytest.raises(ScaffoldError, match="no column can feed the model: 'id' unique in every row"):
        scaffold.plan(path, "y")


# ---------------------------------------------------------------- the blessing


def test_binary_is_blessed_on_an_auc_floor(tmp_path):
    planned = _plan(tmp_path, ["a", "b", "b"] * 20)
    assert (planned.metric, planned.threshold) == ("auc", scaffold.AUC_FLOOR)
    assert planned.max_regression == scaffold.MAX_REGRESSION["auc"]


def test_multiclass_floor_is_the_majority_share_and_a_margin(tmp_path):
    labels = ["a"] * 50 + ["b"] * 30 + ["c"] * 20
    planned = _plan(tmp_path, labels)
    majority = labels.count("a") / len(labels)
    assert planned.metric == "accuracy"
    assert majority < planned.threshold <= majority + scaffold.ACCURACY_MARGIN
    assert f"scores {majority:.3f}" in planned.threshold_reason
    # 100 rows: an eval split of about 33, two of which are more than 0.02.
    eval_rows = len(labels) * scaffold.EVAL_SHARE
    assert 2 / eval_rows - 1e-9 <= planned.max_regression <= 2 / eval_rows + 0.01
    assert "two rows of an eval split of about 33" in planned.max_regression_reason
    # A dominant class: the floor stays below 1, halfway from its share.
    skewed = ["a"] * 960 + ["b"] * 20 + ["c"] * 20
    dominant = _plan(tmp_path, skewed)
    assert skewed.count("a") / len(skewed) < dominant.threshold <= (1 + skewed.count("a") / len(skewed)) / 2 < 1
    assert dominant.max_regression == scaffold.MAX_REGRESSION["accuracy"]  # 1,000 rows: 2 eval rows are 0.6%


def test_regression_ceiling_is_what_answering_the_mean_scores(tmp_path):
    labels = [round(10 + i * 1.37 + (i % 7) * 3.1, 2) for i in range(200)]
    planned = _plan(tmp_path, labels)
    deviation = statistics.pstdev(labels)
    assert planned.metric == "rmse"
    assert deviation <= planned.threshold <= deviation * 1.01
    assert 0 < planned.max_regression <= deviation * scaffold.RMSE_MAX_REGRESSION_SHARE * 1.01


# ---------------------------------------------------------------- the folder


@pytest.fixture(scope="module")
def written(mixed, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scaffolded") / "churn"
    planned, path, drafted = scaffold.scaffold(mixed, "churned", output=str(folder))
    return planned, path, drafted


def test_the_folder_holds_the_data_a_spec_and_a_draft_contract(written, mixed):
    planned, folder, _ = written
    assert sorted(os.listdir(folder)) == sorted(["customer-churn.csv", PROBLEM_FILE, CONTRACT_FILE])
    with open(mixed, "rb") as source, open(os.path.join(folder, "customer-churn.csv"), "rb") as copy:
        assert source.read() == copy.read()
    problem = problem_lib.load(folder)
    assert problem.name == planned.name == "customer-churn" and problem.task == Task.BINARY
    assert problem.label.positive == "yes" and problem.label_only_columns == ("churned",)
    assert set(problem.features.unused) == {c.name for c in planned.columns if c.kind == "unused"}
    assert problem.features.log_numeric == ("amount",) and problem.features.categorical == ("colour", "grade")
    assert problem.blessing.threshold == planned.threshold and problem.slices == ("colour", "grade")
    # The runners accept it as it is: its contract is in place.
    config = PipelineConfig(problem=problem, output_root=str(folder))
    assert config.schema_path == os.path.join(folder, CONTRACT_FILE)


def test_the_spec_says_why_next_to_each_decision(written):
    _, folder, _ = written
    text = open(os.path.join(folder, PROBLEM_FILE)).read()
    assert "# Drafted by `python -m authoring.scaffold` from Customer Churn.csv (100 rows)" in text
    assert '"amount",  # never negative and heavy-tailed' in text
    assert '"user_id" = "unique in every row: an identifier' in text
    # How long it trains, from the rows the train split will hold (about 2 of 3).
    planned, _, _ = written
    assert planned.budget == budget.from_data(67, HParams().per_replica_batch_size)
    assert "# Training: no step count here" in text and planned.budget.reason in text.replace("\n#   ", " ")


def test_the_training_budget_follows_the_rows(tmp_path):
    small = scaffold.training_budget(600)
    large = scaffold.training_budget(600_000)
    assert small.train_rows == 400 and large.train_rows == 400_000
    assert small.max_steps < large.max_steps and small.reason != large.reason


def test_the_contract_is_a_label_aware_draft_the_data_meets(written):
    _, folder, drafted = written
    text = open(os.path.join(folder, CONTRACT_FILE)).read()
    assert text.startswith("# DRAFT data contract, drafted by `python -m authoring.scaffold` from customer-churn.csv")
    schema = tfdv.load_schema_text(os.path.join(folder, CONTRACT_FILE))
    churned = tfdv.get_feature(schema, "churned")
    assert list(churned.not_in_environment) == ["SERVING"] and churned.HasField("shape")
    assert list(schema.annotation.tag) == [f"min_label_class_fraction={drafted.min_label_class_fraction:g}"]
    # An id the model never reads has no range to outgrow.
    assert not tfdv.get_feature(schema, "order_number").HasField("int_domain")

    from authoring import contract
    from components.anomaly_gate import describe_anomalies, describe_missing

    data = contract.csv_statistics([os.path.join(folder, "customer-churn.csv")])
    assert describe_anomalies({"all": tfdv.validate_statistics(data, schema)}) == []
    assert describe_missing({"all": data}, schema) == []


def test_an_existing_folder_is_kept_unless_forced(written, mixed, tmp_path):
    _, folder, _ = written
    with pytest.raises(ScaffoldError, match="exists and is not empty: pass --force"):
        scaffold.scaffold(mixed, "churned", output=folder)
    other = tmp_path / "other"
    other.mkdir()
    (other / "old.csv").write_text("a\n1\n")
    with pytest.raises(ScaffoldError, match="holds other CSV file\\(s\\) \\(old.csv\\)"):
        scaffold.scaffold(mixed, "churned", output=str(other), force=True)


def test_forced_it_writes_into_the_folder_and_a_csv_already_there_stays_the_data(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    rows = [[i % 9, ["a", "b"][i % 2], "yes" if i % 3 == 0 else "no"] for i in range(60)]
    source = _write(folder / "Export 2024.csv", ["n", "t", "y"], rows)
    (folder / "README.md").write_text("mine\n")
    with pytest.raises(ScaffoldError, match="--force"):
        scaffold.scaffold(source, "y", output=str(folder))
    planned, path, _ = scaffold.scaffold(source, "y", output=str(folder), force=True)
    assert planned.name == "export-2024"
    assert sorted(os.listdir(path)) == sorted(["Export 2024.csv", "README.md", PROBLEM_FILE, CONTRACT_FILE])


def test_the_command_prints_what_to_review_and_what_to_run(mixed, tmp_path, capsys):
    folder = tmp_path / "churn"
    argv = ["--csv", mixed, "--label", "churned", "--output", str(folder), "--name", "churn"]
    assert scaffold.main(argv) == 0
    out = capsys.readouterr().out
    assert "Task: binary, because the label has 2 distinct values" in out
    assert "Label: 'churned': positive class 'yes': 'yes' reads as positive" in out
    assert "user_id" in out and "unique in every row" in out
    assert "Blessing: auc at least 0.6" in out and "Slices: colour, grade." in out
    assert "observed ranges" in out and "minutes 0..89" in out
    assert "min_label_class_fraction=" in out
    assert "Training: until the validation metric stops improving" in out and "--train-steps N overrides" in out
    assert out.rstrip().endswith(f"python local_runner.py --problem {folder}")
    assert problem_lib.load(str(folder)).name == "churn"
    assert "Model: chosen by each run: the network and the gradient-boosted trees" in out
    assert problem_lib.load(str(folder)).model == ModelFamily.CHOOSE
    assert scaffold.main(argv) == 2
    assert "--force" in capsys.readouterr().err


def test_choose_model_hands_the_drafted_folder_to_the_chooser_and_says_its_choice(mixed, tmp_path, capsys, monkeypatch):
    """The wiring only: the chooser's own runs are tests/authoring/test_choose_model.py's."""
    from authoring import choose_model
    from models.choice import Choice, Trial

    handed = []
    trials = (Trial(ModelFamily.NETWORK, 0.81, 40.0), Trial(ModelFamily.TREES, 0.84, 35.0))

    def choose(folder):
        handed.append(folder)
        choose_model.write_family(folder, ModelFamily.TREES, "chosen here")
        return Choice(ModelFamily.TREES, "auc", "", trials, 400, 100), 90.0

    monkeypatch.setattr(choose_model, "choose", choose)
    folder = tmp_path / "churn"
    argv = ["--csv", mixed, "--label", "churned", "--output", str(folder), "--choose-model"]
    assert scaffold.main(argv) == 0
    out = capsys.readouterr().out
    assert handed == [str(folder)] and problem_lib.load(str(folder)).model == ModelFamily.TREES
    assert "Model: Chosen by `python -m authoring.choose_model`" in out and "network 0.8100, trees 0.8400" in out


def test_above_the_choices_rows_the_review_says_the_choice_is_made_on_a_sample(mixed, tmp_path, monkeypatch):
    folder = tmp_path / "churn"
    p, _, drafted = scaffold.scaffold(mixed, "churned", output=str(folder), force=True)
    said = scaffold.review(p, str(folder), drafted)
    assert f"four fifths of the training split (about {scaffold.train_rows(p):,} rows)" in said
    assert f"python -m authoring.choose_model --problem {folder}" in said
    monkeypatch.setattr(scaffold, "HParams", lambda: HParams(choice_rows=scaffold.train_rows(p) - 1))
    said = scaffold.review(p, str(folder), drafted)
    assert f"a sample of at most {scaffold.train_rows(p) - 1:,} of the training split's about" in said
    assert "a sample of" in scaffold.model_comment(p)


# ---------------------------------------------------------------- large files


def _decisions(planned: scaffold.Plan) -> tuple:
    return (
        planned.task,
        planned.label,
        [(c.name, c.kind, c.type, c.missing) for c in planned.columns],
        (planned.metric, planned.threshold, planned.max_regression),
        planned.slices,
    )


@pytest.mark.parametrize(
    ("folder", "label"),
    [("penguins", "species"), ("penguin-body-mass", "body_mass_g"), ("taxi", "trip_start_day")],
)
def test_past_the_sample_and_the_exact_split_sizes_the_shipped_data_gets_the_same_decisions(
    folder, label, tmp_path, monkeypatch
):
    """A file larger than the profile's sample and the contract's hashed rows takes the
    medians from a random sample and divides common classes' rows between the splits. On
    the shipped data, with those sizes made small enough to apply, nothing it decides
    changes: the spec's decisions and the contract."""
    (csv_path,) = glob.glob(str(SHIPPED_DIRS[folder] / "*.csv"))
    exact, exact_folder, exact_draft = scaffold.scaffold(csv_path, label, output=str(tmp_path / "exact"))
    monkeypatch.setattr(scaffold.csv_profile, "SAMPLE_ROWS", 60)
    monkeypatch.setattr(contract, "EXACT_SPLIT_ROWS", 100)
    monkeypatch.setattr(contract, "RARE_CLASS_ROWS", 60)
    sampled, sampled_folder, sampled_draft = scaffold.scaffold(csv_path, label, output=str(tmp_path / "sampled"))
    assert _decisions(sampled) == _decisions(exact)
    assert sampled_draft.schema == exact_draft.schema
    assert any(c.kind == "label" for c in sampled.columns)
    if exact.task != Task.REGRESSION:  # the sizes did apply
        assert any("divided" in c for c in sampled_draft.annotation_comments)
        assert not any("divided" in c for c in exact_draft.annotation_comments)


# ---------------------------------------------------------------- end to end (slow)


def _breast_cancer(path) -> str:
    """scikit-learn's copy of the UCI Wisconsin diagnostic breast cancer data, its target
    as text. Its feature names have spaces: '_' in their place keeps these three runs on
    headers that are feature names already (a run on headers that are not: below)."""
    from sklearn.datasets import load_breast_cancer

    frame = load_breast_cancer(as_frame=True).frame
    frame["target"] = frame["target"].map({0: "malignant", 1: "benign"})
    frame.columns = [c.replace(" ", "_") for c in frame.columns]
    frame.rename(columns={"target": "diagnosis"}).to_csv(path, index=False)
    return "diagnosis"


def _wine(path) -> str:
    from sklearn.datasets import load_wine

    frame = load_wine(as_frame=True).frame
    frame.columns = [c.replace("/", "_") for c in frame.columns]  # od280/od315_of_diluted_wines
    frame.rename(columns={"target": "cultivar"}).to_csv(path, index=False)
    return "cultivar"


def _diabetes(path) -> str:
    from sklearn.datasets import load_diabetes

    load_diabetes(as_frame=True).frame.rename(columns={"target": "progression"}).to_csv(path, index=False)
    return "progression"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("write", "task"),
    [(_breast_cancer, Task.BINARY), (_wine, Task.MULTICLASS), (_diabetes, Task.REGRESSION)],
    ids=["breast-cancer", "wine", "diabetes"],
)
def test_a_public_csv_scaffolded_runs_to_a_blessed_pushed_model(tmp_path, write, task):
    import local_runner
    from report.run_summary import summarize_run

    source = tmp_path / "download" / f"{write.__name__.strip('_')}.csv"
    source.parent.mkdir()
    label = write(source)
    folder = str(tmp_path / "problem")
    assert scaffold.main(["--csv", str(source), "--label", label, "--output", folder]) == 0
    problem = problem_lib.load(folder)
    assert problem.task == task  # inferred

    output_root = str(tmp_path / "outputs")
    argv = ["--problem", folder, "--output-root", output_root, "--train-steps", "200", "--no-report"]
    assert local_runner.main(argv) == 0
    config = PipelineConfig(problem=problem, output_root=output_root)
    summary = summarize_run(local_runner.metadata_config(config), config.pipeline_name)
    states = {c.node_id: c.state for c in summary.components}
    assert states["ImportSchemaGen"] == "complete", states  # checked against the drafted contract
    assert all(state == "complete" for state in states.values()), states
    assert summary.blessed and summary.pushed_to
    assert os.path.exists(os.path.join(summary.pushed_to, "saved_model.pb"))
    value = summary.metrics[problem.blessing.metric]
    assert value >= problem.blessing.threshold if problem.higher_is_better else value <= problem.blessing.threshold


@pytest.mark.slow
def test_the_commands_default_output_holds_no_library_line(tmp_path):
    """In a process of its own, as a person runs it: TensorFlow's, absl's and the Google
    clients' lines at import and while drafting the contract go to the log it names."""
    import subprocess
    import sys

    from tests.support.terminal import library_lines

    folder = tmp_path / "species"
    done = subprocess.run(
        [sys.executable, "-m", "authoring.scaffold", "--csv", str(REPO_ROOT / "data" / "penguins" / "penguins.csv")]
        + ["--label", "species"]
        + ["--output", str(folder), "--name", "species"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=600,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert library_lines(done.stdout) == []
    first, *review = done.stdout.splitlines()
    log = first.removeprefix("Library output (TensorFlow, TFX, Beam): ")
    assert log != first and os.path.isfile(log)
    with open(log) as f:
        assert library_lines(f.read())  # the libraries did speak: to the log
    assert review[-1].strip() == f"python local_runner.py --problem {folder}"


# ---------------------------------------------------------------- headers as people write them


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[dict[str, str], tuple]:
    """The penguins' CSV with every header as a spreadsheet might write it, scaffolded."""
    folder = tmp_path_factory.mktemp("exported")
    renamed = as_spreadsheet_export(SHIPPED_DIRS["penguins"] / "penguins.csv", folder / "Penguins Export.csv")
    label = renamed[SHIPPED["penguins"].label.column]
    return renamed, scaffold.scaffold(str(folder / "Penguins Export.csv"), label, output=str(folder / "problem"))


@pytest.fixture(scope="module")
def export_statistics(exported):
    """The scaffolded export's rows, as the drafted contract checks them (``contract.csv_statistics``)."""
    _, (_, folder, _) = exported
    return contract.csv_statistics(glob.glob(os.path.join(folder, "*.csv")), problem_lib.load(folder))


def test_a_csv_of_spreadsheet_headers_scaffolds_a_spec_naming_both(exported):
    renamed, (planned, folder, _) = exported
    headers = list(renamed.values())
    assert all(not problem_lib.is_feature_name(h) for h in headers)  # every one needs a feature name
    features = problem_lib.feature_names(headers)
    problem = problem_lib.load(folder)
    assert problem.columns == {features[h]: h for h in headers} == planned.renamed
    assert set(problem.raw_columns) == set(features.values())
    assert problem.header_of(problem.label.column) == renamed[SHIPPED["penguins"].label.column]
    text = open(os.path.join(folder, PROBLEM_FILE)).read()
    assert all(f"{features[h]} = {json.dumps(h, ensure_ascii=False)}" in text for h in headers)
    assert Problem.from_json(problem.to_json()).columns == problem.columns


def test_the_exports_rows_read_by_feature_name_and_meet_the_drafted_contract(exported, export_statistics, tmp_path):
    from components import csv_example_gen
    from components.anomaly_gate import describe_anomalies, describe_missing

    _, (_, folder, _) = exported
    problem = problem_lib.load(folder)
    csv_path = glob.glob(os.path.join(folder, "*.csv"))[0]
    rows = csv_example_gen.convert([csv_path], [str(tmp_path)], None, 1, headers=problem.header_names)
    records = tf.data.TFRecordDataset(glob.glob(str(tmp_path / "*.gz")), compression_type="GZIP")
    keys = {
        key for record in records.as_numpy_iterator() for key in tf.train.Example.FromString(record).features.feature
    }
    assert rows == [sum(1 for _ in open(csv_path)) - 1] and keys == set(problem.header_names)
    schema = tfdv.load_schema_text(problem.contract_path)
    assert {f.name for f in schema.feature} == set(problem.header_names)
    assert describe_anomalies({"all": tfdv.validate_statistics(export_statistics, schema)}) == []
    assert describe_missing({"all": export_statistics}, schema) == []


def test_new_data_with_a_header_changed_is_refused_naming_the_column_and_the_fix(exported, export_statistics, tmp_path):
    from components.csv_encoding import CsvFileError

    renamed, (_, folder, _) = exported
    problem = problem_lib.load(folder)
    csv_path = glob.glob(os.path.join(folder, "*.csv"))[0]
    feature, header = next((f, h) for f, h in problem.columns.items() if f != problem.label.column)
    changed = header.upper()  # another export of the same data
    with open(csv_path, encoding="utf-8") as f:
        text = f.read()
    (tmp_path / "span-2.csv").write_text(text.replace(header, changed, 1), encoding="utf-8")
    with pytest.raises(CsvFileError) as raised:
        contract.csv_statistics([str(tmp_path / "span-2.csv")], problem)
    message = str(raised.value)
    assert f"{changed!r}" in message and f"rename it back to {header!r}" in message
    assert f"[columns] {feature} = {changed!r}" in message
    # Changed to a name that can be a feature's, the file reads; the contract then misses the
    # column and finds a new one.
    from components.anomaly_gate import describe_anomalies

    valid = "Renamed" + re.sub(r"\W", "", header)
    (tmp_path / "span-3.csv").write_text(text.replace(header, valid, 1), encoding="utf-8")
    data = contract.csv_statistics([str(tmp_path / "span-3.csv")], problem)
    lines = describe_anomalies({"all": tfdv.validate_statistics(data, tfdv.load_schema_text(problem.contract_path))})
    assert any(feature in line for line in lines) and any(valid in line for line in lines), lines
    # The header's feature name instead of its own name is the same column: the file reads as it did.
    (tmp_path / "features.csv").write_text(text.replace(header, feature, 1), encoding="utf-8")
    assert contract.csv_statistics([str(tmp_path / "features.csv")], problem) == export_statistics


@pytest.mark.slow
def test_a_csv_of_spreadsheet_headers_runs_to_a_pushed_model_answering_by_feature_name(exported, tmp_path):
    """The scaffolded export run end to end, with serving data under the same headers (for
    skew): the pushed model's serving_raw takes the feature names, and a request built from
    the export's rows gets an answer."""
    import local_runner
    from rehearsal.serving import instances_from_csv
    from report.run_summary import summarize_run
    from tests.support.runs import SMALL_RUN

    _, (_, folder, _) = exported
    problem = problem_lib.load(folder)
    csv_path = glob.glob(os.path.join(folder, "*.csv"))[0]
    serving = tmp_path / "serving"
    serving.mkdir()
    label = problem.header_of(problem.label.column)
    with open(csv_path, newline="", encoding="utf-8") as source:
        rows = list(csv.DictReader(source))
    with open(serving / "data.csv", "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, [h for h in rows[0] if h != label], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    output_root = str(tmp_path / "outputs")
    argv = ["--problem", folder, "--output-root", output_root, "--serving-data-root", str(serving), *SMALL_RUN]
    assert local_runner.main(argv) == 0
    config = PipelineConfig(problem=problem, output_root=output_root, serving_data_root=str(serving))
    summary = summarize_run(local_runner.metadata_config(config), config.pipeline_name)
    states = {c.node_id: c.state for c in summary.components}
    assert all(state == "complete" for state in states.values()) and "ServingExampleGen" in states, states
    assert summary.drift is not None and summary.drift.get("serving"), summary.drift
    served = tf.saved_model.load(summary.pushed_to).signatures["serving_raw"]
    inputs = set(served.structured_input_signature[1])
    assert inputs == set(problem.raw_columns) - set(problem.not_served_columns)
    instances = instances_from_csv(csv_path, 5, drop=problem.not_served_columns, headers=problem.header_names)
    answer = served(**{key: tf.constant([row[key] for row in instances]) for key in inputs})
    assert answer[problem.label.name].shape[0] == 5


# ---------------------------------------------------------------- dates and rare text


@pytest.fixture(scope="module")
def dated(tmp_path_factory) -> str:
    """Dates in several formats, one with a bad cell, and text with many rare values."""
    rows = []
    for i in range(300):
        day = datetime.date(2021, 1, 1) + datetime.timedelta(days=7 * i + i % 5)
        rows.append(
            [
                "unknown" if i == 7 else day.isoformat(),  # a bad cell
                f"{day.isoformat()} {i % 24:02d}:{i % 60:02d}",
                f"{day.month}/{day.day}/{day.year}",  # days past 12: month first
                f"{1 + i % 12:02d}/{1 + i % 12:02d}/2022",  # no day past 12: ambiguous
                f"word {i % 140}",  # 140 values of about 2 rows each: too rare
                ["red", "green", "blue"][i % 3] if i % 4 else f"shade {i}",  # a quarter rare
                "yes" if i % 3 == 0 else "no",
            ]
        )
    header = ["opened", "stamp", "us_date", "either", "tag", "colour", "y"]
    return _write(tmp_path_factory.mktemp("dated") / "dated.csv", header, rows)


@pytest.fixture(scope="module")
def dated_written(dated, tmp_path_factory):
    return scaffold.scaffold(dated, "y", output=str(tmp_path_factory.mktemp("dated-problem") / "dated"))


@pytest.mark.parametrize(
    ("column", "kind", "because", "form", "min_count"),
    [
        ("opened", "date", "dates (%Y-%m-%d, 300 distinct values such as '2021-01-01'): days, year, month, "
         "weekday, each z-scored; 1 cell(s) are no such date and count as missing", "%Y-%m-%d", 0),
        ("stamp", "date", "days, year, month, weekday, hour, each z-scored", "%Y-%m-%d %H:%M", 0),
        ("us_date", "date", "dates (%m/%d/%Y,", "%m/%d/%Y", 0),
        ("either", "unused", "'%m/%d/%Y' or '%d/%m/%Y' read every one alike (no day past 12 tells day from "
         "month): say which under [features.dates], e.g. either = '%m/%d/%Y'", "", 0),
        ("tag", "unused", "most rows' (300 of 300) seen fewer than 38 times: too rare", "", 0),
        ("colour", "categorical", "the 3 seen at least 25 times in the training split have a weight each, the "
         "rarer ones (75 rows) share one", "", scaffold.VOCAB_MIN_COUNT),
    ],
)  # fmt: skip
def test_dates_become_numbers_and_rare_text_values_no_weight_of_their_own(
    dated_written, column, kind, because, form, min_count
):
    planned, _, _ = dated_written
    (found,) = [c for c in planned.columns if c.name == column]
    assert (found.kind, found.date_format, found.min_count) == (kind, form, min_count)
    assert because in found.reason


def test_the_spec_lists_the_dates_and_the_rare_values_and_the_review_says_so(dated_written):
    planned, folder, drafted = dated_written
    problem = problem_lib.load(folder)
    assert problem.features.dates == {"opened": "%Y-%m-%d", "stamp": "%Y-%m-%d %H:%M", "us_date": "%m/%d/%Y"}
    assert problem.features.vocab_min_count == {"colour": scaffold.VOCAB_MIN_COUNT}
    assert problem.features.date_parts["stamp"] == tuple(
        f"stamp_{part}" for part in ("days", "year", "month", "weekday", "hour")
    )
    assert set(problem.features.unused) == {"either", "tag"}
    text = scaffold.review(planned, folder, drafted)
    assert re.search(r"opened +date +dates \(%Y-%m-%d, 300 distinct values", text)
    assert re.search(r"either +unused +dates, but '%m/%d/%Y' or '%d/%m/%Y' read every one alike", text)
    assert re.search(r"colour +categorical +text with \d+ distinct values: the 3 seen at least 25 times", text)


def test_the_contract_keeps_a_date_as_text_with_no_closed_domain_or_drift_threshold(dated_written):
    _, _, drafted = dated_written
    from tensorflow_metadata.proto.v0 import schema_pb2

    opened = tfdv.get_feature(drafted.schema, "opened")
    assert opened.type == schema_pb2.BYTES
    assert not opened.HasField("domain") and not opened.HasField("drift_comparator")
    assert any("A date, %Y-%m-%d (features.dates)" in line for line in drafted.feature_comments["opened"])
