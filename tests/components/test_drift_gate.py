"""DriftGate: this run's data against the data of the champion, with the
contract's thresholds; a breach stops the run naming the columns and distances, unless the
drift is accepted, which the gate records. A blessing from outside the pipeline's root is
another pipeline's: ignored, in one logged line."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil

import pytest
from tfx.types import standard_artifacts

from components.anomaly_gate import ANOMALIES_FILE, DataAnomaliesError
from components.drift_gate import (
    DRIFT_PROPERTY,
    IGNORED_BASELINE,
    PIPELINE_ROOT,
    DataDriftError,
    foreign_baseline,
    is_under,
)
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR
from pipeline.pipeline import create_pipeline
from tests.support.harness import node, run_component
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS, write_sample


@pytest.fixture(scope="module")
def contract(tmp_path_factory) -> list:
    """The embedded data's contract, as ImportSchemaGen hands it on."""
    artifact = standard_artifacts.Schema()
    artifact.uri = str(tmp_path_factory.mktemp("contract"))
    shutil.copy(os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE), artifact.uri)
    return [artifact]


def _statistics_of(small_config, root: str, data_dir) -> list:
    pipe = create_pipeline(dataclasses.replace(small_config, data_root=str(data_dir)))
    examples = run_component(node(pipe, "CsvExampleGen"), {}, root)["examples"]
    return run_component(node(pipe, "StatisticsGen"), {"examples": examples}, root)["statistics"]


def _sample(tmp_path_factory, name: str, edit) -> object:
    return _sample_rows(tmp_path_factory.mktemp(name), edit)


@pytest.fixture(scope="module")
def drifted(small_config, root, tmp_path_factory) -> list:
    """The sample with fares in cents and no cash payments: clean data, the wrong data."""

    def edit(row, i):
        cash = row["payment_type"] == "Cash"
        return {
            **row,
            "fare": f"{float(row['fare']) * 100:.2f}",
            "payment_type": "Credit Card" if cash else row["payment_type"],
        }

    return _statistics_of(small_config, os.path.join(root, "drifted"), _sample(tmp_path_factory, "drifted", edit))


def _gate(
    pipe, root: str, statistics, contract, baseline=None, accept: bool = False, serving=None, pipeline_root=None
) -> dict:
    """The pipeline's DriftGate run into ``root``. Its pipeline root is ``pipeline_root``, by
    default the directory above ``root``: the component tests' root, under which the harness
    writes every output (the ``evaluator`` fixture's blessing too), as a run does under its
    pipeline root."""
    gate = node(create_pipeline(dataclasses.replace(pipe, accept_drift=accept)), "DriftGate")
    gate.exec_properties[PIPELINE_ROOT] = pipeline_root or os.path.dirname(root)
    inputs = {"statistics": statistics, "schema": contract}
    if baseline is not None:
        inputs["baseline"] = baseline
    if serving is not None:
        inputs["serving_statistics"] = serving
    return run_component(gate, inputs, root)


def _serving_statistics(small_config, root: str, target, drop: tuple[str, ...] = ("tips",), edit=None) -> list:
    """Serving requests: the sample's rows without the label's source (and ``drop``), as an
    export of the endpoint's request log would hold them, through the pipeline's own
    ServingExampleGen and ServingStatisticsGen."""
    rows_dir = _sample_rows(target / "rows", edit)
    with open(rows_dir / "data.csv", newline="") as source:
        rows = list(csv.DictReader(source))
    columns = [c for c in rows[0] if c not in drop]
    (target / "serving").mkdir(parents=True)
    with open(target / "serving" / "requests.csv", "w", newline="") as sink:
        writer = csv.DictWriter(sink, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    pipe = create_pipeline(dataclasses.replace(small_config, serving_data_root=str(target / "serving")))
    examples = run_component(node(pipe, "ServingExampleGen"), {}, root)["examples"]
    return run_component(node(pipe, "ServingStatisticsGen"), {"examples": examples}, root)["statistics"]


def _sample_rows(target, edit=None):
    return write_sample(target, SAMPLE_ROWS, every=EMBEDDED_ROWS // SAMPLE_ROWS, edit=edit)


def _report(outputs) -> dict:
    return json.loads(outputs["drift_report"][0].get_string_custom_property(DRIFT_PROPERTY))


def test_the_first_run_has_no_baseline_and_passes(small_config, root, statistics, contract):
    report = _report(_gate(small_config, os.path.join(root, "gate_first"), statistics, contract))
    assert report == {"baseline": None, "serving": None, "accepted": False, "drift": []}


def test_the_same_data_as_the_blessed_run_passes_with_every_distance_recorded(
    small_config, root, statistics, contract, evaluator
):
    outputs = _gate(small_config, os.path.join(root, "gate_same"), statistics, contract, evaluator["blessing"])
    report = _report(outputs)
    assert report["baseline"] == evaluator["blessing"][0].uri and not report["accepted"]
    measured = {(d["split"], d["feature"]) for d in report["drift"]}
    compared = [f.name for f in _contract_features(contract) if f.HasField("drift_comparator")]
    assert measured == {(split, feature) for split in ("train", "eval") for feature in compared}
    assert all(d["value"] == pytest.approx(0.0, abs=1e-9) and not d["breached"] for d in report["drift"])
    uri = outputs["drift_report"][0].uri
    assert sorted(os.listdir(uri)) == ["Split-eval", "Split-train"]
    assert os.path.exists(os.path.join(uri, "Split-train", ANOMALIES_FILE))


def _contract_features(contract):
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    path = os.path.join(contract[0].uri, CONTRACT_FILE)
    return io_utils.parse_pbtxt_file(path, schema_pb2.Schema()).feature


def test_drift_stops_the_run_naming_columns_distances_and_the_way_out(small_config, root, drifted, contract, evaluator):
    with pytest.raises(DataDriftError) as raised:
        _gate(small_config, os.path.join(root, "gate_drifted"), drifted, contract, evaluator["blessing"])
    message = str(raised.value)
    for split in ("train", "eval"):
        assert f"[{split}] feature 'fare': Jensen-Shannon divergence " in message
        assert f"[{split}] feature 'payment_type': L-infinity distance " in message
    thresholds = {f.name: f.drift_comparator for f in _contract_features(contract)}
    fare, payment = thresholds["fare"].jensen_shannon_divergence, thresholds["payment_type"].infinity_norm
    assert f"(contract allows {fare.threshold:g})" in message and f"(contract allows {payment.threshold:g})" in message
    assert "trip_miles" not in message  # unchanged columns are not blamed
    assert evaluator["blessing"][0].uri in message and "--accept-drift" in message


def test_accepted_drift_passes_and_is_recorded(small_config, root, drifted, contract, evaluator):
    outputs = _gate(small_config, os.path.join(root, "gate_accepted"), drifted, contract, evaluator["blessing"], True)
    report = _report(outputs)
    assert report["accepted"]
    breached = {(d["split"], d["feature"]) for d in report["drift"] if d["breached"]}
    assert breached == {(s, f) for s in ("train", "eval") for f in ("fare", "payment_type")}


def test_accepting_without_drift_records_nothing_accepted(small_config, root, statistics, contract, evaluator):
    outputs = _gate(
        small_config, os.path.join(root, "gate_accept_clean"), statistics, contract, evaluator["blessing"], True
    )
    assert not _report(outputs)["accepted"]


def test_an_inferred_schema_has_no_thresholds_and_checks_nothing(small_config, root, statistics, schema, evaluator):
    report = _report(
        _gate(small_config, os.path.join(root, "gate_inferred"), statistics, schema, evaluator["blessing"])
    )
    assert report == {"baseline": None, "serving": None, "accepted": False, "drift": []}


def test_serving_data_like_the_training_data_has_no_skew(small_config, root, statistics, contract, tmp_path_factory):
    serving = _serving_statistics(small_config, os.path.join(root, "serving_same"), tmp_path_factory.mktemp("same"))
    report = _report(
        _gate(small_config, os.path.join(root, "gate_serving_same"), statistics, contract, serving=serving)
    )
    assert report["serving"] == serving[0].uri and report["baseline"] is None
    assert {d["split"] for d in report["drift"]} == {"train vs serving"}
    assert "payment_type" in {d["feature"] for d in report["drift"]}
    assert "tips" not in {d["feature"] for d in report["drift"]}  # not asked at serving time
    assert not any(d["breached"] for d in report["drift"]), report


def test_skewed_serving_data_stops_the_run_naming_columns(small_config, root, statistics, contract, tmp_path_factory):
    def all_cash(row, i):
        return {**row, "payment_type": "Cash"}

    serving = _serving_statistics(
        small_config, os.path.join(root, "serving_cash"), tmp_path_factory.mktemp("cash"), edit=all_cash
    )
    with pytest.raises(DataDriftError) as raised:
        _gate(small_config, os.path.join(root, "gate_serving_cash"), statistics, contract, serving=serving)
    message = str(raised.value)
    assert "[train vs serving] feature 'payment_type': L-infinity distance " in message
    assert "the serving data (--serving-data-root)" in message and "fare" not in message


def test_serving_data_missing_a_required_column_breaks_the_contract(
    small_config, root, statistics, contract, tmp_path_factory
):
    target = tmp_path_factory.mktemp("no_miles")
    serving = _serving_statistics(
        small_config, os.path.join(root, "serving_no_miles"), target, drop=("tips", "trip_miles")
    )
    with pytest.raises(DataAnomaliesError) as raised:
        _gate(small_config, os.path.join(root, "gate_serving_no_miles"), statistics, contract, serving=serving)
    assert "serving data breaks the data contract's serving expectations" in str(raised.value)
    assert "[serving] feature 'trip_miles': Column dropped" in str(raised.value)


def test_the_pipeline_gives_the_gate_its_own_root(small_config):
    assert node(create_pipeline(small_config), "DriftGate").exec_properties[PIPELINE_ROOT] == (
        small_config.pipeline_root
    )


@pytest.mark.parametrize(
    ("uri", "root", "under"),
    [
        ("/o/pipelines/taxi/rehearsal/job-1/Evaluator_9/blessing", "/o/pipelines/taxi", True),
        ("/o/pipelines/taxi", "/o/pipelines/taxi", True),  # the root itself
        ("/o/pipelines/taxi/x", "/o/pipelines/taxi/", True),  # a trailing slash on the root
        ("/o/pipelines//taxi/./x", "/o/pipelines/taxi", True),
        ("/o/pipelines/taxi-2/Evaluator/blessing/7", "/o/pipelines/taxi", False),  # a longer name, not inside
        ("/o/pipelines/taxi2", "/o/pipelines/taxi", False),
        ("/o/pipelines/penguin-species/x", "/o/pipelines/taxi", False),
        ("/o/pipelines/taxi/../taxi-2/x", "/o/pipelines/taxi", False),
        ("/o/pipelines", "/o/pipelines/taxi", False),  # above it
        ("gs://b/out/pipelines/taxi/123/taxi-20250101/Evaluator_4/blessing", "gs://b/out/pipelines/taxi", True),
        ("gs://b/out/pipelines/taxi-2/123/job/Evaluator_4/blessing", "gs://b/out/pipelines/taxi", False),
        ("gs://other/out/pipelines/taxi/x", "gs://b/out/pipelines/taxi", False),  # another bucket
        ("gs://b/out/pipelines/taxi/x", "gs://b/out/pipelines/taxi/", True),
        ("GS://b/out/pipelines/taxi/x", "gs://b/out/pipelines/taxi", True),
        ("/gs/b/out/pipelines/taxi/x", "gs://b/out/pipelines/taxi", False),  # a local path is not a bucket
    ],
)
def test_under_the_root_means_inside_it_by_whole_path_segments(uri, root, under):
    assert is_under(uri, root) is under
    assert foreign_baseline(uri, root) is not under


def test_without_a_baseline_or_a_root_nothing_is_foreign():
    assert not foreign_baseline(None, "/o/pipelines/taxi")
    assert not foreign_baseline("/elsewhere/blessing", None)
    assert not foreign_baseline("/elsewhere/blessing", "")


def _blessing_at(uri: str, blessing) -> list:
    """A copy of ``blessing`` (its verdict and kept statistics) at ``uri``."""
    artifact = standard_artifacts.ModelBlessing()
    artifact.uri = uri
    shutil.copytree(blessing[0].uri, uri)
    return [artifact]


def _ignored_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Baseline ignored")]


def test_another_pipelines_blessing_is_ignored_in_one_line(
    small_config, root, drifted, contract, evaluator, tmp_path, caplog
):
    # Its data is the drifted one: compared with that blessing's statistics, the gate would fail.
    own_root, other = str(tmp_path / "pipelines" / "taxi"), str(tmp_path / "pipelines" / "taxi-2")
    foreign = _blessing_at(os.path.join(other, "rehearsal", "job-1", "Evaluator_9", "blessing"), evaluator["blessing"])
    caplog.set_level("INFO")
    outputs = _gate(
        small_config, os.path.join(root, "gate_foreign"), drifted, contract, foreign, pipeline_root=own_root
    )
    report = _report(outputs)
    assert report == {
        "baseline": None,
        "serving": None,
        "accepted": False,
        "drift": [],
        IGNORED_BASELINE: foreign[0].uri,
    }
    (line,) = _ignored_lines(caplog)
    assert f"blessing {foreign[0].uri} is not under this pipeline's root {own_root}" in line
    assert "drift is not checked" in line
    assert not any("no blessed model" in r.getMessage() for r in caplog.records)  # not a first run either


def test_its_own_blessing_under_its_root_is_compared(
    small_config, root, drifted, contract, evaluator, tmp_path, caplog
):
    own_root = tmp_path / "pipelines" / "taxi"
    own = _blessing_at(str(own_root / "rehearsal" / "job-1" / "Evaluator_9" / "blessing"), evaluator["blessing"])
    caplog.set_level("INFO")
    with pytest.raises(DataDriftError) as raised:
        _gate(small_config, os.path.join(root, "gate_own"), drifted, contract, own, pipeline_root=f"{own_root}/")
    assert own[0].uri in str(raised.value) and "feature 'fare'" in str(raised.value)
    assert _ignored_lines(caplog) == []


def test_with_spans_the_new_span_is_compared_with_the_champions_training_data(
    small_config, root, statistics, drifted, contract, evaluator
):
    """The new span (the eval split, the newest span alone) against the data the champion
    learnt from (its training split), once: not split against split."""
    in_spans = dataclasses.replace(small_config, data_pattern="span-{SPAN}/*.csv")
    assert node(create_pipeline(in_spans), "DriftGate").exec_properties["new_data_split"] == "eval"
    outputs = _gate(in_spans, os.path.join(root, "gate_span_same"), statistics, contract, evaluator["blessing"])
    report = _report(outputs)
    compared = [f.name for f in _contract_features(contract) if f.HasField("drift_comparator")]
    assert {(d["split"], d["feature"]) for d in report["drift"]} == {("new-span", f) for f in compared}
    assert not any(d["breached"] for d in report["drift"])  # eval and train: two samples of one data set
    assert sorted(os.listdir(outputs["drift_report"][0].uri)) == ["Split-new-span"]
    with pytest.raises(DataDriftError, match=r"\[new-span\] feature 'fare'"):
        _gate(in_spans, os.path.join(root, "gate_span_drifted"), drifted, contract, evaluator["blessing"])
