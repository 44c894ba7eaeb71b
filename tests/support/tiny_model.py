"""A SavedModel in miniature with the served model's signatures, for the Vertex stand-ins'
tests: ``serving_default`` on serialized tf.Examples, ``serving_raw`` on named text columns,
and ``double`` (one input, one output)."""

from __future__ import annotations

import base64
import math

import tensorflow as tf

ROWS = [{"fare": "12.5", "company": "Flash Cab"}, {"fare": "3", "company": ""}, {"fare": "40", "company": "Taxi Co"}]


class TinyModel(tf.Module):
    """The served model's two signatures in miniature: ``serving_default`` on serialized
    tf.Examples, ``serving_raw`` on named text columns; and ``double``, one input and one output."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def default(self, examples):
        spec = {
            "fare": tf.io.FixedLenFeature([], tf.float32, default_value=0.0),
            "company": tf.io.FixedLenFeature([], tf.string, default_value=""),
        }
        parsed = tf.io.parse_example(examples, spec)
        return self.outputs(parsed["fare"], parsed["company"])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="fare"), tf.TensorSpec([None], tf.string)])
    def raw(self, fare, company):
        return self.outputs(tf.strings.to_number(fare), company)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def double(self, x):
        return {"y": 2.0 * x}

    @staticmethod
    def outputs(fare, company):
        probability = tf.sigmoid(0.1 * fare + tf.where(company == "Flash Cab", 1.0, 0.0) - 1.0)[:, None]
        return {"probability": probability, "big_tipper": tf.cast(probability > 0.5, tf.int64), "company": company}


def example(row: dict[str, str]) -> bytes:
    feature = {"fare": tf.train.Feature(float_list=tf.train.FloatList(value=[float(row["fare"])]))}
    if row["company"]:
        feature["company"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["company"].encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def b64_instances(rows) -> list[dict]:
    return [{"examples": {"b64": base64.b64encode(example(row)).decode()}} for row in rows]


def expected_probability(row: dict[str, str]) -> float:
    logit = 0.1 * float(row["fare"]) + (1.0 if row["company"] == "Flash Cab" else 0.0) - 1.0
    return 1 / (1 + math.exp(-logit))


def save(path: str) -> None:
    """The tiny model with its three signatures, saved at ``path``."""
    model = TinyModel()
    signatures = {"serving_default": model.default, "serving_raw": model.raw, "double": model.double}
    tf.saved_model.save(model, path, signatures=signatures)
