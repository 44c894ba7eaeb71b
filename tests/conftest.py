"""Shared fixtures: a small sample of the embedded data, and the pipeline's components run
one by one on it (session-scoped, so each executor runs once for the whole suite)."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import csv  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from pipeline.config import DEFAULT_DATA_ROOT, PipelineConfig  # noqa: E402
from pipeline.pipeline import create_pipeline  # noqa: E402
from tests.harness import node, run_component  # noqa: E402

EMBEDDED_CSV = Path(DEFAULT_DATA_ROOT) / "taxi.csv"
SAMPLE_ROWS = 600


def write_sample(target_dir: Path, rows: int, every: int = 1, edit=None) -> Path:
    """Writes every ``every``-th row of the embedded CSV, at most ``rows`` of them,
    optionally passing each row dict through ``edit``."""
    target_dir.mkdir(parents=True, exist_ok=True)
    with open(EMBEDDED_CSV, newline="") as source, open(target_dir / "data.csv", "w", newline="") as sink:
        reader = csv.DictReader(source)
        writer = csv.DictWriter(sink, fieldnames=reader.fieldnames)
        writer.writeheader()
        written = 0
        for index, row in enumerate(reader):
            if index % every or written >= rows:
                continue
            writer.writerow(edit(row, written) if edit else row)
            written += 1
    return target_dir


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory) -> Path:
    """A few hundred rows spread over the embedded file (so all months and hours appear)."""
    return write_sample(tmp_path_factory.mktemp("sample"), SAMPLE_ROWS, every=15002 // SAMPLE_ROWS)


@pytest.fixture(scope="session")
def small_config(sample_dir, tmp_path_factory) -> PipelineConfig:
    """The pipeline configuration the component tests run: small data, a short training."""
    from models.hparams import HParams

    return PipelineConfig(
        data_root=str(sample_dir),
        output_root=str(tmp_path_factory.mktemp("outputs")),
        train_steps=40,
        min_eval_auc=0.5,
        hparams=HParams(per_replica_batch_size=32, epochs=2),
    )


# The pipeline's components, run one by one with their real executors on the sample (see
# tests/harness.py). Session-scoped: the component tests and the run_fn tests share them.


@pytest.fixture(scope="session")
def pipe(small_config):
    return create_pipeline(small_config)


@pytest.fixture(scope="session")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("components"))


@pytest.fixture(scope="session")
def examples(pipe, root):
    return run_component(node(pipe, "CsvExampleGen"), {}, root)["examples"]


@pytest.fixture(scope="session")
def statistics(pipe, root, examples):
    return run_component(node(pipe, "StatisticsGen"), {"examples": examples}, root)["statistics"]


@pytest.fixture(scope="session")
def schema(pipe, root, statistics):
    return run_component(node(pipe, "SchemaGen"), {"statistics": statistics}, root)["schema"]


@pytest.fixture(scope="session")
def anomalies(pipe, root, statistics, schema):
    return run_component(
        node(pipe, "ExampleValidator"), {"statistics": statistics, "schema": schema}, root
    )["anomalies"]


@pytest.fixture(scope="session")
def validated_schema(pipe, root, anomalies, schema):
    return run_component(node(pipe, "AnomalyGate"), {"anomalies": anomalies, "schema": schema}, root)[
        "validated_schema"
    ]


@pytest.fixture(scope="session")
def transform(pipe, root, examples, validated_schema):
    return run_component(node(pipe, "Transform"), {"examples": examples, "schema": validated_schema}, root)


@pytest.fixture(scope="session")
def trainer(pipe, root, transform, validated_schema):
    return run_component(
        node(pipe, "Trainer"),
        {
            "examples": transform["transformed_examples"],
            "transform_graph": transform["transform_graph"],
            "schema": validated_schema,
        },
        root,
    )


@pytest.fixture(scope="session")
def evaluator(pipe, root, examples, trainer):
    return run_component(node(pipe, "Evaluator"), {"examples": examples, "model": trainer["model"]}, root)
