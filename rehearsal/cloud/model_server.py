"""TensorFlow Serving's REST API (status and ``:predict``) for one SavedModel, as Vertex AI's
``tf2-cpu.2-15`` container serves it; the Vertex AI stand-in runs it for each deployed model with
the TensorFlow 2.15 environment's Python. Imports nothing but TensorFlow and the standard library.
"""

import argparse
import base64
import importlib.util
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tensorflow as tf

# TF-DF inference ops, within its package.
INFERENCE_OPS = ("tensorflow", "ops", "inference", "inference.so")

MODEL_PATH = "/v1/models/default"
PREDICT_PATH = MODEL_PATH + ":predict"
DEFAULT_SIGNATURE = "serving_default"
STATUS = {"model_version_status": [{"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK"}}]}


def load_serving_ops() -> None:
    """TensorFlow Serving links TF-DF's inference ops (since 2.11), a plain TensorFlow does
    not: a trees model (models/trees.py) loads only once they are registered. They come
    from the tensorflow-decision-forests package of this TensorFlow's version, when installed
    (``make serving-env``), without importing the package (it needs Keras)."""
    found = importlib.util.find_spec("tensorflow_decision_forests")
    if found is not None:
        tf.load_op_library(os.path.join(found.submodule_search_locations[0], *INFERENCE_OPS))


class BadRequest(ValueError):
    """The request cannot be answered; the message says why (TF Serving answers 400)."""


def decoded(value):
    """``value`` (parsed JSON) with every ``{"b64": text}`` replaced by the bytes it encodes."""
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            return base64.b64decode(value["b64"])
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decoded(item) for item in value]
    return value


def named_inputs(instance, index: int, input_names: list) -> dict:
    """One instance as ``{input name: value}``: an object names them, a bare value is the
    only input's."""
    if not isinstance(instance, dict):
        if len(input_names) != 1:
            raise BadRequest(f"instance {index} is not an object naming the signature's inputs {input_names}")
        return {input_names[0]: instance}
    if unknown := sorted(set(instance) - set(input_names)):
        raise BadRequest(f"instance {index}: the signature does not have the named input(s) {unknown}")
    if missing := sorted(set(input_names) - set(instance)):
        raise BadRequest(f"instance {index} does not have the named input(s) {missing}")
    return instance


def as_json(name: str, value):
    """An output's value for one row (``Tensor.tolist()`` item) as TF Serving writes it."""
    if isinstance(value, list):
        return [as_json(name, item) for item in value]
    if isinstance(value, bytes):
        if name.endswith("_bytes"):
            return {"b64": base64.b64encode(value).decode("ascii")}
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    return value


def predict(model, body) -> dict:
    """TF Serving's row-format predict on ``model``'s signatures."""
    if not isinstance(body, dict) or not isinstance(body.get("instances"), list):
        raise BadRequest(
            'the request must be a JSON object with an "instances" list (the columnar "inputs" is not served)'
        )
    name = body.get("signature_name") or DEFAULT_SIGNATURE
    if name not in model.signatures:
        raise BadRequest(
            f'Serving signature name: "{name}" not found in signature def (has {sorted(model.signatures)})'
        )
    signature = model.signatures[name]
    _, specs = signature.structured_input_signature
    instances = [named_inputs(row, i, sorted(specs)) for i, row in enumerate(decoded(body["instances"]))]
    if not instances:
        raise BadRequest('"instances" is empty')
    try:
        columns = {key: tf.constant([row[key] for row in instances], spec.dtype) for key, spec in specs.items()}
        outputs = {key: tensor.numpy().tolist() for key, tensor in signature(**columns).items()}
    except (tf.errors.OpError, TypeError, ValueError) as e:
        raise BadRequest(getattr(e, "message", None) or str(e)) from e
    rows = [{key: as_json(key, values[i]) for key, values in outputs.items()} for i in range(len(instances))]
    if len(outputs) == 1:
        return {"predictions": [next(iter(row.values())) for row in rows]}
    return {"predictions": rows}


def handler_for(model) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # the body must not wait for the ACK of the headers (storage.py)

        def answer(self, status: int, payload) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") in (MODEL_PATH, MODEL_PATH + "/versions/1"):
                self.answer(200, STATUS)
            else:
                self.answer(404, {"error": f"Malformed request: GET {self.path}"})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path not in (PREDICT_PATH, MODEL_PATH + "/versions/1:predict"):
                self.answer(404, {"error": f"Malformed request: POST {self.path}"})
                return
            try:
                self.answer(200, predict(model, json.loads(body)))
            except json.JSONDecodeError as e:
                self.answer(400, {"error": f"JSON Parse error: {e}"})
            except BadRequest as e:
                self.answer(400, {"error": str(e)})

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            sys.stderr.write("model server: " + format % args + "\n")

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--ready-file", required=True, help="where the port is written once the model is loaded")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    load_serving_ops()
    model = tf.saved_model.load(args.model_dir)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(model))
    ready = {"port": server.server_address[1], "tensorflow": tf.__version__, "signatures": sorted(model.signatures)}
    with open(args.ready_file + ".tmp", "w") as f:
        json.dump(ready, f)
    os.replace(args.ready_file + ".tmp", args.ready_file)
    print(
        f"model server: serving {args.model_dir} on port {ready['port']} with TensorFlow {tf.__version__}", flush=True
    )
    server.serve_forever()


if __name__ == "__main__":
    main()
