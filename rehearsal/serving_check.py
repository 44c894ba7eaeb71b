"""Answers a Vertex AI prediction request with a pushed model in whatever TensorFlow runs this
script (the rehearsal's TensorFlow 2.15, Vertex's ``tf2-cpu.2-15``), beside ``serving_default``'s
answer for the same rows. Imports nothing but TensorFlow and the model server beside it.
"""

import base64
import json
import os
import sys

import tensorflow as tf

# The endpoint stand-in's model server (beside this script's folder, run outside the project
# too) loads the ops TF Serving links in; the check loads a model as it does.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cloud"))
from model_server import load_serving_ops  # noqa: E402


def _text(value):
    """``value`` (a nested list from ``Tensor.tolist()``) with every bytes decoded as UTF-8."""
    if isinstance(value, list):
        return [_text(item) for item in value]
    return value.decode("utf-8") if isinstance(value, bytes) else value


def answer(signature, instances: list) -> dict:
    """TF Serving's row format: every instance names every input; outputs per instance."""
    _, inputs = signature.structured_input_signature
    for i, instance in enumerate(instances):
        if missing := sorted(set(inputs) - set(instance)):
            raise ValueError(f"instance {i} does not have the named input(s) {missing}")
    columns = {
        name: tf.constant([instance[name] for instance in instances], spec.dtype) for name, spec in inputs.items()
    }
    # Text outputs (a class's name) as TF Serving's REST API returns them: strings, not bytes.
    outputs = {k: _text(v.numpy().tolist()) for k, v in signature(**columns).items()}
    return {"predictions": [{k: v[i] for k, v in outputs.items()} for i in range(len(instances))]}


def main() -> None:
    """Reads JSON from stdin: ``model_dir``, ``request`` (``{"instances": [...]}``, the rows for the
    raw-columns ``signature``), ``examples_b64`` (the same rows as serialized tf.Examples) and
    ``prediction_key``. Writes the answer TensorFlow Serving's REST API gives for the signature
    (``{"predictions": [{output: value}, ...]}``) and ``serving_default``'s ``prediction_key`` output
    for the same rows, with the TensorFlow version and the model's signatures."""
    given = json.load(sys.stdin)
    load_serving_ops()
    model = tf.saved_model.load(given["model_dir"])
    serialized = tf.constant([base64.b64decode(e) for e in given["examples_b64"]])
    default = model.signatures["serving_default"](examples=serialized)
    json.dump(
        {
            "tensorflow": tf.__version__,
            "signatures": sorted(model.signatures.keys()),
            "response": answer(model.signatures[given["signature"]], given["request"]["instances"]),
            "serving_default": default[given["prediction_key"]].numpy().tolist(),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
