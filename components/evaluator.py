"""TFX's Evaluator, except that it never evaluates a model against itself.

On a rerun with caching, the Trainer is reused, so its model is the very artifact the
latest-blessed-model resolver hands back as the baseline. TFX's Evaluator would then run
TFMA over the eval split for two identical models (double the cost of the first run, the
largest single cost of a cached rerun) to find a difference of exactly zero. This
executor drops a baseline that is the candidate itself and evaluates once: the candidate's
metrics and the absolute thresholds are the same, and a change threshold against itself
can only pass, so the blessing is the same. A different baseline is compared as usual.
"""

from __future__ import annotations

from absl import logging
from tfx import v1 as tfx
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

MODEL = standard_component_specs.MODEL_KEY
BASELINE = standard_component_specs.BASELINE_MODEL_KEY


def is_self_comparison(input_dict: dict) -> bool:
    """True when the baseline model is the candidate model itself (the same artifact)."""
    candidate, baseline = input_dict.get(MODEL) or [], input_dict.get(BASELINE) or []
    if len(candidate) != 1 or len(baseline) != 1:
        return False
    a, b = candidate[0], baseline[0]
    same_id = a.id and b.id and a.id == b.id
    return bool(same_id or (a.uri and a.uri == b.uri))


class Executor(tfx_evaluator.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        if is_self_comparison(input_dict):
            logging.info("The baseline is the candidate model itself (%s): evaluating it once, on the absolute "
                         "thresholds; a change threshold against itself cannot fail.", input_dict[MODEL][0].uri)
            input_dict = {key: value for key, value in input_dict.items() if key != BASELINE}
        super().Do(input_dict, output_dict, exec_properties)


class Evaluator(tfx.components.Evaluator):
    """Drop-in for ``tfx.components.Evaluator`` (same spec, inputs and outputs)."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
