"""bench/quality.py, bench/datasets.py and bench/reference.py without a pipeline run: every
registered data set loads from its package (no network) into a CSV the scaffold plans as
registered, the references score a hand-made split as they must, the goal and the table."""

from __future__ import annotations

import json
import math
import os
from unittest.mock import ANY

import numpy as np
import pytest

from authoring import scaffold
from bench import datasets, quality, reference
from models.choice import Choice, Trial
from models.problem import ModelFamily, Problem, Task

# Rows the scaffold plans on in this test: a larger data set is thinned evenly to about this
# many (its planning at full size takes seconds the suite does not have; the benchmark plans
# and runs the whole).
PLANNED_ROWS = 30_000


@pytest.mark.usefixtures("loopback_only")
@pytest.mark.parametrize("name", sorted(datasets.DATASETS))
def test_each_data_set_loads_from_its_package_into_a_csv_the_scaffold_plans_as_registered(name, tmp_path):
    dataset = datasets.DATASETS[name]
    csv_path = tmp_path / f"{name}.csv"
    if dataset.rows > PLANNED_ROWS:
        data = dataset.load()
        data.iloc[:: math.ceil(len(data) / PLANNED_ROWS)].to_csv(csv_path, index=False)
    else:
        data = dataset.write_csv(str(csv_path))
    assert len(data) == dataset.rows and dataset.label in data.columns
    assert data[dataset.label].notna().all()
    plan = scaffold.plan(str(csv_path), dataset.label, task=dataset.task, name=name)
    assert plan.task == Task(dataset.task)
    assert plan.metric == {"binary": "auc", "multiclass": "accuracy", "regression": "rmse"}[dataset.task]
    assert [c for c in plan.columns if c.kind not in ("unused", "label")]


def test_the_registry_covers_the_tasks_sizes_and_rare_classes_it_promises():
    registered = list(datasets.DATASETS.values())
    assert len(registered) >= 8
    assert {d.task for d in registered} == {"binary", "multiclass", "regression"}
    assert min(d.rows for d in registered) < 1000 and max(d.rows for d in registered) > 100_000
    assert not {d.name for d in registered} & {"taxi", "penguins", "penguin-species", "penguin-body-mass"}
    assert all(d.cleaning for d in registered)
    assert [d.name for d in datasets.chosen("fair, wine")] == ["fair", "wine"]
    with pytest.raises(ValueError, match="unknown data set"):
        datasets.chosen("fair,nope")


def test_feature_names_become_what_the_scaffold_accepts():
    import pandas as pd

    renamed = datasets.feature_names(pd.DataFrame(columns=["mean radius", "od280/od315_of_x", "ok_1"]))
    assert list(renamed.columns) == ["mean_radius", "od280_od315_of_x", "ok_1"]


# --- the references on a hand-made split ----------------------------------------------------


def _problem(task: str, label: dict, metric: str, threshold: float) -> Problem:
    return Problem.from_dict(
        {
            "name": "toy",
            "task": task,
            "label": label,
            "features": {"numeric": ["x"], "categorical": ["colour"]},
            "evaluation": {"metric": metric, "threshold": threshold},
        }
    )


def _write_split(examples_uri, split: str, rows: list[dict]) -> None:
    """Rows as ExampleGen writes them: gzipped TFRecords of tf.Examples under Split-<name>."""
    import tensorflow as tf

    folder = os.path.join(examples_uri, f"Split-{split}")
    os.makedirs(folder)
    with tf.io.TFRecordWriter(os.path.join(folder, "data.gz"), options="GZIP") as writer:
        for row in rows:
            example = tf.train.Example()
            for key, cell in row.items():
                feature = example.features.feature[key]
                if isinstance(cell, str):
                    feature.bytes_list.value.append(cell.encode())
                elif isinstance(cell, int):
                    feature.int64_list.value.append(cell)
                elif cell is not None:
                    feature.float_list.value.append(cell)
            writer.write(example.SerializeToString())


def _read(tmp_path, train: list[dict], eval_: list[dict]) -> tuple[list, list]:
    _write_split(tmp_path, "train", train)
    _write_split(tmp_path, "eval", eval_)
    return reference.split(str(tmp_path), "train"), reference.split(str(tmp_path), "eval")


def test_a_perfectly_separable_binary_split_gives_the_trees_auc_1_and_the_trivial_answer_0_5(tmp_path):
    import pandas as pd

    def rows(xs) -> list[dict]:
        colours = ["red", "blue", None]
        return [{"x": x, "colour": colours[i % 3], "target": "yes" if x >= 40 else "no"} for i, x in enumerate(xs)]

    problem = _problem("binary", {"column": "target", "positive": "yes"}, "auc", 0.6)
    train, eval_ = _read(tmp_path, rows([float(i) for i in range(80)]), rows([2 * i + 0.5 for i in range(40)]))
    assert reference.value(eval_[2], "colour") is None and reference.value(eval_[0], "colour") == "red"
    # The fast reader (tfx_bsl's decoder) reads the same cells as the Examples hold.
    read = reference.read_split(str(tmp_path), "eval", batch=7)
    pd.testing.assert_frame_equal(read[["colour", "target", "x"]], reference.cells(eval_), check_dtype=False)
    assert reference.labels(eval_, problem).tolist() == [0.0] * 20 + [1.0] * 20
    scores = reference.references(problem, train, eval_, with_linear=True)
    fast = reference.references(problem, reference.read_split(str(tmp_path), "train"), read, with_linear=True)
    assert fast == {**scores, "fit_s": ANY}
    assert scores[reference.BOOSTED_TREES] == scores[reference.BEST] == 1.0
    assert scores[reference.TRIVIAL] == 0.5 and scores["fit_s"] > 0


def test_the_mean_scores_the_labels_standard_deviation_and_the_commonest_class_its_share(tmp_path):
    rows = [
        {"x": float(i % 7), "colour": "red", "y": 10.0 * (i % 2), "kind": ["a", "b", "a", "c"][i % 4]}
        for i in range(60)
    ]
    train, eval_ = _read(tmp_path, rows, rows[:40])
    regression = _problem("regression", {"column": "y"}, "rmse", 10.0)
    assert reference.references(regression, train, eval_)[reference.TRIVIAL] == pytest.approx(np.std([0.0, 10.0]))
    multiclass = _problem("multiclass", {"column": "kind", "classes": ["a", "b", "c"]}, "accuracy", 0.5)
    scores = reference.references(multiclass, train, eval_)
    assert scores[reference.TRIVIAL] == 0.5  # "a" in half the rows
    assert 0.0 <= scores[reference.BOOSTED_TREES] <= 1.0


def test_the_inputs_are_typed_as_pandas_reads_the_csv_and_integer_classes_are_names(tmp_path):
    # An integer code the spec treats as a category is a number to the trees, as to pandas.
    rows = [{"x": i % 5, "colour": ["red", "blue"][i % 2], "digit": i % 3} for i in range(30)]
    train, _ = _read(tmp_path, rows, rows)
    problem = Problem.from_dict(
        {
            "name": "toy",
            "task": "multiclass",
            "label": {"column": "digit", "classes": ["0", "1", "2"]},
            "features": {"categorical": ["x", "colour"]},
            "evaluation": {"metric": "accuracy", "threshold": 0.5},
        }
    )
    table = reference.frame(train, problem)
    assert table["x"].dtype == float and reference.categorical_columns(table) == ["colour"]
    assert reference.labels(train, problem)[:4].tolist() == ["0", "1", "2", "0"]


def test_score_is_the_blessing_metric():
    auc = _problem("binary", {"column": "t", "positive": "1"}, "auc", 0.6)
    assert reference.score(auc, np.array([0.0, 0.0, 1.0, 1.0]), [0.1, 0.4, 0.35, 0.8]) == 0.75
    rmse = _problem("regression", {"column": "t"}, "rmse", 1.0)
    assert reference.score(rmse, np.array([1.0, 3.0]), [2.0, 2.0]) == 1.0
    mae = _problem("regression", {"column": "t"}, "mae", 1.0)
    assert reference.score(mae, np.array([1.0, 4.0]), [2.0, 2.0]) == 1.5


# --- the goal and the table -------------------------------------------------------------------


def test_the_goal_is_98_percent_of_the_trees_auc_or_accuracy_and_102_percent_of_their_rmse():
    assert quality.goal_met("auc", 0.98, 1.0) and not quality.goal_met("auc", 0.979, 1.0)
    assert quality.goal_met("accuracy", 0.9, 0.9) and not quality.goal_met("accuracy", 0.87, 0.9)
    assert quality.goal_met("rmse", 10.2, 10.0) and not quality.goal_met("rmse", 10.3, 10.0)
    assert quality.goal_met("rmse", None, 10.0) is None and quality.goal_met("auc", 0.9, None) is None


CHOSE_NETWORK = Choice(
    ModelFamily.NETWORK,
    "auc",
    "",
    (Trial(ModelFamily.NETWORK, 0.95, 8.0), Trial(ModelFamily.TREES, 0.93, 2.0)),
    640,
    160,
)


def _result(name: str, ours_by_run: list[float], **extra) -> dict:
    training = {"epochs": 20, "steps_per_epoch": 20, "last_epoch": 5, "best_epoch": 3, "stopped_early_at_epoch": 5}
    training["monitored"], training["validation_curve"] = "val_auc", [0.9, 0.95, 0.96, 0.97, 0.969, 0.968]
    training["choice"] = CHOSE_NETWORK.to_record()
    runs = [
        {"returncode": 0, "ours": ours, "wall_s": 30.0 + i, "trainer_s": 9.0, "blessed": True, "training": training}
        for i, ours in enumerate(ours_by_run)
    ]
    result = {
        "name": name,
        "package": "pkg",
        "source": "pkg.load()",
        "label": "y",
        "task": "binary",
        "about": "toy rows",
        "cleaning": "none.",
        "status": "ok",
        "rows": 1234,
        "columns": 5,
        "inputs": 4,
        "metric": "auc",
        "boosted_trees": 0.96,
        "trivial": 0.5,
        "boosted_trees_fit_s": 0.25,
        "train_rows": 800,
        "eval_rows": 434,
        "runs": runs,
        **extra,
    }
    return quality.summarize(result)


def test_repeats_give_medians_and_the_table_shows_each_figure():
    result = _result("toy", [0.95, 0.96, 0.90])
    assert (result["ours"], result["wall_s"], result["blessed"]) == (0.95, 31.0, 3)
    assert result["ratio"] == pytest.approx(0.95 / 0.96) and result["goal_met"] is True
    assert quality.row(result) == [
        "toy",
        "1,234",
        "5",
        "binary",
        "auc",
        "network (network 0.9500, trees 0.9300)",
        "0.9500",
        "0.9600",
        "0.5000",
        "0.990",
        "pass",
        "3/3",
        "31.0",
        "9.0",
        "0.25",
        "6/20 ep x 20, best 4, stopped",
    ]


def test_the_report_names_the_failures_and_the_curves():
    failed = _result("broken", [0.9])
    failed["runs"].append({"returncode": 1, "wall_s": 5.0, "error": "run failed (exit 1) in Trainer: boom"})
    failed = quality.summarize(failed)
    assert failed["status"] == "1 of 2 runs failed" and failed["ours"] == 0.9
    results = {
        "machine": {
            "date_utc": "d",
            "cpus": 2,
            "ram_gb": 24,
            "platform": "p",
            "python": "3",
            "tensorflow": "2",
            "tfx": "1",
        },
        "settings": {"repeats": 2, "runner_args": ["--no-report"], "commit": "abc", "scikit_learn": "1.5"},
        "datasets": [_result("toy", [0.96]), failed],
    }
    text = quality.markdown(results)
    assert "Goal met on 1 of 2 data sets." in text
    family = quality.family_cell(results["datasets"][0])
    assert f"| toy | 1,234 | 5 | binary | auc | {family} | 0.9600 | 0.9600 | 0.5000 | 1.000 | pass |" in text
    assert f"- toy: {CHOSE_NETWORK.describe()}" in text
    assert "- toy (val_auc): 0.9, 0.95, 0.96, 0.97, 0.969, 0.968" in text
    assert "- **broken**: 1 of 2 runs failed: run failed (exit 1) in Trainer: boom" in text
    assert quality.training_cell({}) == "-"


def test_a_trees_run_is_told_by_its_trees_not_epochs(tmp_path):
    (tmp_path / "training.json").write_text(json.dumps({"family": "trees", "trees": 312, "epochs": None}))
    figures = quality.training_figures(str(tmp_path))
    assert figures == {"family": "trees", "trees": 312, "trained_s": None}
    assert quality.training_cell(figures) == "312 trees"
