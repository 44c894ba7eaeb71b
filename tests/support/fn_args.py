"""``FnArgs`` as TFX's Trainer executor (GenericExecutor) builds them, for calling ``run_fn``
and the input pipeline directly on the pipeline's own ExampleGen and Transform output."""

from __future__ import annotations

import json
from pathlib import Path

from tfx.components.trainer import fn_args_utils
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import path_utils, proto_utils

from models.preprocessing import PROBLEM_KEY
from tests.support.problems import with_problem


def trainer_outputs(root: Path) -> dict:
    """The Trainer's output artifacts (model, model_run) under ``root``."""
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, model_run.uri = str(root / "model"), str(root / "model_run")
    return {"model": [model], "model_run": [model_run]}


def fn_args_for(trainer_inputs: dict, root: Path, custom_config: dict, train_steps: int = 8) -> fn_args_utils.FnArgs:
    """FnArgs as TFX's GenericExecutor builds them (the taxi problem's spec added to
    ``custom_config`` unless it names one)."""
    exec_properties = {
        "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs(splits=["train"], num_steps=train_steps)),
        "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs(splits=["eval"])),
        "custom_config": json.dumps(with_problem(custom_config) if PROBLEM_KEY not in custom_config else custom_config),
    }
    fn_args = fn_args_utils.get_common_fn_args(trainer_inputs, exec_properties, str(root / "working"))
    outputs = trainer_outputs(root)
    fn_args.transform_output = fn_args.transform_graph_path
    fn_args.serving_model_dir = path_utils.serving_model_dir(outputs["model"][0].uri)
    fn_args.model_run_dir = outputs["model_run"][0].uri
    return fn_args
