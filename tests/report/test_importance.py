"""Permutation importance and the worst slices (report/importance.py): on a model
that reads one column and ignores another, the ignored one drops exactly nothing; the
metrics agree with scikit-learn's; the worst group is the one where the model errs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from models.problem import Task
from report import importance

PROBLEM = SimpleNamespace(
    task=Task.BINARY, blessing=SimpleNamespace(metric="auc"), label_key="big", label=SimpleNamespace(name="big")
)


class ReadsX(tf.Module):
    """``serving_raw`` reads x (its probability rises with it) and ignores noise; ``label`` reads big."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="x"), tf.TensorSpec([None], tf.string)])
    def raw(self, x, noise):
        ignored = 0.0 * tf.cast(tf.strings.length(noise), tf.float32)
        return {"probability": (tf.sigmoid(tf.strings.to_number(x)) + ignored)[:, None]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def label(self, examples):
        parsed = tf.io.parse_example(examples, {"big": tf.io.FixedLenFeature([], tf.int64)})
        return {"big": parsed["big"]}


def _example(x: float, noise: str, big: int) -> bytes:
    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[x])),
        "big": tf.train.Feature(int64_list=tf.train.Int64List(value=[big])),
    }
    if noise:
        feature["noise"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[noise.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    model = ReadsX()
    folder = str(tmp_path_factory.mktemp("reads_x") / "model")
    tf.saved_model.save(model, folder, signatures={"serving_raw": model.raw, "label": model.label})
    rng = np.random.default_rng(1)
    x = rng.normal(size=400)
    big = (x + rng.normal(scale=0.5, size=400) > 0).astype(int)
    noise = rng.choice(["a", "b", ""], size=400)
    examples = [_example(float(a), str(n), int(b)) for a, n, b in zip(x, noise, big, strict=True)]
    return importance.permutation_importance(folder, examples, PROBLEM), x, big


def test_the_column_read_drops_and_the_one_ignored_drops_nothing(measured):
    found, x, big = measured
    from sklearn.metrics import roc_auc_score

    assert found.baseline == pytest.approx(roc_auc_score(big, x), abs=1e-9)
    by_name = {c.column: c for c in found.columns}
    assert by_name["x"].drop > 0.3 and by_name["x"].spread > 0
    assert by_name["noise"].drop == 0.0 and by_name["noise"].spread == 0.0
    assert [c.column for c in found.columns] == ["x", "noise"] and found.rows == 400 and found.repeats == 3


def test_auc_matches_scikit_learn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=300)
    scores = np.round(rng.random(300), 1)  # many ties
    assert importance.auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert np.isnan(importance.auc(np.ones(5), np.arange(5.0)))


def test_raw_columns_read_each_kind_as_serving_raw_takes_it():
    example = tf.train.Example()
    example.features.feature["f"].float_list.value.append(0.1)
    example.features.feature["i"].int64_list.value.append(3800)
    example.features.feature["s"].bytes_list.value.append("Café".encode())
    found = importance.raw_columns([example.SerializeToString()], ["f", "i", "s", "absent"])
    assert {k: v[0] for k, v in found.items()} == {"f": "0.1", "i": "3800", "s": "Café", "absent": ""}


def test_the_worst_slice_is_the_group_the_model_gets_wrong():
    rows = 200
    labels = np.tile([0.0, 1.0], rows // 2)
    predictions = labels.copy().reshape(-1, 1)
    colour = np.array(["red"] * 100 + ["blue"] * 100, dtype=object)
    predictions[100:140] = 1 - predictions[100:140]  # wrong on 40 of the blue rows
    accuracy = importance.metric_function(
        SimpleNamespace(task=Task.BINARY, blessing=SimpleNamespace(metric="accuracy"))
    )
    found = importance.worst_slices({"colour": colour}, labels, predictions, accuracy, higher_is_better=True)
    assert [(s.column, s.value, s.rows) for s in found] == [("colour", "blue", 100)]
    assert found[0].metric == pytest.approx(0.6)
