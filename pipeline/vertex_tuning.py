"""The cloud Tuner's Vertex AI Training job: one machine per parallel trial.

TFX's cloud Tuner starts a job whose replicas each run the search loop against a shared
oracle: pool 0 is one machine, pool 1 the other ``parallel_trials - 1``. A trial trains one
model on one machine, so the machines are those of the Trainer's job that hold its
accelerators (its workers), or its first pool when none has any. A TPU VM is refused:
trials build the model without a strategy.
"""

from __future__ import annotations

from typing import Any

from pipeline.vertex_training import TPU_TYPES, VertexTraining


def tuning_custom_config(training: VertexTraining, parallel_trials: int, trials_dir: str) -> dict[str, Any]:
    """The Vertex keys of the cloud Tuner's custom_config."""
    from tfx.extensions.google_cloud_ai_platform import constants as vertex
    from tfx.extensions.google_cloud_ai_platform.tuner.executor import (
        REMOTE_TRIALS_WORKING_DIR_KEY,
        TUNING_ARGS_KEY,
    )

    if any(pool.accelerator_type in TPU_TYPES for pool in training.pools):
        raise ValueError(
            "Tuning trials run on GPU or CPU machines, not a TPU VM: tune with --vertex-training gpu, "
            "then train on the TPU with the chosen hyperparameters"
        )
    pool = next((p for p in training.pools if p.accelerator_type), training.pools[0])
    spec = training.worker_pool_specs()[training.pools.index(pool)]
    pools = [{**spec, "replica_count": 1}]
    if parallel_trials > 1:
        pools.append({**spec, "replica_count": parallel_trials - 1})
    return {
        vertex.ENABLE_VERTEX_KEY: True,
        vertex.VERTEX_REGION_KEY: training.region,
        TUNING_ARGS_KEY: {"project": training.project, "job_spec": {"worker_pool_specs": pools}},
        REMOTE_TRIALS_WORKING_DIR_KEY: trials_dir,
    }
