"""The explanation spec the Vertex AI Pusher uploads a version with when ``--explanations``
asks for one (Vertex Explainable AI): sampled Shapley attributions over the inputs of
``serving_raw``, read off the exported signature, explaining the output the Evaluator judges.
docs/release.md says what it is worth.
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
