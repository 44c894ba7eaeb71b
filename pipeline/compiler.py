"""Compiles the pipeline for Kubeflow Pipelines v2 / Vertex AI Pipelines.

The same ``create_pipeline(config)`` that ``local_runner.py`` runs is compiled by TFX's
``KubeflowV2DagRunner`` into a pipeline-job JSON file, which both Vertex AI Pipelines and
a Kubeflow Pipelines v2 cluster run (``pipeline.submission`` sends it). TFX is imported
when compiling, never at import.

One edit follows TFX's compilation: its latest-blessed-model resolver compiles to a query
for any live, blessed ``tfx.ModelBlessing`` in the project's metadata store, newest first.
KFP documents such a query as scoped to the pipeline's context, that is to its name; two
pipelines that share a name (two problems compiled with one ``--pipeline-name``, a copy of
a project) would still hand each other their champions. So the query also asks for the
blessing's ``pipeline_root`` (the Evaluator writes it, ``components.evaluator``): the
pipeline finds its own champion whatever else the store holds. TFX has no hook for it
(the filters are fixed in its step builder), hence the edit of the compiled job.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from typing import Any

from pipeline.config import PipelineConfig

TFX_VERSION = "1.16.0"
BLESSING_TYPE = "tfx.ModelBlessing"


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
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(default_image=image),
        output_dir=os.path.dirname(os.path.abspath(output_file)),
        output_filename=os.path.basename(output_file),
    )
    job = runner.run(create_pipeline(config), write_out=False)
    if scope_blessing_queries(job, config.pipeline_root) == 0:
        raise RuntimeError(f"the compiled job has no query for a {BLESSING_TYPE}: its resolver changed shape")
    os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
    with open(output_file, "w") as f:
        json.dump(job, f, sort_keys=True)
    return job


def owner_clause(pipeline_root: str) -> str:
    """The filter clause a blessing of the pipeline at ``pipeline_root`` matches."""
    from components.drift_gate import PIPELINE_ROOT

    quoted = pipeline_root.replace("\\", "\\\\").replace('"', '\\"')
    return f'metadata.{PIPELINE_ROOT}.string_value="{quoted}"'


def scope_blessing_queries(job: dict, pipeline_root: str) -> int:
    """Adds ``owner_clause`` to each compiled resolver query for blessings (see the module
    docstring); returns how many it scoped."""
    scoped = 0
    for executor in job["pipelineSpec"]["deploymentSpec"]["executors"].values():
        for query in executor.get("resolver", {}).get("outputArtifactQueries", {}).values():
            if f'schema_title="{BLESSING_TYPE}"' in query["filter"]:
                query["filter"] = f"{query['filter']} AND {owner_clause(pipeline_root)}"
                scoped += 1
    return scoped
