"""What scoring locally (``pipeline.score``) and on Vertex AI (``pipeline.vertex_scoring``)
share: the error that refuses an input, and how a model's outputs become CSV columns."""

from __future__ import annotations

from models.problem import Problem


class ScoreError(ValueError):
    """The input, or the model asked for, cannot be scored; the message names the fix."""


def output_columns(name: str, width: int, problem: Problem) -> list[str]:
    """The CSV columns of one output ``width`` values wide: its name, or one per class for
    the multi-class probabilities (``probabilities_<class>``), else one per position."""
    if width == 1:
        return [name]
    from models.signatures import PROBABILITIES_KEY

    if name == PROBABILITIES_KEY and problem.label.classes and len(problem.label.classes) == width:
        return [f"{name}_{cls}" for cls in problem.label.classes]
    return [f"{name}_{i}" for i in range(width)]
