"""What the end-to-end tests share about whole runs: the flags of a short run on the
sample, and the components of the shipped pipeline that run an executor."""

from __future__ import annotations

# A short training on the sample, with a floor any trained model clears.
SMALL_RUN = ["--train-steps", "40", "--epochs", "2", "--batch-size", "32", "--min-eval-auc", "0.5"]
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
