"""Compiles ``create_pipeline(config)`` with TFX's ``KubeflowV2DagRunner`` into a pipeline-job
JSON (pipeline spec 2.1, which Vertex AI and open-source Kubeflow Pipelines both run: docs/kubeflow.md),
written as TFX compiles it. TFX is imported when compiling, never at import.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from typing import Any

from pipeline.config import PipelineConfig

TFX_VERSION = "1.16.0"


class KfpMissingError(RuntimeError):
    """The kfp package is missing, so TFX cannot compile for Kubeflow/Vertex."""


def require_kfp(find_spec: Callable[[str], Any] = importlib.util.find_spec) -> None:
    """TFX silently drops KubeflowV2DagRunner when kfp is missing: say so instead."""
    if find_spec("kfp") is None:
        raise KfpMissingError(
            "The kfp package is not installed, so TFX cannot compile for Kubeflow/Vertex. "
            f"Install the locked environment (make setup), or pip install 'tfx[kfp]=={TFX_VERSION}'."
        )


def compile_pipeline(config: PipelineConfig, image: str, output_file: str) -> dict:
    """Writes the pipeline-job JSON for Kubeflow Pipelines v2 / Vertex AI, every task
    running ``image``; returns the job."""
    require_kfp()
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

    from pipeline.pipeline import create_pipeline

    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(default_image=image, use_pipeline_spec_2_1=True),
        output_dir=os.path.dirname(os.path.abspath(output_file)),
        output_filename=os.path.basename(output_file),
    )
    job = runner.run(create_pipeline(config), write_out=False)
    os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
    with open(output_file, "w") as f:
        json.dump(job, f, sort_keys=True)
    return job
