"""Shared fixtures: a small sample of the embedded data, and the pipeline's components run
one by one on it (session-scoped, so each executor runs once for the whole suite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from tests.support import cloud
from tests.support.harness import node, run_component
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS, write_sample
from tests.support.workers import made_once


@pytest.fixture(scope="session")
def rehearsal_image() -> str:
    """The project's image, built from the working tree as it is now: when `make test` has
    built it, podman's cache makes this a few seconds (one build at a time on the machine);
    podman's output goes to outputs/image-build.log."""
    from pipeline.config import REPO_ROOT
    from rehearsal import image, podman

    if not podman.available():
        pytest.skip("podman is not installed: `make image` (run by `make test`) installs it")
    (REPO_ROOT / "outputs").mkdir(exist_ok=True)
    with open(REPO_ROOT / "outputs" / "image-build.log", "a") as log:
        image.build(image.DEFAULT_IMAGE, log=log, progress=lambda line: log.write(line + "\n"))
    return image.DEFAULT_IMAGE


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory) -> Path:
    """A few hundred rows spread over the embedded file (so all months and hours appear)."""
    return write_sample(tmp_path_factory.mktemp("sample"), SAMPLE_ROWS, every=EMBEDDED_ROWS // SAMPLE_ROWS)


@pytest.fixture(scope="session")
def small_config(sample_dir, tmp_path_factory) -> PipelineConfig:
    """The pipeline configuration the component tests run: small data, a short training."""
    from models.hparams import HParams

    return PipelineConfig(
        data_root=str(sample_dir),
        output_root=str(tmp_path_factory.mktemp("outputs")),
        # Components tested one by one from SchemaGen on (the contract's own tests use it).
        infer_schema=True,
        train_steps=40,
        blessing_threshold=0.0,  # the path to a blessing, not the model (tests/support/runs.py)
        hparams=HParams(per_replica_batch_size=32, epochs=2),
    )


# The pipeline's components, run one by one with their real executors on the sample (see
# tests/support/harness.py). Session-scoped: the component tests and the run_fn tests share them.


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
    return run_component(node(pipe, "ExampleValidator"), {"statistics": statistics, "schema": schema}, root)[
        "anomalies"
    ]


@pytest.fixture(scope="session")
def validated_schema(pipe, root, anomalies, schema, examples, statistics):
    return run_component(
        node(pipe, "AnomalyGate"),
        {"anomalies": anomalies, "schema": schema, "examples": examples, "statistics": statistics},
        root,
    )["validated_schema"]


@pytest.fixture(scope="session")
def transform(pipe, root, examples, validated_schema):
    return run_component(node(pipe, "Transform"), {"examples": examples, "schema": validated_schema}, root)


@pytest.fixture(scope="session")
def materialized(pipe, root, examples, validated_schema):
    """The pipeline's Transform but writing transformed examples (``materialize=True``), as
    it did before the Trainer transformed its own input: what the Trainer must still get."""
    from components.transform import Transform
    from runtime import speedups

    configured = node(pipe, "Transform")
    properties = configured.exec_properties
    component = Transform(
        examples=configured.inputs["examples"],
        schema=configured.inputs["schema"],
        preprocessing_fn=properties["preprocessing_fn"],
        custom_config=json.loads(properties["custom_config"]),
        disable_statistics=properties["disable_statistics"],
        disable_analyzer_cache="updated_analyzer_cache" not in configured.outputs,
        materialize=True,
        with_speedups=bool(properties[speedups.PARAMETER]),
    ).with_id("MaterializingTransform")
    assert component.exec_properties == properties, "configured unlike the pipeline's Transform"
    assert "transformed_examples" in component.outputs and "transformed_examples" not in configured.outputs
    return run_component(component, {"examples": examples, "schema": validated_schema}, root)


@pytest.fixture(scope="session")
def trainer_inputs(examples, transform, validated_schema) -> dict:
    """The Trainer's inputs as the pipeline wires them: ExampleGen's raw examples of the
    sample, Transform's graph and the validated schema."""
    return {"examples": examples, "transform_graph": transform["transform_graph"], "schema": validated_schema}


@pytest.fixture(scope="session")
def trainer(pipe, root, trainer_inputs):
    return run_component(node(pipe, "Trainer"), trainer_inputs, root)


@pytest.fixture(scope="session")
def evaluator(pipe, root, examples, trainer, statistics):
    return run_component(
        node(pipe, "Evaluator"), {"examples": examples, "model": trainer["model"], "statistics": statistics}, root
    )


@pytest.fixture(scope="module")
def job_server_jar():
    """Flink's and Beam's parts (Beam's Flink job server, the launcher jar naming its libraries),
    fetched unless cached (skipped when they cannot be fetched, failed when one does not match
    its checksum)."""
    from flink_cluster import fetch
    from tests.support.flink_parts import fetched

    return fetched(fetch.fetch_all, "Flink's and Beam's parts could not be fetched")[1]


@pytest.fixture(scope="session")
def full_local_output(tmp_path_factory) -> str:
    """``local_runner.py`` with its defaults on the embedded data: its output root, one run
    for all the suite's workers (the tests only read it)."""
    import local_runner

    def run(output_root: Path) -> None:
        assert local_runner.main(["--output-root", str(output_root)]) == 0

    return str(made_once(tmp_path_factory, "full_local_run", run))


@pytest.fixture(scope="session")
def full_local_run(full_local_output):
    """The summary of that run."""
    import local_runner
    from report.run_summary import summarize_run

    config = PipelineConfig(output_root=full_local_output)
    return summarize_run(local_runner.metadata_config(config), config.pipeline_name)


# Compiling and submitting for Kubeflow / Vertex (tests/support/cloud.py).


@pytest.fixture
def loopback_only(monkeypatch):
    """Any Python socket connecting anywhere but this machine fails the test."""
    cloud.refuse_non_loopback(monkeypatch)


@pytest.fixture(scope="session")
def compiled_job(tmp_path_factory) -> tuple[Path, dict]:
    """The pipeline-job file compiled for the made-up cloud settings, and its JSON."""
    from pipeline.compiler import compile_pipeline

    output = tmp_path_factory.mktemp("compiled") / "job.json"
    # As kubeflow_runner.py compiles it by default: the data contract beside the data.
    config = PipelineConfig(data_root=cloud.DATA_ROOT, output_root=cloud.OUTPUT_ROOT, schema_path=cloud.CONTRACT)
    job = compile_pipeline(config, cloud.IMAGE, str(output))
    assert json.loads(output.read_text()) == job
    return output, job


# Stages of a module's tests, by marker (declared in pyproject.toml), in the order they run
# within their module after its unmarked tests: the Flink module's tests that lose one of its
# cluster's TaskManagers, then the one that stops the cluster.
STAGES = ("losing_a_taskmanager", "stopping_the_cluster")


def stage(item: pytest.Item) -> int:
    return max((STAGES.index(mark.name) + 1 for mark in item.iter_markers() if mark.name in STAGES), default=0)


def pytest_collection_modifyitems(items):
    """Files holding slow tests run first: with several workers (``make test``), a long
    end-to-end file started last would leave the other workers idle while it runs alone.
    Within a file, its tests in stage order, each stage's in the file's order."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    files: dict = {}
    for item in items:
        files.setdefault(item.path, len(files))
    items.sort(key=lambda item: (item.path not in slow_files, files[item.path], stage(item)))


def pytest_sessionfinish(session, exitstatus):
    """Releases the model Beam keeps alive after the last in-process Evaluator run, while
    TensorFlow is still intact.

    Beam's ``apache_beam.utils.shared`` holds the last object acquired through it (TFMA loads
    the SavedModel so) until another is acquired. Left to interpreter exit, it is freed only
    when Python clears that module's globals, which under pytest comes after TensorFlow's
    ``atomic_function`` module (imported later, so cleared earlier) has lost its own: each
    ``AtomicFunction.__del__`` then printed "TypeError: 'NoneType' object is not
    subscriptable" after a green run. Acquiring nothing under a new handle drops that
    reference, as tensorflow_transform does to clear Beam's keep-alives."""
    from apache_beam.utils import shared

    shared.Shared().acquire(lambda: None)
