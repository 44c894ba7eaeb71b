"""Evaluator user code (TFX's ``custom_extractors`` hook): TFMA's extractors, with each
batch cut into one sub-batch per slice (TFMA's slice keys) for the batched metrics of
``models.batched_metrics``, instead of one example at a time. What the Evaluator writes is
unchanged (docs/pipeline.md, Evaluator).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.extractors import slice_key_extractor, unbatch_extractor
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.utils import util

from models import batched_combiners, batched_metrics
from runtime import speedups

# TFMA's metrics evaluator runs after the stage of this name (TFMA's slicing), so the
# batched slicing that replaces it takes its name.
BATCHED_SLICES_STAGE_NAME = slice_key_extractor.SLICE_KEY_EXTRACTOR_STAGE_NAME
# What the batched metrics read from a (sub-)batch.
METRIC_KEYS = (tfma.constants.LABELS_KEY, tfma.constants.PREDICTIONS_KEY, tfma.constants.EXAMPLE_WEIGHTS_KEY)
FEATURE_KEYS = (tfma.constants.FEATURES_KEY, tfma.constants.TRANSFORMED_FEATURES_KEY)
# The stages ``slice_batches`` replaces.
REPLACED_STAGES = (unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME, slice_key_extractor.SLICE_KEY_EXTRACTOR_STAGE_NAME)


def slicing_columns(eval_config: tfma.EvalConfig) -> set[str]:
    """The feature names any slicing spec (or cross-slicing spec) of ``eval_config`` reads."""
    specs = list(eval_config.slicing_specs)
    for cross in eval_config.cross_slicing_specs:
        specs.append(cross.baseline_spec)
        specs.extend(cross.slicing_specs)
    columns: set[str] = set()
    for spec in specs:
        columns.update(spec.feature_keys)
        columns.update(spec.feature_values.keys())
    return columns


def slice_specs(eval_config: tfma.EvalConfig) -> list[slicer_lib.SingleSliceSpec]:
    """The slices TFMA's SliceKeyExtractor would compute for ``eval_config``."""
    specs = [slicer_lib.SingleSliceSpec(spec=spec) for spec in eval_config.slicing_specs]
    for cross in eval_config.cross_slicing_specs:
        for spec in (cross.baseline_spec, *cross.slicing_specs):
            single = slicer_lib.SingleSliceSpec(spec=spec)
            if single not in specs:
                specs.append(single)
    return specs or [slicer_lib.SingleSliceSpec()]


def _only(features: Any, columns: set[str]) -> Any:
    """``features`` restricted to ``columns``: a dict, or a dict per model (multi-model)."""
    if not isinstance(features, dict):
        return features
    if any(isinstance(value, dict) for value in features.values()):
        return {name: _only(value, columns) for name, value in features.items()}
    return {name: value for name, value in features.items() if name in columns}


def _take(value: Any, rows: np.ndarray) -> Any:
    """``value`` (an array, or a dict of them per model/output) at ``rows`` of the batch."""
    if isinstance(value, dict):
        return {key: _take(item, rows) for key, item in value.items()}
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return value[rows] if value.ndim else value
    raise ValueError(
        f"Cannot cut a batch of {type(value).__name__} into slices: labels, predictions and example "
        "weights must be dense arrays for models.evaluation's batched metrics"
    )


def _leaves(value: Any) -> list:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]


def _example_slices(example: dict, specs: list, model_names: list[str]) -> list:
    """TFMA's slice keys for one example's slicing features (as ExtractSliceKeysFn finds them)."""
    transformed = example.get(tfma.constants.TRANSFORMED_FEATURES_KEY)
    features_dicts = []
    if transformed:
        if len(model_names) <= 1:
            features_dicts.append(transformed)
        else:
            features_dicts.extend(transformed[name] for name in model_names if name in transformed)
    default = example.get(tfma.constants.FEATURES_KEY) or {}
    return list(set(slicer_lib.get_slices_for_features_dicts(features_dicts, default, specs)))


def _rows_by_slice(batch: dict, rows: int, columns: set[str], specs: list, model_names: list[str]) -> dict:
    """{slice key: row indices} for one batch.

    Rows are grouped by their slicing values first, so TFMA's slicer runs once per distinct
    combination in the batch, not once per example. Columns that are not dense arrays
    (variable-length ones) are split per example by TFMA itself.
    """
    slicing = {key: _only(batch[key], columns) for key in FEATURE_KEYS if batch.get(key)}
    leaves = _leaves(slicing)
    if not leaves:
        groups = {(): np.arange(rows)}
        examples = {(): {}}
    elif all(isinstance(leaf, np.ndarray) for leaf in leaves):
        # One hashable key per row: its values in every slicing column.
        per_column = [map(tuple, leaf.reshape(rows, -1).tolist()) for leaf in leaves]
        grouped: dict = defaultdict(list)
        for row, key in enumerate(zip(*per_column, strict=True)):
            grouped[key].append(row)
        groups = {key: np.asarray(found) for key, found in grouped.items()}
        # One example per group, unbatched the way TFMA unbatches.
        examples = {key: util.split_extracts(_take(slicing, found[:1]))[0] for key, found in groups.items()}
    else:
        split = util.split_extracts(slicing)
        groups = {row: np.asarray([row]) for row in range(rows)}
        examples = dict(enumerate(split))
    by_slice: dict = defaultdict(list)
    for key, found in groups.items():
        for slice_key in _example_slices(examples[key], specs, model_names):
            by_slice[slice_key].append(found)
    return {slice_key: np.sort(np.concatenate(parts)) for slice_key, parts in by_slice.items()}


def slice_batch(batch: dict, columns: set[str], specs: list, model_names: list[str]) -> list[dict]:
    """One extract per slice found in ``batch``: that slice's rows of the labels,
    predictions and example weights, and the slice key (what TFMA's fan-out reads)."""
    rows = batched_combiners.batch_rows(batch.get(tfma.constants.LABELS_KEY), batch.get(tfma.constants.PREDICTIONS_KEY))
    metric_inputs = {key: batch[key] for key in METRIC_KEYS if key in batch}
    result = []
    for slice_key, found in _rows_by_slice(batch, rows, columns, specs, model_names).items():
        extract = metric_inputs if len(found) == rows else _take(metric_inputs, found)
        slice_key_types = slicer_lib.slice_keys_to_numpy_array([slice_key])
        result.append({**extract, tfma.constants.SLICE_KEY_TYPES_KEY: slice_key_types})
    return result


def check_batched_config(eval_config: tfma.EvalConfig) -> None:
    """Refuses configurations the batched path would get wrong, naming the fix."""
    for spec in eval_config.metrics_specs:
        for metric in spec.metrics:
            if not batched_metrics.is_batched(metric):
                raise ValueError(
                    f"Metric {metric.class_name!r} is not a batched metric, and models.evaluation's extractors "
                    f"feed whole batches: name it with models.batched_metrics.metric_config({metric.class_name!r}) "
                    f"(batched: {sorted(batched_metrics.BATCHED_METRICS)}), or drop module_path from the "
                    "Evaluator to use TFMA's per-example path."
                )
    if eval_config.options.min_slice_size.value > 1 or eval_config.options.compute_confidence_intervals.value:
        raise ValueError(
            "min_slice_size and confidence intervals count extracts, which are batches here: drop module_path "
            "from the Evaluator to use TFMA's per-example path for them."
        )
    if eval_config.options.include_default_metrics.value or not eval_config.options.HasField("include_default_metrics"):
        raise ValueError(
            "The model's own compiled metrics are computed per example: set "
            "options.include_default_metrics to False with models.evaluation's extractors."
        )


def batched_slices_extractor(eval_config: tfma.EvalConfig) -> tfma.extractors.Extractor:
    columns = slicing_columns(eval_config)
    specs = slice_specs(eval_config)
    model_names = [spec.name for spec in eval_config.model_specs]
    return tfma.extractors.Extractor(
        stage_name=BATCHED_SLICES_STAGE_NAME,
        ptransform=beam.FlatMap(slice_batch, columns, specs, model_names),
    )


class KeywordSignature:
    """A SavedModel signature that takes its one input positionally too.

    TFMA calls a signature on serialized examples positionally (``signature(examples)``).
    Signatures restored from a SavedModel take keywords only, so TensorFlow first fails to
    bind the call, formats the whole batch of examples into the error message it then
    discards, and retries with the flat signature: the formatting alone costs more than
    the model. Passing the one input by its name binds at once.
    """

    def __init__(self, signature: Any):
        self._signature = signature
        self._names = list(signature.structured_input_signature[1])

    def __call__(self, *args, **kwargs):
        if args and not kwargs and len(args) == len(self._names) == 1:
            return self._signature(**{self._names[0]: args[0]})
        return self._signature(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._signature, name)


class KeywordSignaturesModel:
    """A loaded SavedModel whose ``signatures`` are ``KeywordSignature``s."""

    def __init__(self, model: Any):
        self._model = model
        self.signatures = {name: KeywordSignature(fn) for name, fn in model.signatures.items()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def _load_with_keyword_signatures(construct_fn) -> KeywordSignaturesModel:
    return KeywordSignaturesModel(construct_fn())


def with_keyword_signatures(eval_shared_model: Any) -> Any:
    """``eval_shared_model`` (or a list or dict of them) loading ``KeywordSignaturesModel``s."""
    if eval_shared_model is None:
        return None
    if isinstance(eval_shared_model, dict):
        return {name: with_keyword_signatures(model) for name, model in eval_shared_model.items()}
    if isinstance(eval_shared_model, list):
        return [with_keyword_signatures(model) for model in eval_shared_model]
    loader = eval_shared_model.model_loader
    return eval_shared_model._replace(
        model_loader=tfma.types.ModelLoader(
            construct_fn=functools.partial(_load_with_keyword_signatures, loader.construct_fn), tags=loader.tags
        )
    )


def custom_extractors(eval_shared_model, eval_config: tfma.EvalConfig, tensor_adapter_config) -> list:
    """TFMA's default extractors with its unbatching and per-example slicing replaced by
    ``slice_batch``, and the models' signatures called by keyword (``KeywordSignature``).

    Called by TFX's Evaluator with the models, EvalConfig and tensor adapter it built
    (with the speedups on: PipelineConfig.speedups names this module). What the batched
    path reads of TFMA is checked first (runtime/speedups, "batched-tfma-metrics").
    """
    speedups.check(speedups.by_name("batched-tfma-metrics"))
    check_batched_config(eval_config)
    extractors = tfma.default_extractors(
        eval_shared_model=with_keyword_signatures(eval_shared_model),
        eval_config=eval_config,
        tensor_adapter_config=tensor_adapter_config,
    )
    return with_batched_slices(extractors, eval_config)


def with_batched_slices(extractors: Iterable[tfma.extractors.Extractor], eval_config: tfma.EvalConfig) -> list:
    """``extractors`` with TFMA's UnbatchExtractor and SliceKeyExtractor replaced by
    ``slice_batch`` (at the unbatching's place, the last of TFMA's default stages)."""
    extractors = list(extractors)
    names = [extractor.stage_name for extractor in extractors]
    if names[-2:] != list(REPLACED_STAGES):
        raise ValueError(
            f"TFMA's extractors do not end with {list(REPLACED_STAGES)} ({names}); models.evaluation was "
            "written for TFMA 0.47."
        )
    return extractors[:-2] + [batched_slices_extractor(eval_config)]


def overall_metrics(evaluation_uri: str) -> dict[str, float]:
    """The candidate's metrics on the overall slice of an Evaluator's output: not its change
    against the baseline, nor the baseline's own."""
    found = {}
    for slice_metrics in tfma.load_metrics(evaluation_uri):
        if slice_metrics.slice_key.single_slice_keys:
            continue
        for item in slice_metrics.metric_keys_and_values:
            if not item.key.is_diff and item.key.model_name in ("", "candidate"):
                found[item.key.name] = item.value.double_value.value
    return found
