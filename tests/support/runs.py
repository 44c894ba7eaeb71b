"""What the end-to-end tests share about whole runs: the flags of a short run on the
sample, and the components of the shipped pipeline that run an executor."""

from __future__ import annotations

# A short training on the sample; no run report (tests/report/ and one rehearsal
# check it, the other runs need not write one). The AUC floor is 0: forty unseeded steps on
# 600 rows score anywhere from about 0.5 to 0.8 (one run in CI scored 0.49), and these runs
# test the path to a blessing and a push, not the model (the full-data runs test that).
SMALL_RUN = ["--train-steps", "40", "--epochs", "2", "--batch-size", "32", "--blessing-threshold", "0", "--no-report"]
# Every component, in DAG order (the problem's contract
# imported; with --infer-schema, SchemaGen takes ImportSchemaGen's place: ``with_inferred_schema``).
EXECUTED_COMPONENTS = (
    "CsvExampleGen",
    "StatisticsGen",
    "ImportSchemaGen",
    "ExampleValidator",
    "AnomalyGate",
    "Champion",
    "DriftGate",
    "Transform",
    "Trainer",
    "Evaluator",
    "Pusher",
)


def with_inferred_schema(components: tuple[str, ...] = EXECUTED_COMPONENTS) -> tuple[str, ...]:
    """The components of a run with --infer-schema."""
    return tuple("SchemaGen" if c == "ImportSchemaGen" else c for c in components)
