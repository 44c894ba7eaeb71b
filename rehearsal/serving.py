"""The served model, rehearsed: the model the rehearsal pushed answers a Vertex AI
``{"instances": [...]}`` request built from CSV rows through its raw-columns signature,
loaded by the TensorFlow version of Vertex AI's prebuilt serving image, and must give
the predictions ``serving_default`` gives for the same rows as tf.Examples.

That TensorFlow lives in its own environment (``make serving-env``): the project's is
newer, and the point is to load the model where Vertex would.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import json
import os
import subprocess
from collections.abc import Mapping

from runs.scoring import tf_example

# Vertex AI's us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15 (pipeline.config.DEFAULT_SERVING_IMAGE).
SERVING_TF_VERSION = "2.15.1"
CHECK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_check.py")


class ServingError(RuntimeError):
    """The pushed model did not answer as Vertex would need it to; the message says how."""


@dataclasses.dataclass(frozen=True)
class ServingCheck:
    tensorflow: str
    request: dict
    response: dict
    serving_default: list
    largest_difference: float


def instances_from_csv(
    path: str, count: int, drop: tuple[str, ...], headers: Mapping[str, str] | None = None
) -> list[dict[str, str]]:
    """The first ``count`` rows as JSON instances: every column by its feature name (the
    signature's input names; ``headers``: the problem's header names by feature name), as
    text, without the ``drop`` ones."""
    features = {header: feature for feature, header in (headers or {}).items()}
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = [row for _, row in zip(range(count), csv.DictReader(f), strict=False)]
    return [{features.get(k, k): v for k, v in row.items() if features.get(k, k) not in drop} for row in rows]


def _flat(value) -> list[float]:
    """An output's values for one row (a number, or a list of numbers per class)."""
    return [float(v) for v in value] if isinstance(value, list) else [float(value)]


def check_served_model(
    model_dir: str, transform_graph_dir: str, csv_path: str, serving_python: str, problem, rows: int = 8
) -> ServingCheck:
    """Runs the request through the raw-columns signature with ``serving_python``'s
    TensorFlow and compares with ``serving_default``; raises ``ServingError`` on a mismatch.
    ``problem`` (``models.problem.Problem``) says which columns a request leaves out (those
    only the label is computed from, and unused ones) and which output holds the prediction."""
    import tensorflow_transform as tft

    from models import signatures

    raw_spec = tft.TFTransformOutput(transform_graph_dir).raw_feature_spec()
    instances = instances_from_csv(csv_path, rows, drop=problem.not_served_columns, headers=problem.header_names)
    request = {"instances": instances}
    given = {
        "model_dir": model_dir,
        "signature": signatures.RAW_SIGNATURE,
        "prediction_key": signatures.prediction_key(problem),
        "request": request,
        "examples_b64": [base64.b64encode(tf_example(row, raw_spec)).decode() for row in instances],
    }
    process = subprocess.run(
        [serving_python, CHECK_SCRIPT],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TF_CPP_MIN_LOG_LEVEL": "2"},
        check=False,
    )
    if process.returncode != 0:
        raise ServingError(f"the model did not answer the request in the serving runtime:\n{process.stderr[-3000:]}")
    answered = json.loads(process.stdout)
    key = signatures.prediction_key(problem)
    served = [v for p in answered["response"]["predictions"] for v in _flat(p[key])]
    default = [v for p in answered["serving_default"] for v in _flat(p)]
    difference = max(abs(a - b) for a, b in zip(served, default, strict=True))
    if difference > 1e-5:
        raise ServingError(
            f"{signatures.RAW_SIGNATURE} and serving_default disagree by up to {difference:.2e} on the same rows"
        )
    return ServingCheck(answered["tensorflow"], request, answered["response"], default, difference)
