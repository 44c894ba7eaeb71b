"""What scoring locally (``runs.score``) and on Vertex AI (``runs.vertex_scoring``)
share: the error that refuses an input, how a row becomes the tf.Example ``serving_default``
takes, and how a model's outputs become CSV columns."""

from __future__ import annotations

from collections.abc import Mapping

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


def tf_example(row: Mapping[str, str], raw_spec: Mapping) -> bytes:
    """A CSV row as the serialized tf.Example ``serving_default`` takes (empty cells left out)."""
    import tensorflow as tf

    feature = {}
    for key, spec in raw_spec.items():
        value = row.get(key, "")
        if value == "":
            continue
        if spec.dtype == tf.string:
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        elif spec.dtype.is_floating:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(float(value))]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
