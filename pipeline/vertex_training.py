"""Vertex AI Training for the Trainer: worker pools for one GPU machine, several workers,
parameter servers, or a TPU VM (``launch/training.py`` makes them from the --vertex-training
flags). Inside the job ``run_fn`` picks its strategy from what Vertex sets (docs/model.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Vertex AI's AcceleratorType names (google.cloud.aiplatform_v1.types.AcceleratorType,
# client 1.165), without the UNSPECIFIED placeholder; a test keeps this list in step.
GPU_TYPES: frozenset[str] = frozenset(
    {
        "NVIDIA_TESLA_K80",
        "NVIDIA_TESLA_P100",
        "NVIDIA_TESLA_V100",
        "NVIDIA_TESLA_P4",
        "NVIDIA_TESLA_T4",
        "NVIDIA_TESLA_A100",
        "NVIDIA_A100_80GB",
        "NVIDIA_L4",
        "NVIDIA_H100_80GB",
        "NVIDIA_H100_MEGA_80GB",
        "NVIDIA_H200_141GB",
        "NVIDIA_B200",
        "NVIDIA_GB200",
        "NVIDIA_RTX_PRO_6000",
    }
)
TPU_TYPES: frozenset[str] = frozenset({"TPU_V2", "TPU_V3", "TPU_V4_POD", "TPU_V5_LITEPOD"})
TPU_MACHINE_TYPE = "cloud-tpu"
KINDS = ("gpu", "multi-worker", "parameter-server", "tpu")


@dataclasses.dataclass(frozen=True)
class WorkerPool:
    machine_type: str
    replica_count: int = 1
    accelerator_type: str | None = None
    accelerator_count: int = 0

    def __post_init__(self) -> None:
        if self.replica_count < 1:
            raise ValueError(f"replica_count must be at least 1, got {self.replica_count}")
        known = GPU_TYPES | TPU_TYPES
        if self.accelerator_type is not None and self.accelerator_type not in known:
            raise ValueError(f"Unknown accelerator type {self.accelerator_type!r}; known: {', '.join(sorted(known))}")
        if (self.accelerator_type is None) != (self.accelerator_count == 0):
            raise ValueError(
                "accelerator_type and a positive accelerator_count go together "
                f"(got {self.accelerator_type!r} x {self.accelerator_count})"
            )
        if (self.accelerator_type in TPU_TYPES) != (self.machine_type == TPU_MACHINE_TYPE):
            raise ValueError(
                f"TPU accelerators need machine_type {TPU_MACHINE_TYPE!r} and it needs a TPU "
                f"(got {self.machine_type!r} with {self.accelerator_type!r})"
            )

    def machine_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"machine_type": self.machine_type}
        if self.accelerator_type:
            spec.update(accelerator_type=self.accelerator_type, accelerator_count=self.accelerator_count)
        return spec


@dataclasses.dataclass(frozen=True)
class VertexTraining:
    """A Vertex AI custom job for the Trainer. Use the ``gpu``/``multi_worker``/
    ``parameter_server``/``tpu`` builders."""

    project: str
    region: str
    image: str
    pools: tuple[WorkerPool, ...]
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for name in ("project", "region", "image"):
            if not getattr(self, name):
                raise ValueError(f"VertexTraining.{name} is required")
        if not self.pools:
            raise ValueError("VertexTraining needs at least one worker pool")

    @classmethod
    def gpu(
        cls,
        project: str,
        region: str,
        image: str,
        machine_type: str = "n1-standard-8",
        accelerator_type: str = "NVIDIA_TESLA_T4",
        accelerator_count: int = 1,
    ) -> VertexTraining:
        """One machine with GPUs: MirroredStrategy over them."""
        return cls(project, region, image, (WorkerPool(machine_type, 1, accelerator_type, accelerator_count),))

    @classmethod
    def multi_worker(
        cls,
        project: str,
        region: str,
        image: str,
        replicas: int = 3,
        machine_type: str = "n1-standard-8",
        accelerator_type: str | None = None,
        accelerator_count: int = 0,
    ) -> VertexTraining:
        """A chief plus ``replicas - 1`` workers: MultiWorkerMirroredStrategy."""
        if replicas < 2:
            raise ValueError(f"multi-worker training needs at least 2 replicas (--training-replicas), got {replicas}")
        pool = dict(machine_type=machine_type, accelerator_type=accelerator_type, accelerator_count=accelerator_count)
        return cls(
            project,
            region,
            image,
            (WorkerPool(replica_count=1, **pool), WorkerPool(replica_count=replicas - 1, **pool)),
        )

    @classmethod
    def parameter_server(
        cls,
        project: str,
        region: str,
        image: str,
        replicas: int = 3,
        parameter_servers: int = 1,
        machine_type: str = "n1-standard-8",
        accelerator_type: str | None = None,
        accelerator_count: int = 0,
        ps_machine_type: str = "n1-highmem-4",
    ) -> VertexTraining:
        """A chief, ``replicas - 1`` workers and ``parameter_servers`` ps tasks, in Vertex's
        pool order (its TF_CONFIG names pool 0 'chief', 1 'worker', 2 'ps'):
        ParameterServerStrategy. The chief only coordinates and the ps tasks only hold
        variables, so accelerators go to the workers alone."""
        if replicas < 2:
            raise ValueError(
                f"parameter-server training needs a chief and at least 1 worker (2 replicas), got {replicas}"
            )
        if parameter_servers < 1:
            raise ValueError(
                "parameter-server training needs at least 1 parameter server (--parameter-servers), "
                f"got {parameter_servers}"
            )
        if accelerator_type in TPU_TYPES:
            raise ValueError("parameter-server workers take GPUs, not TPUs; for a TPU use --vertex-training tpu")
        return cls(
            project,
            region,
            image,
            (
                WorkerPool(machine_type),
                WorkerPool(machine_type, replicas - 1, accelerator_type, accelerator_count),
                WorkerPool(ps_machine_type, parameter_servers),
            ),
        )

    @classmethod
    def tpu(
        cls, project: str, region: str, image: str, accelerator_type: str = "TPU_V3", accelerator_count: int = 8
    ) -> VertexTraining:
        """A TPU VM: TPU_NAME=local selects TPUStrategy on the VM's own TPU."""
        if accelerator_type not in TPU_TYPES:
            raise ValueError(f"Unknown TPU type {accelerator_type!r}; known: {', '.join(sorted(TPU_TYPES))}")
        return cls(
            project,
            region,
            image,
            (WorkerPool(TPU_MACHINE_TYPE, 1, accelerator_type, accelerator_count),),
            env=(("TPU_NAME", "local"),),
        )

    @classmethod
    def of_kind(
        cls,
        kind: str,
        project: str,
        region: str,
        image: str,
        replicas: int = 3,
        parameter_servers: int = 1,
        machine_type: str | None = None,
        accelerator_type: str | None = None,
        accelerator_count: int | None = None,
        ps_machine_type: str | None = None,
    ) -> VertexTraining:
        """The job of one of ``KINDS``, through its builder. Settings left None take the
        builder's defaults; ``replicas``, ``parameter_servers`` and ``ps_machine_type`` count
        only for the kinds that have such machines."""
        given: dict[str, Any] = {
            k: v
            for k, v in (
                ("machine_type", machine_type),
                ("accelerator_type", accelerator_type),
                ("accelerator_count", accelerator_count),
            )
            if v is not None
        }
        if kind == "gpu":
            return cls.gpu(project, region, image, **given)
        if kind == "multi-worker":
            return cls.multi_worker(project, region, image, replicas, **given)
        if kind == "parameter-server":
            if ps_machine_type:
                given["ps_machine_type"] = ps_machine_type
            return cls.parameter_server(project, region, image, replicas, parameter_servers, **given)
        if kind == "tpu":
            if "machine_type" in given:
                raise ValueError(f"a TPU VM's machine type is always {TPU_MACHINE_TYPE}; drop --training-machine-type")
            return cls.tpu(project, region, image, **given)
        raise ValueError(f"unknown Vertex AI Training kind {kind!r}; known: {', '.join(KINDS)}")

    def worker_pool_specs(self) -> list[dict[str, Any]]:
        container: dict[str, Any] = {"image_uri": self.image}
        if self.env:
            container["env"] = [{"name": k, "value": v} for k, v in self.env]
        return [
            {
                "machine_spec": pool.machine_spec(),
                "replica_count": pool.replica_count,
                "container_spec": dict(container),
            }
            for pool in self.pools
        ]

    def custom_config(self) -> dict[str, Any]:
        """The Vertex keys of the Trainer's custom_config (hyperparameters go beside them)."""
        from tfx.v1.extensions import google_cloud_ai_platform as vertex

        return {
            vertex.ENABLE_VERTEX_KEY: True,
            vertex.VERTEX_REGION_KEY: self.region,
            vertex.TRAINING_ARGS_KEY: {
                "project": self.project,
                "job_spec": {"worker_pool_specs": self.worker_pool_specs()},
            },
        }
