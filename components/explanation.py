"""The explanation spec a model version is uploaded with, for Vertex Explainable AI:
sampled Shapley attributions over the raw input columns of ``serving_raw`` (the columns by
name, as text), explaining the output the Evaluator judges.

Two facts bound what it is worth, and docs/release.md says both: Vertex explains a
TensorFlow model through its default signature, which here takes serialized tf.Examples
(attributions need the named columns), and Google deprecated Vertex Explainable AI on
2026-03-16 (access ends 2027-03-16). So the spec is opt-in (``--explanations``), built from
the exported signature itself so that it cannot name a column the model does not read; the
report's permutation importance is what answers "which columns matter" today.
"""

from __future__ import annotations

from typing import Any

PATH_COUNT = 10  # Vertex accepts 1-50; more paths, closer attributions, slower answers


def explanation_spec(model_dir: str, output: str, path_count: int = PATH_COUNT) -> tuple[Any, Any]:
    """``(ExplanationMetadata, ExplanationParameters)`` for the model at ``model_dir``,
    explaining its ``output`` (``models.signatures.prediction_key``)."""
    import tensorflow as tf
    from google.cloud.aiplatform import explain

    from models import signatures

    if not 1 <= path_count <= 50:
        raise ValueError(f"sampled Shapley's path_count must be between 1 and 50, not {path_count}")
    raw = tf.saved_model.load(model_dir).signatures[signatures.RAW_SIGNATURE]
    inputs = sorted(raw.structured_input_signature[1])
    if output not in raw.structured_outputs:
        found = sorted(raw.structured_outputs)
        raise ValueError(f"{signatures.RAW_SIGNATURE} has no output {output!r}: it has {found}")
    metadata = explain.ExplanationMetadata(
        inputs={name: explain.ExplanationMetadata.InputMetadata(input_tensor_name=name) for name in inputs},
        outputs={output: explain.ExplanationMetadata.OutputMetadata(output_tensor_name=output)},
    )
    parameters = explain.ExplanationParameters(
        sampled_shapley_attribution=explain.SampledShapleyAttribution(path_count=path_count)
    )
    return metadata, parameters
