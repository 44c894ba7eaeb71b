"""AnomalyGate: stops the pipeline when ExampleValidator finds anomalies.

TFX's ExampleValidator records anomalies but never stops a run, so bad data would flow
into Transform and training. This component passes the schema through only when the
anomalies are empty; Transform and Trainer read the schema from it, so on every
orchestrator they run only after the data was found clean (a data dependency, which
keeps the lineage in ML Metadata, rather than a bare ordering edge).
"""

# No `from __future__ import annotations`: TFX reads the component's type hints at runtime.
import os

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils

ANOMALIES_FILE = "SchemaDiff.pb"
SCHEMA_FILE = "schema.pbtxt"


class DataAnomaliesError(RuntimeError):
    """The data does not match the schema; the message lists every anomaly."""


def read_anomalies(anomalies: standard_artifacts.ExampleAnomalies) -> dict[str, anomalies_pb2.Anomalies]:
    """Loads the anomalies proto ExampleValidator wrote for each split."""
    found = {}
    for split in artifact_utils.decode_split_names(anomalies.split_names):
        path = os.path.join(artifact_utils.get_split_uri([anomalies], split), ANOMALIES_FILE)
        proto = anomalies_pb2.Anomalies()
        proto.ParseFromString(io_utils.read_bytes_file(path))
        found[split] = proto
    return found


def describe_anomalies(anomalies_by_split: dict[str, anomalies_pb2.Anomalies]) -> list[str]:
    """One line per anomaly: split, feature, what is wrong."""
    lines = []
    for split, anomalies in sorted(anomalies_by_split.items()):
        for feature, info in sorted(anomalies.anomaly_info.items()):
            reasons = "; ".join(r.description or r.short_description for r in info.reason)
            lines.append(f"[{split}] feature '{feature}': {info.short_description or 'anomaly'}: {reasons}")
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            reasons = "; ".join(r.description or r.short_description for r in info.reason)
            lines.append(f"[{split}] whole dataset: {info.short_description or 'anomaly'}: {reasons}")
    return lines


def check_anomalies(anomalies: standard_artifacts.ExampleAnomalies) -> None:
    """Raises ``DataAnomaliesError`` naming every anomaly, or returns when there is none."""
    lines = describe_anomalies(read_anomalies(anomalies))
    if lines:
        raise DataAnomaliesError(
            "ExampleValidator found anomalies, so Transform and training did not run on this data:\n  "
            + "\n  ".join(lines)
            + f"\nDetails: {anomalies.uri}\nFix the data, or, if the change is intended, update the schema "
            "(pass a curated schema with --schema-path) and run the pipeline again."
        )


@component
def AnomalyGate(
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    schema: InputArtifact[standard_artifacts.Schema],
    validated_schema: OutputArtifact[standard_artifacts.Schema],
) -> None:
    """Fails when the data has anomalies; otherwise passes the schema on."""
    check_anomalies(anomalies)
    source = io_utils.get_only_uri_in_dir(schema.uri)
    io_utils.copy_file(source, os.path.join(validated_schema.uri, SCHEMA_FILE), overwrite=True)
