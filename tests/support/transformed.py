"""What the Trainer should get, as rows to compare: the transform graph applied to
ExampleGen's raw examples, and what a Transform writing transformed examples wrote."""

from __future__ import annotations

import glob
import os

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from tfx.types import Artifact, artifact_utils


def records(examples: list[Artifact], split: str) -> list[bytes]:
    """The serialized records of one split of an Examples artifact, in file order."""
    files = sorted(glob.glob(os.path.join(artifact_utils.get_split_uri(examples, split), "*")))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def graph_applied(trainer_inputs: dict, split: str) -> dict[str, np.ndarray]:
    """Every transformed feature (label included) of ``split``'s raw examples, through the
    transform graph's Keras layer (as the Trainer applies it; a TF1 graph too) in one
    eager call, in file order."""
    output = tft.TFTransformOutput(artifact_utils.get_single_uri(trainer_inputs["transform_graph"]))
    raw = tf.io.parse_example(tf.constant(records(trainer_inputs["examples"], split)), output.raw_feature_spec())
    return {name: value.numpy() for name, value in output.transform_features_layer()(raw).items()}


def materialized(transform_outputs: dict, split: str) -> dict[str, np.ndarray]:
    """Every transformed feature of ``split`` as that Transform wrote it."""
    output = tft.TFTransformOutput(artifact_utils.get_single_uri(transform_outputs["transform_graph"]))
    written = tf.constant(records(transform_outputs["transformed_examples"], split))
    parsed = tf.io.parse_example(written, output.transformed_feature_spec())
    return {name: value.numpy() for name, value in parsed.items()}


def rows(columns: dict[str, np.ndarray]) -> list[tuple]:
    """One tuple per example: its values in the order of the sorted feature names."""
    names = sorted(columns)
    flat = [np.asarray(columns[name]).reshape(len(columns[name]), -1).tolist() for name in names]
    return [tuple(value for column in flat for value in column[i]) for i in range(len(flat[0]))]
