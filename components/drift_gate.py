"""DriftGate, the project's own component: stops a run whose data drifted from the data the
champion learned from, or from the data the model is asked about at serving time.

Each column is measured against the data contract's thresholds (``components.drift``,
docs/drift.md); the baseline is the champion's blessing, handed over by the Champion
component. Transform waits for this gate by an ordering edge (docs/pipeline.md says why).
"""

# No `from __future__ import annotations`: TFX reads the component's type hints at runtime.
import json
import os

from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils

from components import drift
from components.anomaly_gate import ANOMALIES_FILE, DataAnomaliesError, describe_anomalies
from runtime import champion
from runtime.paths import is_under

# On the output: JSON {"baseline": blessing URI or null, "serving": serving statistics URI or
# null, "accepted": bool, "drift": [...]}, plus "ignored_baseline": the URI of a baseline
# outside this pipeline's root, when one was given.
DRIFT_PROPERTY = "drift_report"
IGNORED_BASELINE = "ignored_baseline"
# The parameter naming this pipeline's root, here, on the Evaluator and on the Pushers.
PIPELINE_ROOT = "pipeline_root"
TRAINING_SPLIT = "train"
# With data in spans: the name of the new span's comparison with the champion's training data.
NEW_SPAN = "new-span"
# The split name of the serving data (ServingExampleGen's one input split).
SERVING_SPLIT = "serving"


class DataDriftError(RuntimeError):
    """The data moved beyond the contract's drift or skew thresholds; the message names each column."""


def foreign_baseline(uri: str | None, pipeline_root: str | None) -> bool:
    """True when a baseline at ``uri`` is not this pipeline's: not under its root. Nothing
    is foreign without a baseline, or without a root to check against (a component built
    outside ``create_pipeline``)."""
    return bool(uri and pipeline_root) and not is_under(uri, pipeline_root)


def ignored_baseline_line(kind: str, uri: str, pipeline_root: str, consequence: str) -> str:
    """The one log line of a component that ignored another pipeline's baseline."""
    return (
        f"Baseline ignored: the champion's {kind} {uri} is not under this pipeline's root {pipeline_root}, so it "
        f"is another pipeline's: {consequence}"
    )


def measure_drift(
    statistics: dict, baseline: dict, schema: schema_pb2.Schema, new_data_split: str | None = None
) -> tuple[list[drift.Drift], dict]:
    """Each split against the baseline's same split: every measurement, TFDV's anomalies per
    split. With data in spans (``new_data_split``: the split holding the newest span only),
    the new span against the data the champion learned from (its training split) instead:
    a window shares most of its spans with the champion's, so split against split would
    hide what is new."""
    measured, anomalies = [], {}
    if new_data_split:
        if new_data_split in statistics and TRAINING_SPLIT in baseline:
            found, anomalies[NEW_SPAN] = drift.measure(
                statistics[new_data_split], baseline[TRAINING_SPLIT], schema, NEW_SPAN
            )
            measured += found
        return measured, anomalies
    for split, current in sorted(statistics.items()):
        if split not in baseline:
            continue  # a split the blessed run did not have: nothing to compare with
        found, anomalies[split] = drift.measure(current, baseline[split], schema, split)
        measured += found
    return measured, anomalies


def check_serving_data(serving: dict, schema: schema_pb2.Schema) -> None:
    """Raises ``DataAnomaliesError`` when the serving data breaks the contract's SERVING
    environment: it is not a sample of what the model is asked, so skew would mean nothing."""
    found = {split: drift.check_serving_data(stats, schema) for split, stats in serving.items()}
    if lines := describe_anomalies(found):
        raise DataAnomaliesError(
            "The serving data breaks the data contract's serving expectations, so it cannot be compared "
            "with the training data:\n  " + "\n  ".join(lines) + "\nFix the serving data export, or the contract."
        )


def raise_on_breaches(measured: list[drift.Drift], baseline_uri: str | None, accept: bool) -> None:
    """Raises ``DataDriftError`` naming every breach, unless ``accept``."""
    if not (breaches := [d for d in measured if d.breached]) or accept:
        return
    against = []
    if baseline_uri:
        against.append(f"the statistics kept with {baseline_uri} (the champion's data)")
    if any(" vs " in d.split for d in breaches):
        against.append("the serving data (--serving-data-root)")
    raise DataDriftError(
        "The data drifted beyond the data contract's thresholds, so Transform and training did not run on it:\n  "
        + "\n  ".join(d.line() for d in breaches)
        + f"\nCompared with: {'; '.join(against)}\nIf the data is wrong, fix it; if the change is real, run "
        "again with --accept-drift (the run summary records it), or raise the column's threshold "
        "(drift_comparator or skew_comparator) in the data contract."
    )


def champion_blessing(
    baseline: standard_artifacts.ModelBlessing | None, pipeline_root: str | None
) -> tuple[str | None, str | None, str]:
    """The champion's blessing directory to compare with (None when there is none), a
    blessing outside ``pipeline_root`` ignored with one logged line (None when there is
    none), and why there is no champion ('' when the pointer did not say)."""
    if not baseline:
        return None, None, "no champion yet"
    uri, no_champion = champion.resolve(baseline.uri)
    if uri and foreign_baseline(uri, pipeline_root):
        logging.warning(
            ignored_baseline_line("blessing", uri, pipeline_root, "drift is not checked against its statistics.")
        )
        return None, uri, no_champion
    return uri, None, no_champion


def drift_from_champion(
    current: dict,
    contract: schema_pb2.Schema,
    baseline_uri: str | None,
    ignored: str | None,
    no_champion: str,
    new_data_split: str | None,
) -> tuple[list[drift.Drift], dict, str | None]:
    """Every drift measurement against the statistics kept with the champion's blessing,
    TFDV's anomalies per comparison, and the blessing compared with (None, and nothing
    measured, without comparators in the contract or statistics of this pipeline's champion)."""
    previous = drift.read_statistics_dir(os.path.join(baseline_uri, drift.STATISTICS_DIR)) if baseline_uri else {}
    if not drift.has_comparators(contract):
        logging.info("Drift not checked: the data contract sets no drift_comparator thresholds.")
        return [], {}, None
    if ignored:
        return [], {}, None  # logged when ignored: no baseline of this pipeline's came with the run
    if not previous:
        logging.info(
            "Drift not checked: no champion with kept statistics (%s); this run's data becomes the baseline "
            "once a model trained on it is blessed and pushed.",
            no_champion or "its blessing kept none",
        )
        return [], {}, None
    measured, anomalies = measure_drift(current, previous, contract, new_data_split)
    return measured, anomalies, baseline_uri


def skew_from_serving(current: dict, serving: dict, contract: schema_pb2.Schema) -> tuple[list[drift.Drift], dict]:
    """The serving data checked against the contract (``check_serving_data``), then every skew
    measurement of the training split against each serving split, TFDV's anomalies per split."""
    check_serving_data(serving, contract)
    measured, anomalies = [], {}
    if drift.has_comparators(contract, "skew_comparator"):
        for split, stats in sorted(serving.items()):
            found, anomalies[f"skew-{split}"] = drift.measure_skew(
                current[TRAINING_SPLIT], stats, contract, f"{TRAINING_SPLIT} vs {split}"
            )
            measured += found
    return measured, anomalies


def write_drift_report(
    drift_report: standard_artifacts.ExampleAnomalies, report: dict, anomalies: dict, measured: list[drift.Drift]
) -> None:
    """The gate's output: TFDV's anomalies per comparison as splits, ``report`` as its
    ``DRIFT_PROPERTY``; every measurement logged."""
    for split, proto in anomalies.items():
        io_utils.write_bytes_file(
            os.path.join(drift_report.uri, f"{drift.SPLIT_PREFIX}{split}", ANOMALIES_FILE), proto.SerializeToString()
        )
    drift_report.split_names = artifact_utils.encode_split_names(sorted(anomalies))
    for d in measured:
        logging.info("%s%s", "DRIFT ACCEPTED: " if d.breached else "within the contract: ", d.line())
    drift_report.set_string_custom_property(DRIFT_PROPERTY, json.dumps(report))


@component
def DriftGate(
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    drift_report: OutputArtifact[standard_artifacts.ExampleAnomalies],
    baseline: InputArtifact[standard_artifacts.ModelBlessing] = None,
    serving_statistics: InputArtifact[standard_artifacts.ExampleStatistics] = None,
    accept_drift: Parameter[bool] = False,
    pipeline_root: Parameter[str] = None,
    new_data_split: Parameter[str] = None,
) -> None:
    """Fails when a column drifted beyond the contract's threshold from the champion's data,
    or from the serving data, unless ``accept_drift``; records every distance. ``baseline``:
    the Champion component's blessing (a pointer, ``runtime.champion``); one outside
    ``pipeline_root`` is another pipeline's, ignored with one logged line.
    ``new_data_split``: with data in spans, the split holding the new span only (``measure_drift``)."""
    contract = io_utils.parse_pbtxt_file(io_utils.get_only_uri_in_dir(schema.uri), schema_pb2.Schema())
    baseline_uri, ignored, no_champion = champion_blessing(baseline, pipeline_root)
    current = drift.read_statistics_dir(statistics.uri)
    serving = drift.read_statistics_dir(serving_statistics.uri) if serving_statistics else {}
    measured, anomalies, compared_with = drift_from_champion(
        current, contract, baseline_uri, ignored, no_champion, new_data_split
    )
    if serving:
        skew, skew_anomalies = skew_from_serving(current, serving, contract)
        measured += skew
        anomalies.update(skew_anomalies)
    raise_on_breaches(measured, compared_with, accept_drift)
    report = {
        "baseline": compared_with,
        "serving": serving_statistics.uri if serving else None,
        "accepted": bool(accept_drift and any(d.breached for d in measured)),
        "drift": [dict(vars(d), breached=d.breached) for d in measured],
    }
    if ignored:
        report[IGNORED_BASELINE] = ignored
    write_drift_report(drift_report, report, anomalies, measured)
