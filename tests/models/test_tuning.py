"""The Tuner for real (TFX's executor, KerasTuner, two tiny trials on the pipeline's own
ExampleGen and Transform output), and the Trainer then training with what it chose."""

from __future__ import annotations

import json
import os

import pytest
import tensorflow as tf
from tfx.components.tuner import executor as tuner_executor
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from models import trainer, tuning
from models.hparams import HParams
from tests.support.fn_args import fn_args_for
from tests.support.problems import with_problem

# Two trials that must differ from the defaults in every searched value.
TINY_SPACE = {"learning_rate": (0.002,), "hidden_units": ("8,4", "16"), "dropout": (0.1,), "l2": (0.0,)}


@pytest.fixture(scope="module")
def best_hyperparameters(trainer_inputs, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("tuner")
    best = standard_artifacts.HyperParameters()
    best.uri = str(root / "best_hyperparameters")
    results = standard_artifacts.TunerResults()
    results.uri = str(root / "tuner_results")
    base = HParams(per_replica_batch_size=32, epochs=1)
    exec_properties = {
        "tuner_fn": "models.tuning.tuner_fn",
        "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs(splits=["train"], num_steps=4)),
        "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs(splits=["eval"], num_steps=2)),
        "custom_config": json.dumps(
            with_problem(tuning.tuner_custom_config(base, max_trials=2, search_space=TINY_SPACE))
        ),
    }
    inputs = {k: trainer_inputs[k] for k in ("examples", "transform_graph", "schema")}
    context = tuner_executor.base_executor.BaseExecutor.Context(tmp_dir=str(root / "tmp") + "/", unique_id="Tuner")
    tuner_executor.Executor(context).Do(
        inputs, {"best_hyperparameters": [best], "tuner_results": [results]}, exec_properties
    )
    (written,) = tf.io.gfile.listdir(best.uri)
    with open(os.path.join(best.uri, written)) as f:
        return json.load(f)


def test_the_tuner_searches_the_given_space_and_writes_its_best(best_hyperparameters):
    values = best_hyperparameters["values"]
    assert set(values) == set(TINY_SPACE)
    assert values["hidden_units"] in TINY_SPACE["hidden_units"] and values["learning_rate"] == 0.002


def test_the_trainer_trains_with_what_the_tuner_chose(best_hyperparameters, trainer_inputs, tmp_path):
    fn_args = fn_args_for(trainer_inputs, tmp_path, HParams(per_replica_batch_size=32, epochs=1).to_custom_config(), 4)
    fn_args.hyperparameters = best_hyperparameters  # as TFX's Trainer executor reads the Tuner's output
    trainer.run_fn(fn_args)
    record = json.loads(open(os.path.join(fn_args.model_run_dir, trainer.TRAINING_RECORD)).read())
    chosen = best_hyperparameters["values"]
    used = record["hparams"]
    assert used["learning_rate"] == chosen["learning_rate"] and used["dropout"] == chosen["dropout"]
    assert used["hidden_units"] == [int(u) for u in chosen["hidden_units"].split(",")]
    # The exported model has the chosen hidden layers.
    model = tf.keras.models.load_model(fn_args.serving_model_dir, compile=False)
    hidden = [layer.units for layer in model.layers if type(layer).__name__ == "Dense" and "logit" not in layer.name]
    assert hidden == used["hidden_units"]


def test_apply_best_takes_a_config_or_values_and_refuses_what_hparams_cannot_take():
    base = HParams()
    tuned = tuning.apply_best(base, {"values": {"hidden_units": "128,64", "l2": 0.001}})
    assert tuned.hidden_units == (128, 64) and tuned.l2 == 0.001 and tuned.epochs == base.epochs
    assert tuning.apply_best(base, {"dropout": 0.4}).dropout == 0.4
    with pytest.raises(ValueError, match=r"chose \['units'\].*tunable"):
        tuning.apply_best(base, {"values": {"units": 3}})
    with pytest.raises(ValueError, match="comma-separated"):
        tuning.apply_best(base, {"hidden_units": "wide"})


@pytest.mark.parametrize(
    ("trials", "space", "message"),
    [(0, None, "at least 1 trial"), (2, {"momentum": (0.9,)}, "must be among"), (2, {"dropout": ()}, "with choices")],
)
def test_a_search_that_cannot_run_is_refused(trials, space, message):
    with pytest.raises(ValueError, match=message):
        tuning.tuner_custom_config(HParams(), trials, space)
