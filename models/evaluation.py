"""Evaluator user code (TFX's ``custom_extractors`` hook): TFMA's own extractors, with
the per-example data its metrics never read dropped before TFMA splits batches into
examples.

TFMA computes predictions and labels a batch at a time, then splits every batch into
one Python dict per example (``UnbatchExtractor``) and feeds those to its metrics. By
then each batch carries every raw feature, the serialized input and the transformed
label beside the labels and predictions, and splitting those into per-example arrays is
most of the splitting's cost (about 20 values per example for our 18 columns, against
4 the metrics use). Only the metrics and the slicing read the per-example extracts, so
everything else is dropped first: labels, predictions and example weights stay, and so
do the features a slicing spec names. What the Evaluator computes is unchanged (tested
against TFMA's default extractors in ``tests/models/test_evaluation.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.extractors import unbatch_extractor

SLIM_EXTRACTS_STAGE_NAME = "DropExtractsMetricsDoNotRead"
# What TFMA's metrics, example weights and slicing read from each example's extract.
KEPT_KEYS = (
    tfma.constants.LABELS_KEY,
    tfma.constants.PREDICTIONS_KEY,
    tfma.constants.EXAMPLE_WEIGHTS_KEY,
    tfma.constants.ATTRIBUTIONS_KEY,
    # Set before the unbatching only by SQL slicing specs (which read the whole batch earlier).
    tfma.constants.SLICE_KEY_TYPES_KEY,
    # Removed by UnbatchExtractor itself; kept so it finds what it expects.
    tfma.constants.ARROW_RECORD_BATCH_KEY,
)
FEATURE_KEYS = (tfma.constants.FEATURES_KEY, tfma.constants.TRANSFORMED_FEATURES_KEY)


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


def _only(features: Any, columns: set[str]) -> Any:
    """``features`` restricted to ``columns``: a dict, or a dict per model (multi-model)."""
    if not isinstance(features, dict):
        return features
    if any(isinstance(value, dict) for value in features.values()):
        return {name: _only(value, columns) for name, value in features.items()}
    return {name: value for name, value in features.items() if name in columns}


def slim_extracts(batch: dict, columns: set[str]) -> dict:
    """``batch`` with only what the metrics and slicing read (see the module docstring)."""
    slim = {key: value for key, value in batch.items() if key in KEPT_KEYS}
    if columns:
        for key in FEATURE_KEYS:
            if key in batch:
                slim[key] = _only(batch[key], columns)
    return slim


def slim_extracts_extractor(eval_config: tfma.EvalConfig) -> tfma.extractors.Extractor:
    columns = slicing_columns(eval_config)
    return tfma.extractors.Extractor(
        stage_name=SLIM_EXTRACTS_STAGE_NAME,
        ptransform=beam.Map(slim_extracts, columns),
    )


def custom_extractors(eval_shared_model, eval_config: tfma.EvalConfig, tensor_adapter_config) -> list:
    """TFMA's default extractors with ``slim_extracts`` just before the unbatching.

    Called by TFX's Evaluator with the models, EvalConfig and tensor adapter it built.
    """
    extractors = tfma.default_extractors(
        eval_shared_model=eval_shared_model,
        eval_config=eval_config,
        tensor_adapter_config=tensor_adapter_config,
    )
    return with_slim_extracts(extractors, eval_config)


def with_slim_extracts(extractors: Iterable[tfma.extractors.Extractor], eval_config: tfma.EvalConfig) -> list:
    """``extractors`` with the slimming stage inserted before TFMA's UnbatchExtractor."""
    extractors = list(extractors)
    names = [extractor.stage_name for extractor in extractors]
    if unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME not in names:
        raise ValueError(
            f"TFMA's extractors have no {unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME} stage "
            f"({names}); models.evaluation was written for TFMA 0.47."
        )
    index = names.index(unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    return extractors[:index] + [slim_extracts_extractor(eval_config)] + extractors[index:]
