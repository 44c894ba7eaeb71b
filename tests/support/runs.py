"""What the end-to-end tests share about whole runs: the flags of a short run on the
sample, and the components of the shipped pipeline that run an executor."""

from __future__ import annotations

# A short training on the sample, with a floor any trained model clears; no run report
# (tests/pipeline/report/ and one rehearsal check it, the other runs need not write one).
SMALL_RUN = ["--train-steps", "40", "--epochs", "2", "--batch-size", "32", "--min-eval-auc", "0.5", "--no-report"]
# Every component but the latest-blessed-model resolver, in DAG order (schema inferred).
EXECUTED_COMPONENTS = (
    "CsvExampleGen",
    "StatisticsGen",
    "SchemaGen",
    "ExampleValidator",
    "AnomalyGate",
    "DriftGate",
    "Transform",
    "Trainer",
    "Evaluator",
    "Pusher",
)
