"""DriftGate: stops a run whose data drifted from the data of the last blessed model.

Clean data can still be the wrong data: fares in cents, a payment type gone, a month of
the wrong city. The data contract sets a drift threshold per column; this component
measures each split against the same split of the statistics the last blessed model
learned from (``components.drift``) and fails naming every column over its threshold,
unless the run accepts the drift knowingly (``accept_drift``, recorded on its output).

The baseline comes with the resolver's latest blessing (the Evaluator keeps the statistics
beside its verdict): the one artifact besides the model that the latest-blessed-model
resolver returns on every orchestrator, Vertex included. Transform waits for this gate
by an ordering edge, not a data dependency: the baseline changes whenever a model is
blessed, and a data dependency would make every run after a blessing transform and train
again on unchanged data.
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

ANOMALIES_FILE = "SchemaDiff.pb"
# On the output: JSON {"baseline": blessing URI or null, "accepted": bool, "drift": [...]}.
DRIFT_PROPERTY = "drift_report"


class DataDriftError(RuntimeError):
    """The data moved beyond the contract's drift thresholds; the message names each column."""


def check_drift(
    statistics: dict, baseline: dict, schema: schema_pb2.Schema, accept: bool, baseline_uri: str
) -> tuple[list[drift.Drift], dict]:
    """Measures each split against the baseline's same split; raises ``DataDriftError`` on a
    breach unless ``accept``. Returns every measurement and TFDV's anomalies per split."""
    measured, anomalies = [], {}
    for split, current in sorted(statistics.items()):
        if split not in baseline:
            continue  # a split the blessed run did not have: nothing to compare with
        found, anomalies[split] = drift.measure(current, baseline[split], schema, split)
        measured += found
    breaches = [d for d in measured if d.breached]
    if breaches and not accept:
        raise DataDriftError(
            "The data drifted from the data of the last blessed model beyond the contract's thresholds, "
            "so Transform and training did not run on it:\n  "
            + "\n  ".join(d.line() for d in breaches)
            + f"\nBaseline: the statistics kept with {baseline_uri}\nIf the data is wrong, fix it; if the "
            "change is real, run again with --accept-drift (the run summary records it), or raise the "
            "column's drift_comparator threshold in the data contract."
        )
    return measured, anomalies


@component
def DriftGate(
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: InputArtifact[standard_artifacts.Schema],
    drift_report: OutputArtifact[standard_artifacts.ExampleAnomalies],
    baseline: InputArtifact[standard_artifacts.ModelBlessing] = None,
    accept_drift: Parameter[bool] = False,
) -> None:
    """Fails when a column drifted beyond the contract's threshold from the last blessed
    run's data, unless ``accept_drift``; records every distance it measured."""
    contract = io_utils.parse_pbtxt_file(io_utils.get_only_uri_in_dir(schema.uri), schema_pb2.Schema())
    current = drift.read_statistics_dir(statistics.uri)
    report = {"baseline": None, "accepted": False, "drift": []}
    drift_report.split_names = artifact_utils.encode_split_names([])
    previous = drift.read_statistics_dir(os.path.join(baseline.uri, drift.STATISTICS_DIR)) if baseline else {}
    if not drift.has_comparators(contract):
        logging.info("Drift not checked: the data contract sets no drift_comparator thresholds.")
    elif not previous:
        logging.info(
            "Drift not checked: no blessed model with kept statistics yet (this run's data becomes the "
            "baseline once a model trained on it is blessed)."
        )
    else:
        measured, anomalies = check_drift(current, previous, contract, accept_drift, baseline.uri)
        report = {
            "baseline": baseline.uri,
            "accepted": bool(accept_drift and any(d.breached for d in measured)),
            "drift": [dict(vars(d), breached=d.breached) for d in measured],
        }
        for split, proto in anomalies.items():
            io_utils.write_bytes_file(
                os.path.join(drift_report.uri, f"{drift.SPLIT_PREFIX}{split}", ANOMALIES_FILE),
                proto.SerializeToString(),
            )
        drift_report.split_names = artifact_utils.encode_split_names(sorted(anomalies))
        for d in measured:
            logging.info("%s%s", "DRIFT ACCEPTED: " if d.breached else "within the contract: ", d.line())
    drift_report.set_string_custom_property(DRIFT_PROPERTY, json.dumps(report))
