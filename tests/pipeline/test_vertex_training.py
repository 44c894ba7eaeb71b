"""Vertex AI Training worker pools: the exact custom_config the Trainer receives."""

from __future__ import annotations

import json

import pytest
from google.cloud.aiplatform_v1.types import AcceleratorType
from tfx import v1 as tfx

from models.hparams import PIPELINE_ROOT_KEY, WARM_START_KEY
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from pipeline.vertex_training import GPU_TYPES, TPU_TYPES, VertexTraining, WorkerPool
from tests.support.problems import with_problem

IMAGE = "gcr.io/p/pipeline:1"


def _trainer_config(training: VertexTraining) -> tuple[object, dict]:
    pipe = create_pipeline(PipelineConfig(output_root="gs://b/o", data_root="gs://b/d", vertex_training=training))
    (trainer,) = [c for c in pipe.components if c.id == "Trainer"]
    return trainer, json.loads(trainer.exec_properties["custom_config"])


def _expected(worker_pool_specs: list[dict]) -> dict:
    return {
        **with_problem(PipelineConfig().hparams.to_custom_config()),
        # No warm start without spans; the root a base model must lie under to be this pipeline's.
        WARM_START_KEY: False,
        PIPELINE_ROOT_KEY: "gs://b/o/pipelines/taxi-big-tipper",
        "speedups": 1,
        "ai_platform_enable_vertex": True,
        "ai_platform_vertex_region": "us-central1",
        "ai_platform_training_args": {"project": "p", "job_spec": {"worker_pool_specs": worker_pool_specs}},
    }


def test_one_gpu_machine():
    trainer, config = _trainer_config(VertexTraining.gpu("p", "us-central1", IMAGE))
    assert isinstance(trainer, tfx.extensions.google_cloud_ai_platform.Trainer)
    assert config == _expected(
        [
            {
                "machine_spec": {
                    "machine_type": "n1-standard-8",
                    "accelerator_type": "NVIDIA_TESLA_T4",
                    "accelerator_count": 1,
                },
                "replica_count": 1,
                "container_spec": {"image_uri": IMAGE},
            }
        ]
    )


def test_several_workers_are_a_chief_plus_workers():
    _, config = _trainer_config(VertexTraining.multi_worker("p", "us-central1", IMAGE, replicas=4))
    machine = {"machine_type": "n1-standard-8"}
    assert config == _expected(
        [
            {"machine_spec": machine, "replica_count": 1, "container_spec": {"image_uri": IMAGE}},
            {"machine_spec": machine, "replica_count": 3, "container_spec": {"image_uri": IMAGE}},
        ]
    )


def test_parameter_servers_are_a_third_pool_after_the_chief_and_workers():
    training = VertexTraining.parameter_server(
        "p", "us-central1", IMAGE, replicas=3, parameter_servers=2, accelerator_type="NVIDIA_L4", accelerator_count=1
    )
    _, config = _trainer_config(training)
    container = {"image_uri": IMAGE}
    assert config == _expected(
        [
            # Vertex names pool 0 'chief', 1 'worker' and 2 'ps' in TF_CONFIG.
            {"machine_spec": {"machine_type": "n1-standard-8"}, "replica_count": 1, "container_spec": container},
            {
                "machine_spec": {
                    "machine_type": "n1-standard-8",
                    "accelerator_type": "NVIDIA_L4",
                    "accelerator_count": 1,
                },
                "replica_count": 2,
                "container_spec": container,
            },
            {"machine_spec": {"machine_type": "n1-highmem-4"}, "replica_count": 2, "container_spec": container},
        ]
    )


def test_tpu_vm_sets_tpu_name_local_for_the_strategy_choice():
    _, config = _trainer_config(VertexTraining.tpu("p", "us-central1", IMAGE, "TPU_V2", 8))
    assert config == _expected(
        [
            {
                "machine_spec": {"machine_type": "cloud-tpu", "accelerator_type": "TPU_V2", "accelerator_count": 8},
                "replica_count": 1,
                "container_spec": {"image_uri": IMAGE, "env": [{"name": "TPU_NAME", "value": "local"}]},
            }
        ]
    )


def test_run_fn_accepts_the_combined_custom_config():
    from models.hparams import HParams

    _, config = _trainer_config(VertexTraining.gpu("p", "us-central1", IMAGE))
    assert HParams.from_custom_config(config) == PipelineConfig().hparams


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: VertexTraining.gpu("p", "r", IMAGE, accelerator_type="NVIDIA_TESLA_T5"), "Unknown accelerator type"),
        (lambda: VertexTraining.tpu("p", "r", IMAGE, accelerator_type="TPU_V9"), "Unknown TPU type"),
        (lambda: VertexTraining.gpu("p", "r", IMAGE, accelerator_type="TPU_V3"), "TPU accelerators need"),
        (lambda: VertexTraining.multi_worker("p", "r", IMAGE, replicas=1), "at least 2 replicas"),
        (lambda: VertexTraining.parameter_server("p", "r", IMAGE, replicas=1), "at least 1 worker"),
        (lambda: VertexTraining.parameter_server("p", "r", IMAGE, parameter_servers=0), "at least 1 parameter server"),
        (
            lambda: VertexTraining.parameter_server("p", "r", IMAGE, accelerator_type="TPU_V3", accelerator_count=8),
            "take GPUs, not TPUs",
        ),
        (lambda: WorkerPool("n1-standard-4", accelerator_type="NVIDIA_TESLA_T4"), "go together"),
        (lambda: VertexTraining.gpu("", "r", IMAGE), "project is required"),
    ],
)
def test_bad_settings_are_rejected(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_accelerator_names_match_the_vertex_client():
    names = {a.name for a in AcceleratorType} - {"ACCELERATOR_TYPE_UNSPECIFIED"}
    assert GPU_TYPES | TPU_TYPES == names


@pytest.mark.parametrize(
    ("kind", "settings", "built"),
    [
        ("gpu", {}, lambda: VertexTraining.gpu("p", "r", IMAGE)),
        (
            "gpu",
            {"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_L4", "accelerator_count": 2},
            lambda: VertexTraining.gpu("p", "r", IMAGE, "n1-standard-4", "NVIDIA_L4", 2),
        ),
        # Settings a kind has no machines for are left out.
        (
            "multi-worker",
            {"replicas": 4, "parameter_servers": 5, "ps_machine_type": "n2-highmem-8"},
            lambda: VertexTraining.multi_worker("p", "r", IMAGE, 4),
        ),
        (
            "parameter-server",
            {"replicas": 3, "parameter_servers": 2, "ps_machine_type": "n2-highmem-8"},
            lambda: VertexTraining.parameter_server("p", "r", IMAGE, 3, 2, ps_machine_type="n2-highmem-8"),
        ),
        ("tpu", {"accelerator_type": "TPU_V2"}, lambda: VertexTraining.tpu("p", "r", IMAGE, "TPU_V2")),
    ],
)
def test_a_kind_is_built_by_its_builder_with_the_settings_given(kind, settings, built):
    assert VertexTraining.of_kind(kind, "p", "r", IMAGE, **settings) == built()


@pytest.mark.parametrize(
    ("kind", "settings", "message"),
    [
        ("tpu", {"machine_type": "n1-standard-8"}, "always cloud-tpu; drop --training-machine-type"),
        ("gpu", {"accelerator_type": "NVIDIA_TESLA_T5"}, "Unknown accelerator type"),
        ("cpu", {}, "unknown Vertex AI Training kind 'cpu'; known: gpu, multi-worker"),
    ],
)
def test_a_kind_with_settings_that_cannot_work_is_rejected(kind, settings, message):
    with pytest.raises(ValueError, match=message):
        VertexTraining.of_kind(kind, "p", "r", IMAGE, **settings)
