"""Kubeflow's training operator for the Trainer: a TFJob of a chief, workers and parameter
servers (``components/tfjob.py`` launches it), built from typed settings and the --tfjob
flags, and checked before anything is compiled.

The chief is always there (it writes the model); workers make it MultiWorkerMirrored
training, workers with parameter servers ParameterServerStrategy training, as
``models/strategy.py`` reads the operator's ``TF_CONFIG``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import Any

from pipeline.flag_errors import FieldError, SettingsError

_KUBERNETES_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")


@dataclasses.dataclass(frozen=True)
class TfJob:
    """The Trainer's TFJob: ``workers`` besides the chief, ``parameter_servers``, each replica
    a container of ``image`` with the given resources, in ``namespace`` (None: the task's)."""

    image: str
    workers: int = 0
    parameter_servers: int = 0
    namespace: str | None = None
    service_account: str | None = None
    cpu: str | None = None
    memory: str | None = None

    def __post_init__(self) -> None:
        if not self.image:
            raise FieldError("image", "is needed: the TFJob's replicas run the pipeline's image")
        if self.workers < 0 or self.parameter_servers < 0:
            name = "workers" if self.workers < 0 else "parameter_servers"
            raise FieldError(name, f"cannot be negative, got {getattr(self, name)}")
        if self.parameter_servers and not self.workers:
            raise FieldError("parameter_servers", "need at least one worker beside the chief")
        for name in ("namespace", "service_account"):
            value = getattr(self, name)
            if value is not None and not _KUBERNETES_NAME.match(value):
                raise FieldError(name, f"{value!r} is not a Kubernetes name (lower-case letters, digits, dashes)")
        for name in ("cpu", "memory"):
            value = getattr(self, name)
            if value is not None and not _QUANTITY.match(value):
                raise FieldError(name, f"{value!r} is not a Kubernetes quantity (e.g. 4, 500m, 16Gi)")

    def custom_config(self, name_prefix: str) -> dict[str, Any]:
        """The TFJob keys of the Trainer's custom_config (hyperparameters go beside them)."""
        from components.tfjob import TFJOB_KEY

        settings = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return {TFJOB_KEY: {**settings, "name_prefix": name_prefix}}


def add_tfjob_flags(parser: argparse.ArgumentParser) -> None:
    """The --tfjob flags: train in a TFJob on the Kubeflow cluster the job runs on."""
    group = parser.add_argument_group("Kubeflow's training operator for the Trainer (with --kfp-host)")
    group.add_argument(
        "--tfjob",
        action="store_true",
        help="Train in a TFJob (kubeflow.org/v1) in the cluster: a chief, --tfjob-workers workers and "
        "--tfjob-parameter-servers parameter servers, each a container of --image.",
    )
    group.add_argument("--tfjob-workers", type=int, default=0, help="Workers beside the chief.")
    group.add_argument("--tfjob-parameter-servers", type=int, default=0, help="Parameter servers (needs workers).")
    group.add_argument("--tfjob-namespace", help="Namespace of the TFJob (default: the pipeline task's own).")
    group.add_argument("--tfjob-service-account", help="Service account of the TFJob's pods.")
    group.add_argument("--tfjob-cpu", help="CPU of each replica, as Kubernetes writes it (e.g. 4, 500m).")
    group.add_argument("--tfjob-memory", help="Memory of each replica, as Kubernetes writes it (e.g. 16Gi).")


def check_kubeflow_flags(args: argparse.Namespace, on_kubeflow: bool, pushes_to_vertex: bool) -> None:
    """Flags that cannot work where the job runs: Vertex AI's options (its Training, its
    endpoints and registry: ``pushes_to_vertex``) on an open-source Kubeflow cluster
    (``on_kubeflow``), a TFJob anywhere else."""
    if not on_kubeflow:
        if args.tfjob:
            raise SettingsError(
                "--tfjob trains on a Kubeflow cluster's training operator: add --kfp-host (or --rehearse-as kubeflow)"
            )
        return
    target = "--kfp-host" if args.kfp_host else "--rehearse-as kubeflow"
    for given, flag in (
        (args.vertex_training, "--vertex-training"),
        (pushes_to_vertex, "--endpoint-name/--register-model"),
    ):
        if given:
            raise SettingsError(
                f"{flag} is Vertex AI's, and {target} runs the job on an open-source Kubeflow cluster: drop "
                f"{flag.split('/')[0]} (the Pusher then writes to the serving directory under --output-root)"
            )


def tfjob_from_args(args: argparse.Namespace) -> TfJob | None:
    """The Trainer's TFJob from the --tfjob flags (a value it refuses is a ``FieldError``)."""
    given = [flag for flag in ("workers", "parameter_servers", "namespace", "service_account", "cpu", "memory")
             if getattr(args, f"tfjob_{flag}") not in (None, 0)]  # fmt: skip
    if not args.tfjob:
        if given:
            raise SettingsError(f"--tfjob-{given[0].replace('_', '-')} sets the Trainer's TFJob: add --tfjob")
        return None
    if args.vertex_training:
        raise SettingsError("--tfjob and --vertex-training each choose where the Trainer trains: choose one")
    return TfJob(
        image=args.image,
        workers=args.tfjob_workers,
        parameter_servers=args.tfjob_parameter_servers,
        namespace=args.tfjob_namespace,
        service_account=args.tfjob_service_account,
        cpu=args.tfjob_cpu,
        memory=args.tfjob_memory,
    )
