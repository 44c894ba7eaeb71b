"""The trees family (models/trees.py) for real: grown by ``run_fn`` on the sample's ExampleGen
and Transform output, exported with the network's signatures, and served where the network
must serve: TensorFlow 2.15 (the rehearsal's served-model check and its endpoint's model
server, as Vertex's prebuilt container would serve it)."""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import pytest
import tensorflow as tf
from sklearn.metrics import roc_auc_score

from kubeflow_runner import DEFAULT_SERVING_PYTHON
from models import signatures, trainer, trees
from models.problem import ModelFamily, Task
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
    # The sample is small: nothing held out, every round grown, no held-out figures.
    assert record["rows"] < trees.HOLD_OUT_MIN_ROWS and record["size"] == dataclasses.asdict(
        trees.forest_size(record["rows"])
    )
    assert record["trees"] == record["size"]["num_trees"] and record["training_logs"] == {}
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


def test_a_forest_missing_a_class_is_refused_naming_the_classes():
    species = SHIPPED["penguins"]
    assert species.task == Task.MULTICLASS
    trees.check_outputs(species, tf.zeros([4, species.num_classes]))
    with pytest.raises(ValueError, match="every class of label.classes must occur in the training split"):
        trees.check_outputs(species, tf.zeros([4, species.num_classes - 1]))


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
