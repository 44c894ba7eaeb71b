"""Pusher, TFX's with a change: after TFX's push (a blessed model copied into a versioned
serving directory) it records the model as the champion (``runtime.champion``), and it does
not push the champion again (``already_serving``). Its spec adds the pipeline's root and, for
the Vertex AI Pusher (``components.vertex_pusher``), the evaluation and examples.
"""

from __future__ import annotations

from absl import logging
from tfx.components.pusher import component as tfx_pusher_component
from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ExecutionParameter
from tfx.utils import io_utils

from components.drift_gate import PIPELINE_ROOT
from runtime import champion

EVALUATION = "evaluation"
EXAMPLES = "examples"
# On the pushed model: 1 when the model was the champion already and was not pushed again.
ALREADY_SERVING = "already_serving"


def record_push(input_dict: dict, exec_properties: dict, pushed_to: str, version: str, canary: bool = False) -> None:
    """Records the pushed model and its blessing in the pipeline's champion record (as the
    candidate when ``canary``); nothing without a pipeline root (a Pusher built by hand)."""
    pipeline_root = exec_properties.get(PIPELINE_ROOT)
    if not pipeline_root:
        return
    model = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
    blessing = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_BLESSING_KEY])
    entry = champion.Entry(model.uri, blessing.uri, pushed_to, version, champion.now())
    champion.update(pipeline_root, lambda record: record.pushed(entry, canary))
    role = "candidate (a canary)" if canary else "champion"
    logging.info("Champion record: %s is the %s.", entry.describe(), role)


def already_serving(input_dict: dict, exec_properties: dict) -> champion.Entry | None:
    """The recorded champion when it is this very model (a Trainer answered from the cache):
    pushing it again would only add a copy of what serves."""
    pipeline_root = exec_properties.get(PIPELINE_ROOT)
    if not pipeline_root:
        return None
    model = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
    entry = champion.read(pipeline_root).champion
    return entry if entry is not None and entry.model == model.uri else None


def mark_already_serving(pushed, entry: champion.Entry, model_path: str) -> None:
    """The output of a push of the champion itself: a copy of the model under the output,
    as every push leaves one, naming the version that serves it."""
    logging.info("The model is the champion already (%s): nothing new to push.", entry.describe())
    io_utils.copy_dir(src=model_path, dst=pushed.uri)
    pushed.set_int_custom_property("pushed", 1)
    pushed.set_string_custom_property("pushed_destination", entry.pushed_to)
    pushed.set_string_custom_property("pushed_version", entry.version)
    pushed.set_int_custom_property(ALREADY_SERVING, 1)


class Executor(tfx_pusher.Executor):
    """TFX's push, then the champion record."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        pushed = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        serving = already_serving(input_dict, exec_properties)
        if serving is not None and self.CheckBlessing(input_dict):
            mark_already_serving(pushed, serving, self.GetModelPath(input_dict))
            return
        super().Do(input_dict, output_dict, exec_properties)
        if pushed.get_int_custom_property("pushed") == 1:
            record_push(
                input_dict,
                exec_properties,
                pushed.get_string_custom_property("pushed_destination"),
                pushed.get_string_custom_property("pushed_version"),
            )


class PusherSpec(standard_component_specs.PusherSpec):
    """TFX's Pusher spec, plus the pipeline's root (where the champion record lives) and the
    evaluation and examples a registry version is labelled from."""

    PARAMETERS = {
        **standard_component_specs.PusherSpec.PARAMETERS,
        PIPELINE_ROOT: ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        **standard_component_specs.PusherSpec.INPUTS,
        EVALUATION: ChannelParameter(type=standard_artifacts.ModelEvaluation, optional=True),
        EXAMPLES: ChannelParameter(type=standard_artifacts.Examples, optional=True),
    }


class Pusher(tfx_pusher_component.Pusher):
    """TFX's Pusher, recording the champion (see the module docstring)."""

    SPEC_CLASS = PusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def _validate_spec(self, spec) -> None:
        if not isinstance(spec, standard_component_specs.PusherSpec):
            raise ValueError(f"Pusher expects a PusherSpec, got {spec!r}")

    def __init__(self, *, pipeline_root: str, evaluation=None, examples=None, **kwargs) -> None:
        super().__init__(**kwargs)
        spec = self.spec
        self.spec = PusherSpec(
            **spec.exec_properties,
            **spec.inputs,
            **spec.outputs,
            evaluation=evaluation,
            examples=examples,
            pipeline_root=pipeline_root,
        )
