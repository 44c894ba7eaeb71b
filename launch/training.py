"""Where the Trainer trains, from the flags: Vertex AI Training (``--vertex-training``) or a
TFJob on the Kubeflow cluster (``--tfjob``), each into its typed settings in ``pipeline/``."""

from __future__ import annotations

import argparse

from launch.flag_errors import SettingsError
from pipeline.kubeflow_training import TfJob
from pipeline.vertex_training import KINDS, VertexTraining


def add_training_flags(parser: argparse.ArgumentParser) -> None:
    """The --vertex-training flags: the job's kind and its pools' machines (tuning trials too)."""
    training = parser.add_argument_group("Vertex AI Training for the Trainer")
    training.add_argument(
        "--vertex-training",
        choices=KINDS,
        help="Train on Vertex AI: one GPU machine, several workers, a chief with workers and parameter servers, "
        "or a TPU VM.",
    )
    training.add_argument("--training-machine-type", help="Machine type (default: n1-standard-8; TPU: cloud-tpu).")
    training.add_argument("--accelerator-type", help="e.g. NVIDIA_TESLA_T4 (gpu default), TPU_V3 (tpu default).")
    training.add_argument("--accelerator-count", type=int, help="Accelerators per machine (gpu: 1, tpu: 8).")
    training.add_argument(
        "--training-replicas",
        type=int,
        default=3,
        help="Machines for --vertex-training multi-worker or parameter-server (a chief plus N-1 workers). "
        "(default: %(default)s)",
    )
    training.add_argument(
        "--parameter-servers",
        type=int,
        default=1,
        help="Parameter-server machines for --vertex-training parameter-server. (default: %(default)s)",
    )
    training.add_argument(
        "--parallel-trials",
        type=int,
        default=1,
        help="With --tune and --vertex-training: tuning trials run at once, one Vertex AI machine each. "
        "(default: %(default)s)",
    )
    training.add_argument(
        "--ps-machine-type", help="Parameter-server machine type (default: n1-highmem-4; they hold the variables)."
    )


def check_training_flags(args: argparse.Namespace) -> None:
    """Tuning on Vertex AI: parallel trials need it, and its trials cannot run on a TPU."""
    if args.parallel_trials != 1 and not (args.tune and args.vertex_training):
        raise SettingsError("--parallel-trials runs tuning trials on Vertex AI: add --tune and --vertex-training")
    if args.tune and args.vertex_training == "tpu":
        raise SettingsError(
            "--tune with --vertex-training tpu: trials run on GPU or CPU machines; tune with --vertex-training gpu, "
            "then train on the TPU"
        )


def training_from_args(args: argparse.Namespace) -> VertexTraining | None:
    """The Trainer's Vertex AI job from the --vertex-training flags (unset ones: builder defaults)."""
    if not args.vertex_training:
        return None
    try:
        return VertexTraining.of_kind(
            args.vertex_training,
            args.project,
            args.region,
            args.image,
            replicas=args.training_replicas,
            parameter_servers=args.parameter_servers,
            machine_type=args.training_machine_type,
            accelerator_type=args.accelerator_type,
            accelerator_count=args.accelerator_count,
            ps_machine_type=args.ps_machine_type,
        )
    except ValueError as err:
        raise SettingsError(f"--vertex-training {args.vertex_training}: {err}") from err


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
