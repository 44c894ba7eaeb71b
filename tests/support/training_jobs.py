"""Test-only: replicas of a training job as separate processes (``tests.support.trainer_entry``,
the real TFX Trainer executor in each), as Vertex AI or a TFJob starts them, and the Trainer's
inputs for any problem (its own data run through the pipeline's components up to Transform)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tfx.types import artifact_utils

from models import problem as problem_lib
from models import strategy as strategy_lib
from models.preprocessing import PROBLEM_KEY
from pipeline.config import REPO_ROOT, PipelineConfig
from pipeline.pipeline import create_pipeline
from tests.support.fn_args import trainer_outputs
from tests.support.harness import node, run_component
from tests.support.problems import with_problem

# Generous: processes importing TFX and joining collectives on 2 CPU cores.
PROCESS_TIMEOUT_S = 300


def spec(trainer_inputs: dict, root: Path, name: str, train_steps: int, custom_config: dict, **extra) -> Path:
    """A replica's spec for ``tests.support.trainer_entry``: the Trainer's inputs, its outputs
    under ``root/out`` (one set for every replica of a job), ``custom_config`` as the pipeline
    builds it (the taxi problem's spec added unless it names one)."""
    inputs = {k: trainer_inputs[k] for k in ("examples", "transform_graph", "schema")}
    content = {
        "inputs": artifact_utils.jsonify_artifact_dict(inputs),
        "outputs": artifact_utils.jsonify_artifact_dict(trainer_outputs(root / "out")),
        "train_steps": train_steps,
        "custom_config": custom_config if PROBLEM_KEY in custom_config else with_problem(custom_config),
        "report": str(root / f"{name}.report.json"),
        **extra,
    }
    path = root / f"{name}.spec.json"
    path.write_text(json.dumps(content))
    return path


def launch(spec_path: Path, log: Path, tf_config: dict | None = None) -> subprocess.Popen:
    """One replica in its own process (and session), its output in ``log``."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "TPU_NAME", strategy_lib.STRATEGY_ENV)}
    env.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO_ROOT))
    # Its temp files (the modules TensorFlow's autograph writes) beside its log: a replica the
    # test kills cannot remove them, and they stay out of the machine's temp dir.
    env["TMPDIR"] = str(log.parent)
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    with open(log, "w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.trainer_entry", str(spec_path)],
            cwd=REPO_ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait(processes: list[subprocess.Popen], logs: list[Path], timeout: float = PROCESS_TIMEOUT_S) -> list[int]:
    """Return codes; a process still running after ``timeout`` fails the test (all are killed)."""
    deadline = time.monotonic() + timeout
    try:
        return [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in processes]
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"worker process(es) still running after {timeout:.0f} s; logs:\n"
            + "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in logs)
        )
    finally:
        stop(processes)


def stop(processes: list[subprocess.Popen]) -> None:
    """Kills those still running (each with its session) and reaps them."""
    for p in processes:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def tail(logs: list[Path]) -> str:
    return "\n".join(f"--- {log}\n{log.read_text()[-4000:]}" for log in logs)


def problem_trainer_inputs(problem: problem_lib.Problem, root: Path) -> dict:
    """The Trainer's inputs for ``problem`` on its own data and contract, as the pipeline wires
    them: ExampleGen's examples, Transform's graph and the schema AnomalyGate validated."""
    pipe = create_pipeline(PipelineConfig(problem=problem, output_root=str(root)))

    def run(node_id: str, inputs: dict) -> dict:
        return run_component(node(pipe, node_id), inputs, str(root))

    examples = run("CsvExampleGen", {})["examples"]
    statistics = run("StatisticsGen", {"examples": examples})["statistics"]
    schema = run("ImportSchemaGen", {})["schema"]
    anomalies = run("ExampleValidator", {"statistics": statistics, "schema": schema})["anomalies"]
    validated = run(
        "AnomalyGate", {"anomalies": anomalies, "schema": schema, "examples": examples, "statistics": statistics}
    )["validated_schema"]
    transform = run("Transform", {"examples": examples, "schema": validated})
    return {"examples": examples, "transform_graph": transform["transform_graph"], "schema": validated}
