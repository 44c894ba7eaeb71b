"""The report's readers, on the artifacts the pipeline's own components wrote for the sample
(tests/conftest.py): what each says must be what the artifact holds."""

from __future__ import annotations

import csv
import os
import shutil

import pytest
import tensorflow_model_analysis as tfma
from tfx.utils import path_utils

from report import read
from report.run_summary import RunSummary, read_evaluation
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS


def test_columns_per_split_with_types_missing_shares_and_distributions(statistics, sample_dir):
    columns = read.data_columns(statistics[0].uri)
    assert set(columns) == {"train", "eval"}
    assert sum(c[0].rows for c in columns.values()) == min(SAMPLE_ROWS, EMBEDDED_ROWS // (EMBEDDED_ROWS // SAMPLE_ROWS))
    by_name = {c.name: c for c in columns["train"]}
    with open(sample_dir / "data.csv", newline="") as f:
        header = next(csv.reader(f))
    assert set(by_name) == set(header)
    assert by_name["fare"].kind == "number" and by_name["fare"].quantiles and by_name["fare"].missing == 0.0
    assert by_name["payment_type"].kind == "text" and by_name["payment_type"].top_values[0][0] in (
        "Cash",
        "Credit Card",
    )
    assert 0.2 < by_name["company"].missing < 0.5  # a third of the embedded data's companies are empty
    total = sum(count for _, _, count in by_name["fare"].quantiles)
    assert total == pytest.approx(by_name["fare"].rows)


def test_anomalies_of_clean_data_are_none(anomalies):
    assert read.anomaly_lines(anomalies[0].uri) == []


def test_vocabulary_sizes_are_the_asset_files_lines(transform, small_config):
    uri = transform["transform_graph"][0].uri
    sizes = read.vocabularies(uri)
    categorical = small_config.problem.features.categorical
    assert set(sizes) == set(categorical)
    with open(os.path.join(uri, "transform_fn", "assets", categorical[0]), "rb") as f:
        assert sizes[categorical[0]] == len(f.read().splitlines())


def test_bucket_boundaries_are_the_ones_the_transform_graph_applies(transform, trainer, sample_dir, small_config):
    import numpy as np
    import tensorflow as tf

    from models.problem import transformed_name
    from tests.support.raw_examples import raw_example

    features = small_config.problem.features
    boundaries = read.bucket_boundaries(transform["transform_graph"][0].uri, small_config.problem)
    assert set(boundaries) == set(features.bucketized)
    assert all(len(b) == features.num_buckets - 1 and b == sorted(b) for b in boundaries.values())
    with open(sample_dir / "data.csv", newline="") as f:
        rows = [row for row in csv.DictReader(f) if all(row[name] for name in features.bucketized)][:50]
    examples = [raw_example({k: v for k, v in row.items() if v}, keep_label_source=True) for row in rows]
    model = tf.saved_model.load(path_utils.serving_model_path(trainer["model"][0].uri))
    transformed = model.signatures["transform_features"](examples=tf.constant(examples))
    for name in features.bucketized:
        # In float32, as the graph compares them (coordinates sit exactly on boundaries often).
        values = np.array([float(row[name]) for row in rows], np.float32)
        expected = np.searchsorted(np.array(boundaries[name], np.float32), values, side="right")
        assert transformed[transformed_name(name)].numpy().ravel().tolist() == expected.tolist(), name


def test_training_curves_have_one_point_per_epoch(trainer, small_config):
    curves = read.training_curves(trainer["model_run"][0].uri)
    epochs = small_config.hparams.epochs
    for metric in ("loss", "auc"):
        assert set(curves[metric]) == {"train", "validation"}
        assert [e for e, _ in curves[metric]["train"]] == list(range(epochs))
    assert all(0.0 <= v <= 1.0 for _, v in curves["auc"]["validation"])
    record = read.training_record(trainer["model_run"][0].uri)
    assert record["strategy"] in ("MirroredStrategy", "_DefaultDistributionStrategy", "OneDeviceStrategy")
    assert record["replicas"] >= 1 and record["workers"] == 1 and record["epochs"] == epochs
    assert record["global_batch"] == small_config.hparams.per_replica_batch_size * record["replicas"]


@pytest.fixture(scope="module")
def evaluation_uri(evaluator) -> str:
    return evaluator["evaluation"][0].uri


def test_slices_are_overall_then_each_configured_feature_value(evaluation_uri):
    slices = read.evaluation_slices(evaluation_uri)
    assert slices[0].name == "Overall"
    names = [s.name for s in slices[1:]]
    assert any(n.startswith("payment_type = ") for n in names) and any(
        n.startswith("trip_start_hour = ") for n in names
    )
    # The overall metrics are the ones the run summary reads from the Evaluator.
    summary = RunSummary(run_id="r", components=[])
    read_evaluation(summary, evaluation_uri)
    assert slices[0].metrics == summary.metrics
    hours = sum(s.metrics["example_count"] for s in slices if s.name.startswith("trip_start_hour = "))
    assert hours == slices[0].metrics["example_count"]


def test_against_a_baseline_the_change_is_candidate_minus_baseline(pipe, root, examples, trainer, tmp_path):
    from tfx.types import standard_artifacts

    from tests.support.harness import node, run_component

    baseline = standard_artifacts.Model()
    # Under the pipeline's root: a baseline elsewhere is another pipeline's, and ignored.
    baseline.uri = os.path.join(pipe.pipeline_info.pipeline_root, tmp_path.name, "baseline")
    shutil.copytree(trainer["model"][0].uri, baseline.uri)  # the same model under another URI
    evaluation = run_component(
        node(pipe, "Evaluator"),
        {"examples": examples, "model": trainer["model"], "baseline_model": [baseline]},
        str(tmp_path / "out"),
    )["evaluation"][0].uri
    compared = read.baseline_comparison(evaluation)
    overall = read.evaluation_slices(evaluation)[0].metrics
    assert compared["auc"]["baseline"] == pytest.approx(overall["auc"])
    assert compared["auc"]["change"] == pytest.approx(0.0, abs=1e-9)


def test_without_a_baseline_there_is_nothing_to_compare(evaluation_uri):
    assert read.baseline_comparison(evaluation_uri) == {}


def test_plots_are_tfmas_roc_calibration_and_confusion_matrix(evaluation_uri):
    plots = read.evaluation_plots(evaluation_uri)
    assert all(0.0 <= fpr <= 1.0 and 0.0 <= tpr <= 1.0 for fpr, tpr in plots["roc"])
    matrix = plots["confusion"]
    count = read.evaluation_slices(evaluation_uri)[0].metrics["example_count"]
    assert matrix["tp"] + matrix["fp"] + matrix["tn"] + matrix["fn"] == pytest.approx(count)
    assert matrix["threshold"] == pytest.approx(0.5, abs=0.02)
    assert sum(n for _, _, n in plots["calibration"]) == pytest.approx(count)


def test_thresholds_are_read_from_the_evaluations_own_configuration(evaluation_uri, small_config):
    lines = read.thresholds(evaluation_uri)
    assert f"AUC at least {small_config.blessing.threshold:g}" in lines
    # No baseline in this evaluation: TFX's Evaluator dropped the change threshold from it.
    assert not any("baseline" in line for line in lines)
    assert tfma.load_eval_result(evaluation_uri).config.slicing_specs


def test_signatures_are_read_without_loading_the_model(trainer):
    found = {s.name: s for s in read.signatures(path_utils.serving_model_path(trainer["model"][0].uri))}
    assert {"serving_default", "serving_raw"} <= set(found)
    assert found["serving_default"].inputs == {"examples": "string [?]"}
    assert found["serving_default"].outputs["probability"] == "float [?, 1]"
    assert "fare" in found["serving_raw"].inputs and "tips" not in found["serving_raw"].inputs


def test_a_run_that_stopped_early_reports_what_it_got_to(statistics, small_config):
    summary = RunSummary(run_id="stopped", components=[], outputs={read.STATISTICS: statistics[0].uri})
    report = read.read_report(summary, small_config.problem)
    assert set(report.columns) == {"train", "eval"}
    assert report.anomalies is None and not report.slices and not report.signatures


def test_multi_class_entries_are_keyed_by_class_id_and_named_by_the_specs_classes():
    from tensorflow_model_analysis.proto import metrics_for_slice_pb2

    matrix = metrics_for_slice_pb2.MultiClassConfusionMatrixAtThresholds.MultiClassConfusionMatrix(threshold=0.0)
    # TFMA leaves zero ids out of an entry: actual 0 predicted 0.
    matrix.entries.add(num_weighted_examples=7)
    matrix.entries.add(actual_class_id=0, predicted_class_id=2, num_weighted_examples=1)
    matrix.entries.add(actual_class_id=2, predicted_class_id=2, num_weighted_examples=4)
    matrix.entries.add(actual_class_id=1, predicted_class_id=read.NO_PREDICTED_CLASS_ID, num_weighted_examples=2)
    found = read.class_confusion(matrix, ["north", "south", "west"])
    assert found.actual == ["north", "south", "west"]
    assert found.predicted == ["north", "south", "west", "no prediction"]
    assert found.counts == [[7.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 4.0, 0.0]]
    assert found.total == 14.0
    assert found.precision(2) == pytest.approx(4 / 5) and found.recall(0) == pytest.approx(7 / 8)
    assert found.precision(1) != found.precision(1)  # nothing predicted "south": NaN, not a made-up 0
    # An id the spec does not list is shown by its number.
    matrix.entries.add(actual_class_id=3, predicted_class_id=0, num_weighted_examples=1)
    assert read.class_confusion(matrix, ["north", "south", "west"]).actual[-1] == "class 3"


@pytest.mark.parametrize(
    ("config", "name"),
    [
        (tfma.MetricConfig(class_name="AUC"), "auc"),
        (tfma.MetricConfig(class_name="BinaryAccuracy"), "binary_accuracy"),
        (tfma.MetricConfig(class_name="RootMeanSquaredError", config='{"name": "rmse"}'), "rmse"),
        (tfma.MetricConfig(class_name="SparseCategoricalAccuracy", config='"name": "accuracy"'), "accuracy"),
    ],
)
def test_a_metric_is_named_as_tfma_reports_it(config, name):
    assert read.metric_name(config) == name


def test_metric_names_in_words():
    assert [read.describe_metric(n) for n in ("auc", "val_auc", "val_accuracy", "rmse", "mean_label")] == [
        "AUC",
        "validation AUC",
        "validation accuracy",
        "RMSE",
        "mean label",
    ]


@pytest.mark.parametrize("problem_dir", ["taxi", "penguins", "penguin-body-mass"])
def test_thresholds_name_each_problems_blessing_metric_and_its_bound(problem_dir, tmp_path, monkeypatch):
    """The Evaluator's configuration for each shipped problem, in words: the blessing
    metric, its floor or ceiling, and the change allowed against a baseline."""
    from models import problem as problem_lib
    from pipeline.config import REPO_ROOT, PipelineConfig
    from pipeline.pipeline import eval_config

    config = PipelineConfig(problem=problem_lib.load(str(REPO_ROOT / "data" / problem_dir)), infer_schema=True)
    evaluation = eval_config(config)
    monkeypatch.setattr(tfma, "load_eval_result", lambda uri: type("Result", (), {"config": evaluation}))
    blessing = config.blessing
    words = read.describe_metric(blessing.metric)
    bound = "at least" if config.problem.higher_is_better else "at most"
    assert read.thresholds(str(tmp_path)) == [
        f"{words} {bound} {blessing.threshold:g}",
        f"{words} no worse than the baseline model's by more than {blessing.max_regression + 1e-10:.4g}",
    ]
    # The same, by metric, for the report's verdict: what the evaluation itself was configured with.
    side = read.AT_LEAST if config.problem.higher_is_better else read.AT_MOST
    bounds = read.bounds_by_metric(read.read_thresholds(str(tmp_path)))
    assert list(bounds) == [blessing.metric] and bounds[blessing.metric][side] == pytest.approx(blessing.threshold)
    assert bounds[blessing.metric][read.CHANGE] == pytest.approx(blessing.max_regression, abs=1e-9)


def test_a_relative_change_is_said_in_words_but_bounds_no_value():
    found = [read.Threshold("auc", read.AT_LEAST, 0.9), read.Threshold("auc", read.CHANGE, 0.01, relative=True)]
    assert found[1].words() == "AUC no worse than the baseline model's by more than 0.01 of its value"
    assert read.bounds_by_metric(found) == {"auc": {read.AT_LEAST: 0.9}}


def test_importance_of_a_binary_model_starts_from_the_evaluators_auc(examples, trainer, evaluation_uri, small_config):
    """The component fixtures' run: the Trainer's model on ExampleGen's eval split."""
    summary = RunSummary(
        run_id="r",
        components=[],
        outputs={read.EXAMPLES: examples[0].uri, read.TRAINER_MODEL: trainer["model"][0].uri},
    )
    read_evaluation(summary, evaluation_uri)
    found = read.importance(summary, small_config.problem)
    assert found.metric == "auc" and found.higher_is_better
    # Exact AUC by ranks against TFMA's, computed over 10,000 thresholds.
    assert found.baseline == pytest.approx(summary.metrics["auc"], abs=2e-3)
    assert {c.column for c in found.columns} == set(small_config.problem.served_columns)
