"""Each component of the DAG, exactly as ``create_pipeline`` (pipeline/pipeline.py) configures
it, run on its own with its real executor on a few hundred rows, asserting on what it writes.
The project's own components have their own tests under tests/components/."""

from __future__ import annotations

import csv
import dataclasses
import glob
import os
import re
import shutil
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from models.problem import transformed_name
from pipeline.pipeline import create_pipeline
from tests.support import transformed
from tests.support.harness import node, run_component
from tests.support.problems import TAXI
from tests.support.raw_examples import raw_example
from tests.support.sample_data import EMBEDDED_CSV, embedded_rows

xf = transformed_name


def _records(examples_artifact, split: str) -> list[tf.train.Example]:
    files = glob.glob(os.path.join(artifact_utils.get_split_uri(examples_artifact, split), "*"))
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _csv_header() -> list[str]:
    with open(EMBEDDED_CSV, newline="") as f:
        return next(csv.reader(f))


def test_example_gen_splits_two_to_one_by_hash(examples, small_config):
    assert artifact_utils.decode_split_names(examples[0].split_names) == ["train", "eval"]
    train, evaluation = _records(examples, "train"), _records(examples, "eval")
    assert len(train) + len(evaluation) == 600
    assert 0.25 < len(evaluation) / 600 < 0.42  # 1 of 3 hash buckets, give or take hashing
    assert set(train[0].features.feature) <= set(_csv_header())


def test_statistics_exist_for_every_column(statistics):
    for split in ("train", "eval"):
        stats = stats_artifact_utils.load_statistics(statistics[0], split).proto()
        names = {f.path.step[0] for f in stats.datasets[0].features}
        assert names == set(_csv_header()), split
        assert stats.datasets[0].num_examples > 0


def _schema_proto(schema_artifact) -> schema_pb2.Schema:
    return io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema_artifact[0].uri))


def test_schema_has_the_expected_features_and_types(schema):
    types = {f.name: f.type for f in _schema_proto(schema).feature}
    assert types["payment_type"] == schema_pb2.BYTES and types["company"] == schema_pb2.BYTES
    assert types["fare"] == schema_pb2.FLOAT and types["tips"] == schema_pb2.FLOAT
    assert types["trip_start_hour"] == schema_pb2.INT and types["trip_start_timestamp"] == schema_pb2.INT
    assert set(TAXI.features.inputs) <= set(types)


def test_transform_writes_its_graph_and_no_transformed_examples(transform, trainer_inputs, materialized):
    """The Trainer applies the graph to ExampleGen's raw examples itself (models/data.py):
    applied to the raw records, it gives every transformed feature, dense, the values equal
    to the transformed examples the same Transform wrote when it materialized them."""
    assert "transformed_examples" not in transform
    output = tft.TFTransformOutput(transform["transform_graph"][0].uri)
    assert b"Cash" in output.vocabulary_by_name("payment_type")
    expected = {xf(k) for k in TAXI.features.inputs} | {TAXI.label_key}
    spec = output.transformed_feature_spec()
    assert set(spec) == expected and all(isinstance(s, tf.io.FixedLenFeature) for s in spec.values())
    applied = transformed.graph_applied(trainer_inputs, "eval")
    assert set(applied) == expected
    assert {name: (value.dtype, value.shape[1:]) for name, value in applied.items()} == {
        name: (s.dtype.as_numpy_dtype, tuple(s.shape)) for name, s in spec.items()
    }
    assert len(set(applied[xf("payment_type")].ravel())) > 1 and len(set(applied[TAXI.label_key].ravel())) == 2
    written = transformed.materialized(materialized, "eval")
    assert sorted(transformed.rows(applied)) == sorted(transformed.rows(written))
    # The schema TFX's own executor wrote (this one reads its preliminary schema from a trace).
    own = tft.TFTransformOutput(materialized["transform_graph"][0].uri)
    assert output.transformed_metadata.schema == own.transformed_metadata.schema


def test_a_tf1_transform_graph_gives_the_values_the_tf2_graph_gives(
    small_config, examples, validated_schema, trainer_inputs, tmp_path
):
    """--transform-tf1-graph: traced once as a TF1 graph, the same vocabularies and the
    same transformed values on the eval split as the default TF2 graph."""
    tf1_pipe = create_pipeline(dataclasses.replace(small_config, transform_tf1_graph=True))
    tf1 = run_component(node(tf1_pipe, "Transform"), {"examples": examples, "schema": validated_schema}, str(tmp_path))
    tf1_inputs = {**trainer_inputs, "transform_graph": tf1["transform_graph"]}
    tf1_output = tft.TFTransformOutput(tf1["transform_graph"][0].uri)
    tf2_output = tft.TFTransformOutput(trainer_inputs["transform_graph"][0].uri)
    assert tf1_output._exported_as_v1 and not tf2_output._exported_as_v1  # noqa: SLF001 - which graph was written
    for key in TAXI.features.categorical:
        assert tf1_output.vocabulary_by_name(key) == tf2_output.vocabulary_by_name(key)
    expected = transformed.graph_applied(trainer_inputs, "eval")
    applied = transformed.graph_applied(tf1_inputs, "eval")
    assert set(applied) == set(expected)
    for name, values in expected.items():
        assert applied[name].dtype == values.dtype, name
        np.testing.assert_allclose(applied[name], values, rtol=1e-6, err_msg=name)


def test_trainer_exports_serving_and_eval_signatures(trainer):
    serving_dir = path_utils.serving_model_path(trainer["model"][0].uri)
    loaded = tf.saved_model.load(serving_dir)
    assert set(loaded.signatures) == {"serving_default", "serving_raw", "transform_features", "label"}
    inputs = loaded.signatures["serving_default"].structured_input_signature[1]
    assert list(inputs) == ["examples"] and inputs["examples"].dtype == tf.string
    assert set(loaded.signatures["serving_default"].structured_outputs) == {"probability", "big_tipper"}
    assert glob.glob(os.path.join(trainer["model_run"][0].uri, "**", "events.out.tfevents.*"), recursive=True)


def test_the_export_holds_the_model_graph_once(trainer):
    """Both serving signatures call one function holding the model (models/signatures.py)."""
    from tensorflow.python.saved_model import loader_impl

    serving_dir = path_utils.serving_model_path(trainer["model"][0].uri)
    (meta_graph,) = loader_impl.parse_saved_model(serving_dir).meta_graphs
    # Keras numbers its models per process (model, model_1, ...): tests before this one in
    # the same process may have trained some.
    in_the_model = re.compile(r"model(_\d+)?/wide_weights/")
    holding = [
        f.signature.name
        for f in meta_graph.graph_def.library.function
        if any(in_the_model.match(node.name) for node in f.node_def)
    ]
    assert len(holding) == 1, holding


def test_exported_model_reloads_with_keras_and_predicts_what_serving_predicts(trainer):
    """The export skips Keras' saved layer traces (half its time); Keras must still rebuild
    the model from its layer configs, with the weights the serving signature uses."""
    import tf_keras as keras

    serving_dir = path_utils.serving_model_path(trainer["model"][0].uri)
    rows = embedded_rows(50)
    loaded = tf.saved_model.load(serving_dir)
    served = loaded.signatures["serving_default"](examples=tf.constant([raw_example(r) for r in rows]))
    transformed = loaded.signatures["transform_features"](
        examples=tf.constant([raw_example(r, keep_label_source=True) for r in rows])
    )
    model = keras.models.load_model(serving_dir)
    rebuilt = model({name: transformed[name] for name in model.input}).numpy()
    assert rebuilt.shape == (50, 1)
    assert abs(rebuilt - served["probability"].numpy()).max() < 1e-6


def test_raw_columns_signature_answers_csv_text_as_serving_default_answers_examples(trainer):
    """What a JSON request carries (each column by name, as CSV text, "" when missing) gives
    the probabilities serving_default gives for the same rows as tf.Examples."""
    rows = embedded_rows(200)
    assert any(row["company"] == "" for row in rows) and any(row["dropoff_latitude"] == "" for row in rows)
    loaded = tf.saved_model.load(path_utils.serving_model_path(trainer["model"][0].uri))
    raw = loaded.signatures["serving_raw"]
    columns = sorted(raw.structured_input_signature[1])
    assert "tips" not in columns and "fare" in columns and "payment_type" in columns
    answered = raw(**{c: tf.constant([row[c] for row in rows]) for c in columns})
    served = loaded.signatures["serving_default"](examples=tf.constant([raw_example(r) for r in rows]))
    assert answered["probability"].shape == (200, 1)
    assert abs(answered["probability"].numpy() - served["probability"].numpy()).max() < 1e-6
    assert (answered["big_tipper"].numpy() == served["big_tipper"].numpy()).all()


def test_raw_columns_signature_names_an_empty_required_column(trainer):
    loaded = tf.saved_model.load(path_utils.serving_model_path(trainer["model"][0].uri))
    raw = loaded.signatures["serving_raw"]
    row = embedded_rows(1)[0]
    columns = sorted(raw.structured_input_signature[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"column .{1,2}fare.{1,2} is required"):
        raw(**{c: tf.constant(["" if c == "fare" else row[c]]) for c in columns})


def test_label_signature_gives_the_labels_transform_gives(trainer):
    """The Evaluator's labels come from the light ``label`` signature: they must be the
    ones the full Transform graph computes, on rows with tips, without, and with gaps."""
    rows = embedded_rows(300)
    loaded = tf.saved_model.load(path_utils.serving_model_path(trainer["model"][0].uri))
    examples = tf.constant([raw_example(r, keep_label_source=True) for r in rows])
    light = loaded.signatures["label"](examples=examples)["big_tipper_xf"].numpy()
    full = loaded.signatures["transform_features"](examples=examples)["big_tipper_xf"].numpy()
    assert light.shape == full.shape == (300, 1)
    assert (light == full).all()
    assert 0 < light.sum() < 300  # both classes present


def test_evaluator_blesses_a_model_above_the_floor(evaluator):
    assert evaluator["blessing"][0].get_int_custom_property("blessed") == 1
    import tensorflow_model_analysis as tfma

    names = {kv.key.name for m in tfma.load_metrics(evaluator["evaluation"][0].uri) for kv in m.metric_keys_and_values}
    assert {"auc", "binary_accuracy", "example_count"} <= names


@pytest.fixture(scope="session")
def strict_evaluator(small_config, root, examples, trainer):
    """The same Evaluator with an unreachable AUC floor."""
    strict = create_pipeline(dataclasses.replace(small_config, blessing_threshold=0.9999))
    return run_component(
        node(strict, "Evaluator"), {"examples": examples, "model": trainer["model"]}, os.path.join(root, "strict")
    )


def test_evaluator_refuses_a_model_below_the_floor(strict_evaluator):
    assert strict_evaluator["blessing"][0].get_int_custom_property("blessed") == 0


def test_pusher_refuses_an_unblessed_model(pipe, root, trainer, strict_evaluator, small_config):
    pushed = run_component(
        node(pipe, "Pusher"),
        {"model": trainer["model"], "model_blessing": strict_evaluator["blessing"]},
        os.path.join(root, "refused"),
    )["pushed_model"]
    assert pushed[0].get_int_custom_property("pushed") == 0
    assert not glob.glob(os.path.join(small_config.serving_model_dir, "*"))


@pytest.fixture(scope="session")
def pushes(pipe, root, trainer, evaluator, small_config):
    """The blessed model pushed twice (a second apart, as two runs would), then another
    blessed model (a copy of its files in another directory, as a new run's)."""
    other = trainer["model"][0].__class__()
    other.uri = os.path.join(root, "other_run", "model")
    shutil.copytree(trainer["model"][0].uri, other.uri)
    pusher = node(pipe, "Pusher")
    # A champion record of these pushes' own (the session's pipeline root is shared).
    pusher.exec_properties["pipeline_root"] = os.path.join(root, "pushes_pipeline_root")
    results = []
    for attempt, model in enumerate((trainer["model"], trainer["model"], [other])):
        if attempt:
            time.sleep(1.1)  # versions are whole seconds
        results.append(
            run_component(
                pusher,
                {"model": model, "model_blessing": evaluator["blessing"]},
                os.path.join(root, f"push{attempt}"),
            )["pushed_model"][0]
        )
    return results


def test_pusher_pushes_a_blessed_model_to_a_new_version_each_time(pushes, small_config):
    """Each new model to a new version; the champion itself is not copied again."""
    destinations = [p.get_string_custom_property("pushed_destination") for p in pushes]
    assert all(p.get_int_custom_property("pushed") == 1 for p in pushes)
    assert destinations[0] == destinations[1] != destinations[2]
    assert [p.get_int_custom_property("already_serving") for p in pushes] == [0, 1, 0]
    # Every push leaves the model under its output, the champion's too.
    assert all(os.path.exists(os.path.join(p.uri, "saved_model.pb")) for p in pushes)
    for destination in destinations:
        assert os.path.dirname(destination) == small_config.serving_model_dir
        assert os.path.basename(destination).isdigit()
        assert os.path.exists(os.path.join(destination, "saved_model.pb"))


def test_serving_default_answers_raw_examples_from_the_pushed_model(pushes):
    rows = embedded_rows(50)
    assert any(row["company"] == "" for row in rows)  # missing values included
    loaded = tf.saved_model.load(pushes[0].get_string_custom_property("pushed_destination"))
    result = loaded.signatures["serving_default"](examples=tf.constant([raw_example(r) for r in rows]))
    probability, label = result["probability"].numpy(), result["big_tipper"].numpy()
    assert probability.shape == (50, 1) and ((probability >= 0) & (probability <= 1)).all()
    assert ((probability > 0.5).astype(int) == label).all()
