"""The trees family (models/trees.py) for real: grown by ``run_fn`` on the sample's ExampleGen
and Transform output, exported with the network's signatures, and served where the network
must serve: TensorFlow 2.15 (the rehearsal's served-model check and its endpoint's model
server, as Vertex's prebuilt container would serve it)."""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import roc_auc_score

from kubeflow_runner import DEFAULT_SERVING_PYTHON
from models import preprocessing, signatures, trainer, trees
from models.problem import ModelFamily, Problem, Task
from models.trainer import TRAINING_RECORD
from rehearsal.cloud.model_servers import PREDICT_ROUTE, ModelServer, http_request
from rehearsal.serving import check_served_model, instances_from_csv
from tests.support.fn_args import fn_args_for
from tests.support.problems import SHIPPED, TAXI, with_problem

TAXI_TREES = dataclasses.replace(TAXI, model=ModelFamily.TREES)


@pytest.fixture(scope="module")
def grown(trainer_inputs, tmp_path_factory, sample_dir):
    """The taxi sample's trees, as the Trainer grows and exports them."""
    fn_args = fn_args_for(trainer_inputs, tmp_path_factory.mktemp("trees"), with_problem(problem=TAXI_TREES))
    trainer.run_fn(fn_args)
    return fn_args


def _eval_examples(fn_args) -> tuple[list[bytes], list[int]]:
    """The eval split's serialized raw examples and their labels, as the Evaluator reads them."""
    files = [f for pattern in fn_args.eval_files for f in glob.glob(pattern)]
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    model = tf.saved_model.load(fn_args.serving_model_dir)
    labels = model.signatures[signatures.LABEL_SIGNATURE](examples=tf.constant(serialized))
    return serialized, labels[TAXI.label_key].numpy().ravel().tolist()


def test_the_trees_are_grown_exported_with_the_networks_signatures_and_say_what_they_did(grown):
    with open(os.path.join(grown.model_run_dir, TRAINING_RECORD)) as f:
        record = json.load(f)
    assert record["family"] == "trees" and record["trees"] > 0 and record["task"] == "binary"
    assert record["warm_start"]["base"] is None and "afresh" in record["warm_start"]["reason"]
    # The sample is small: the rounds chosen on folds, then grown on every row (nothing held out).
    assert record["rows"] < trees.HOLD_OUT_MIN_ROWS
    assert record["size"] == dataclasses.asdict(trees.forest_size(record["rows"]))
    assert len(record["rounds_by_fold"]) == trees.FOLDS
    assert record["trees"] == trees.rounds_from_folds(record["rounds_by_fold"], trees.FOLDS)
    assert record["training_logs"] == {}
    model = tf.saved_model.load(grown.serving_model_dir)
    assert set(model.signatures) == {
        signatures.SERVING_SIGNATURE,
        signatures.RAW_SIGNATURE,
        signatures.TRANSFORM_SIGNATURE,
        signatures.LABEL_SIGNATURE,
    }
    serialized, labels = _eval_examples(grown)
    outputs = model.signatures[signatures.SERVING_SIGNATURE](examples=tf.constant(serialized))
    probability = outputs[signatures.PROBABILITY_KEY].numpy()
    assert probability.shape == (len(serialized), 1) and ((probability >= 0) & (probability <= 1)).all()
    decided = outputs[TAXI.label.name].numpy().ravel().tolist()
    assert decided == [int(p > signatures.DECISION_THRESHOLD) for p in probability.ravel()]
    # Trees that learnt something: the eval split's AUC is far from a coin's.
    assert roc_auc_score(labels, probability.ravel()) > 0.75


def test_a_worker_that_is_not_the_chief_grows_nothing(trainer_inputs, tmp_path, monkeypatch):
    cluster = {"chief": ["localhost:1"], "worker": ["localhost:2"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    fn_args = fn_args_for(trainer_inputs, tmp_path, with_problem(problem=TAXI_TREES))
    trainer.run_fn(fn_args)
    assert not os.path.exists(fn_args.model_run_dir) and not os.path.exists(fn_args.serving_model_dir)


def test_the_trees_serve_in_tensorflow_2_15_as_in_training(grown, sample_dir):
    assert os.path.exists(DEFAULT_SERVING_PYTHON), "make test installs it (make serving-env)"
    checked = check_served_model(
        grown.serving_model_dir, grown.transform_output, str(sample_dir / "data.csv"), DEFAULT_SERVING_PYTHON, TAXI
    )
    assert checked.tensorflow.startswith("2.15")
    # What TensorFlow 2.15 served is what this TensorFlow computes for the same rows.
    model = tf.saved_model.load(grown.serving_model_dir)
    raw = model.signatures[signatures.RAW_SIGNATURE]
    _, inputs = raw.structured_input_signature
    instances = checked.request["instances"]
    here = raw(**{name: tf.constant([row[name] for row in instances]) for name in inputs})
    served = [p[signatures.PROBABILITY_KEY] for p in checked.response["predictions"]]
    assert here[signatures.PROBABILITY_KEY].numpy().ravel().tolist() == pytest.approx(sum(served, []), abs=1e-6)


def test_the_endpoints_model_server_answers_with_the_trees(grown, sample_dir, tmp_path):
    server = ModelServer.start(DEFAULT_SERVING_PYTHON, grown.serving_model_dir, str(tmp_path / "server"), timeout=120)
    try:
        instances = instances_from_csv(str(sample_dir / "data.csv"), 3, drop=TAXI.not_served_columns)
        body = json.dumps({"signature_name": signatures.RAW_SIGNATURE, "instances": instances}).encode()
        status, _, answer = http_request(server.port, "POST", PREDICT_ROUTE, body)
    finally:
        server.stop()
    assert status == 200, answer
    predictions = json.loads(answer)["predictions"]
    assert len(predictions) == 3
    for p in predictions:  # one probability and the class it decides, per row
        (probability,) = p[signatures.PROBABILITY_KEY]
        assert 0 <= probability <= 1 and p[TAXI.label.name] == [int(probability > signatures.DECISION_THRESHOLD)], p


# ------------------------------------------------------------- synthetic problems, one per task

VOCABULARY = ("red", "green", "blue")
SIZES = ("small", "medium", "large")  # by frequency: small, large, medium (YDF's order differs)
LABELS = {
    Task.BINARY: {"column": "y", "positive": "yes"},
    Task.MULTICLASS: {"column": "y", "classes": list(SIZES)},
    Task.REGRESSION: {"column": "y"},
}
METRICS = {Task.BINARY: "auc", Task.MULTICLASS: "accuracy", Task.REGRESSION: "rmse"}


def synthetic_problem(task: Task) -> Problem:
    return Problem.from_dict(
        {
            "name": f"synthetic-{task.value}",
            "task": task.value,
            "label": LABELS[task],
            "features": {"numeric": ["x"], "categorical": ["colour"]},
            "evaluation": {"metric": METRICS[task], "threshold": 0.5 if task != Task.REGRESSION else 100.0},
        }
    )


def synthetic_rows(task: Task, count: int, seed: int = 0) -> list[dict]:
    """``x`` in [0, 1) and a colour; the label a function of both (red adds 0.5)."""
    rng = np.random.default_rng(seed)
    rows = []
    for x, colour in zip(rng.random(count), rng.choice(VOCABULARY, count), strict=True):
        score = x + (0.5 if colour == "red" else 0.0)
        label = {
            Task.BINARY: "yes" if score > 0.8 else "no",
            Task.MULTICLASS: "small" if x < 0.5 else "medium" if x < 0.65 else "large",
            Task.REGRESSION: 10.0 * score,
        }[task]
        rows.append({"x": float(x), "colour": str(colour), "y": label})
    return rows


def serialized(row: dict) -> bytes:
    def feature(value):
        if isinstance(value, str):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))

    features = {key: feature(value) for key, value in row.items()}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


class TransformLayer(tf.Module):
    """A Transform graph in miniature: ``x`` as it is, ``colour`` as its vocabulary id, and
    the label (``models/preprocessing.label``) when its column is there."""

    def __init__(self, problem: Problem):
        super().__init__()
        self.problem = problem
        ids = tf.lookup.KeyValueTensorInitializer(list(VOCABULARY), list(range(len(VOCABULARY))), value_dtype=tf.int64)
        self.vocabulary = tf.lookup.StaticHashTable(ids, default_value=len(VOCABULARY))

    def __call__(self, raw: dict) -> dict:
        transformed = {
            "x_xf": tf.reshape(raw["x"], [-1, 1]),
            "colour_xf": tf.reshape(self.vocabulary.lookup(raw["colour"]), [-1, 1]),
        }
        if "y" in raw:
            transformed.update(preprocessing.label(raw, self.problem))
        return transformed


class SyntheticTransformOutput:
    """What the trees read of a ``TFTransformOutput``, for the synthetic problems."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.layer = TransformLayer(problem)

    def raw_feature_spec(self) -> dict:
        label = tf.float32 if self.problem.task == Task.REGRESSION else tf.string
        return {
            "x": tf.io.FixedLenFeature([], tf.float32),
            "colour": tf.io.FixedLenFeature([], tf.string),
            "y": tf.io.FixedLenFeature([], label),
        }

    def transformed_feature_spec(self) -> dict:
        label = tf.float32 if self.problem.task == Task.REGRESSION else tf.int64
        return {
            "x_xf": tf.io.FixedLenFeature([1], tf.float32),
            "colour_xf": tf.io.FixedLenFeature([1], tf.int64),
            self.problem.label_key: tf.io.FixedLenFeature([1], label),
        }

    def transform_features_layer(self) -> TransformLayer:
        return self.layer


def write_split(rows: list[dict], path) -> str:
    """The rows as ExampleGen writes a split: gzipped TFRecords of tf.Examples."""
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for row in rows:
            writer.write(serialized(row))
    return str(path)


def grow_synthetic(task: Task, tmp_path, rows: list[dict]) -> tuple[dict, object]:
    """The trees grown on ``rows`` and exported as the Trainer does: the record and the loaded model."""
    problem = synthetic_problem(task)
    files = [write_split(rows, tmp_path / "train.gz")]
    serving_dir = str(tmp_path / "serving")
    record = trees.grow_and_export(files, SyntheticTransformOutput(problem), problem, 2**20, serving_dir)
    return record, tf.saved_model.load(serving_dir)


def both_signatures(model, rows: list[dict], problem: Problem) -> tuple[dict, dict]:
    """What ``serving_default`` (tf.Examples) and ``serving_raw`` (text columns) answer for rows
    without their label."""
    served = [{k: v for k, v in row.items() if k != "y"} for row in rows]
    examples = model.signatures[signatures.SERVING_SIGNATURE](examples=tf.constant([serialized(r) for r in served]))
    columns = {key: tf.constant([str(r[key]) for r in served]) for key in ("x", "colour")}
    raw = model.signatures[signatures.RAW_SIGNATURE](**columns)
    assert set(examples) == set(raw) == set(signatures.prediction_outputs(problem))
    return {k: v.numpy() for k, v in examples.items()}, {k: v.numpy() for k, v in raw.items()}


def grown_and_asked(task: Task, tmp_path) -> tuple[dict, object, list[dict], dict, dict]:
    """Trees grown on 400 rows, and 200 other rows asked of both serving signatures: the
    record, the model, those rows, and each signature's answers."""
    record, model = grow_synthetic(task, tmp_path, synthetic_rows(task, 400))
    held_out = synthetic_rows(task, 200, seed=1)
    examples, raw = both_signatures(model, held_out, synthetic_problem(task))
    return record, model, held_out, examples, raw


def test_binary_trees_answer_raw_examples_with_the_positive_class_probability_and_the_class(tmp_path):
    record, _, held_out, examples, raw = grown_and_asked(Task.BINARY, tmp_path)
    probability = examples[signatures.PROBABILITY_KEY]
    assert probability.shape == (200, 1) and ((probability >= 0) & (probability <= 1)).all()
    np.testing.assert_allclose(raw[signatures.PROBABILITY_KEY], probability, atol=1e-6)
    assert (examples["y"] == (probability > signatures.DECISION_THRESHOLD)).all()
    truth = [r["y"] == "yes" for r in held_out]
    assert roc_auc_score(truth, probability.ravel()) > 0.97  # the positive class's, not the negative's
    assert record["rows"] == 400 and record["trees"] == trees.rounds_from_folds(record["rounds_by_fold"], trees.FOLDS)


def test_multiclass_trees_answer_each_class_in_the_specs_order_and_its_name(tmp_path):
    _, _, held_out, examples, raw = grown_and_asked(Task.MULTICLASS, tmp_path)
    probabilities = examples[signatures.PROBABILITIES_KEY]
    assert probabilities.shape == (200, len(SIZES))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(raw[signatures.PROBABILITIES_KEY], probabilities, atol=1e-6)
    names = [name.decode() for name in examples["y"].ravel()]
    assert names == [SIZES[i] for i in probabilities.argmax(axis=1)]
    accuracy = np.mean([name == row["y"] for name, row in zip(names, held_out, strict=True)])
    assert accuracy > 0.95


def test_regression_trees_answer_the_value(tmp_path):
    _, model, held_out, examples, raw = grown_and_asked(Task.REGRESSION, tmp_path)
    value = examples["y"]
    assert value.shape == (200, 1)
    np.testing.assert_allclose(raw["y"], value, atol=1e-5)
    truth = np.array([r["y"] for r in held_out])
    assert np.sqrt(np.mean((value.ravel() - truth) ** 2)) < 0.1 * truth.std()
    problem = synthetic_problem(Task.REGRESSION)
    labels = model.signatures[signatures.LABEL_SIGNATURE](examples=tf.constant([serialized(r) for r in held_out]))
    np.testing.assert_allclose(labels[problem.label_key].numpy().ravel(), truth, rtol=1e-6)


def test_a_class_missing_from_the_training_split_is_refused_naming_it(tmp_path):
    rows = [row for row in synthetic_rows(Task.MULTICLASS, 400) if row["y"] != "medium"]
    with pytest.raises(ValueError, match=r"'medium'.*every class of label.classes must occur in the training split"):
        grow_synthetic(Task.MULTICLASS, tmp_path, rows)
    assert not os.path.exists(tmp_path / "serving")


def test_the_trees_grow_and_export_when_the_output_ydf_saw_at_import_is_closed(tmp_path, monkeypatch):
    """A runner that redirected sys.stdout to its log, imported YDF, then closed the log."""
    from ydf.utils import log as ydf_log

    def closed(stream=None):
        raise ValueError("I/O operation on closed file")

    monkeypatch.setattr(ydf_log, "is_direct_output", closed)
    record, model = grow_synthetic(Task.BINARY, tmp_path, synthetic_rows(Task.BINARY, 200))
    assert record["trees"] > 0 and model.signatures


def test_a_large_splits_binned_numbers_serve_as_the_exact_ones_do(tmp_path, monkeypatch):
    """The large split's path (numbers in bins, a tenth held out), forced on 400 rows."""
    monkeypatch.setattr(trees, "HOLD_OUT_MIN_ROWS", 100)
    record, model, held_out, examples, raw = grown_and_asked(Task.REGRESSION, tmp_path)
    assert record["size"]["binned"] and record["size"]["folds"] == 0
    label = synthetic_problem(Task.REGRESSION).label.name
    np.testing.assert_allclose(examples[label], raw[label], rtol=1e-6)
    truth = np.array([row["y"] for row in held_out], dtype=float)
    assert np.sqrt(np.mean((examples[label].ravel() - truth) ** 2)) < np.std(truth)


def test_a_small_split_chooses_its_rounds_on_folds_and_a_large_one_holds_a_tenth_out():
    small, large = trees.forest_size(trees.HOLD_OUT_MIN_ROWS - 1), trees.forest_size(trees.HOLD_OUT_MIN_ROWS)
    assert small.folds == trees.FOLDS and large.folds == 0
    assert small.max_depth < large.max_depth and small.min_examples > large.min_examples
    fixed = small.learner_args(rounds=40)
    assert (fixed["num_trees"], fixed["validation_ratio"], fixed["early_stopping"]) == (40, 0.0, "NONE")
    stopped = large.learner_args()
    assert stopped["validation_ratio"] == trees.HOLD_OUT_RATIO and stopped["early_stopping"] == "LOSS_INCREASE"
    assert stopped["num_trees"] == trees.MAX_ROUNDS
    # A large split's numbers binned (the exact sorts dominate its time), a small one's exact.
    assert stopped["discretize_numerical_columns"] and not fixed["discretize_numerical_columns"]
    # At most YDF's 300 (arity_limit_for_random), above which a column is split by RANDOM, not CART.
    assert stopped["max_vocab_count"] == small.learner_args()["max_vocab_count"] == trees.MAX_CATEGORIES < 300


def test_the_rounds_grown_on_every_row_are_the_folds_mean_scaled_to_the_whole_split():
    assert trees.rounds_from_folds([40, 40, 40, 40, 40], folds=5) == 50
    assert trees.rounds_from_folds([10, 30], folds=2) == 40
    assert trees.rounds_from_folds([0, 0, 0], folds=3) == 1  # at least one round


def test_the_forests_outputs_are_put_in_the_heads_order():
    multiclass = synthetic_problem(Task.MULTICLASS)
    assert trees.class_columns(multiclass, ["0", "2", "1"]) == [0, 2, 1]
    assert trees.class_columns(synthetic_problem(Task.BINARY), ["1", "0"]) == [0]
    with pytest.raises(ValueError, match="the positive class"):
        trees.class_columns(synthetic_problem(Task.BINARY), ["0"])


def test_a_forest_of_the_wrong_width_is_refused():
    species = SHIPPED["penguins"]
    trees.check_outputs(species, tf.zeros([4, species.num_classes]))
    with pytest.raises(ValueError, match="every class of label.classes must occur in the training split"):
        trees.check_outputs(species, tf.zeros([4, species.num_classes - 1]))
