"""Which ``tf.distribute`` strategy ``run_fn`` trains under, decided at run time.

``choose_strategy`` is pure (environment in, decision out) so every branch is testable
without hardware; ``create_strategy`` turns the decision into a strategy object, with the
TPU system calls injectable so the TPU path can be exercised where no TPU exists.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

AUTO, TPU, PARAMETER_SERVER, MULTI_WORKER, MIRRORED = "auto", "tpu", "parameter_server", "multi_worker", "mirrored"
STRATEGIES: tuple[str, ...] = (AUTO, TPU, PARAMETER_SERVER, MULTI_WORKER, MIRRORED)
# Environment variable that forces a strategy (the Trainer's custom_config wins over it).
STRATEGY_ENV = "TRAINING_STRATEGY"


@dataclasses.dataclass(frozen=True)
class StrategyChoice:
    kind: str
    reason: str
    tpu_name: str | None = None


# Task types that train (and so take part in MultiWorkerMirroredStrategy's collectives).
TRAINING_ROLES: tuple[str, ...] = ("chief", "worker")
# "master" is the legacy (TF 1 / Cloud ML Engine) name of the chief.
CHIEF_ROLES: tuple[str, ...] = ("chief", "master")
# Under ParameterServerStrategy these tasks only serve: the chief schedules work on the
# workers' servers and keeps the variables on the ps tasks' servers.
SERVING_ROLES: tuple[str, ...] = ("worker", "ps")


def _parse_tf_config(tf_config: str) -> dict:
    try:
        parsed = json.loads(tf_config)
    except json.JSONDecodeError as err:
        raise ValueError(f"TF_CONFIG is not a JSON object with a 'cluster' key: {err}") from err
    if not isinstance(parsed, dict):
        raise ValueError(f"TF_CONFIG is not a JSON object with a 'cluster' key: {tf_config!r}")
    return parsed


def _cluster_size(cluster: dict) -> int:
    return sum(len(cluster.get(role, [])) for role in TRAINING_ROLES)


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """This process's place in a training cluster, as TF_CONFIG describes it."""

    task_type: str | None
    task_index: int
    num_workers: int
    is_chief: bool

    @property
    def name(self) -> str:
        return f"{self.task_type}:{self.task_index}" if self.task_type else "single process"


SINGLE_PROCESS = WorkerInfo(task_type=None, task_index=0, num_workers=1, is_chief=True)


def worker_info(tf_config: str | None) -> WorkerInfo:
    """Who this process is. The chief is the task of type 'chief' (or legacy 'master'), or
    worker 0 when the cluster has none (as tf.distribute decides); without a cluster the one
    process is the chief. Only the chief may write the model and logs others will read."""
    if not tf_config:
        return SINGLE_PROCESS
    parsed = _parse_tf_config(tf_config)
    cluster = parsed.get("cluster") or {}
    if not cluster:
        return SINGLE_PROCESS
    task = parsed.get("task") or {}
    task_type, task_index = task.get("type"), task.get("index", 0)
    if not task_type or not isinstance(task_index, int) or task_index < 0:
        raise ValueError(f"TF_CONFIG has a cluster but no valid 'task' (type and index): {task!r}")
    if task_type in cluster and task_index >= len(cluster[task_type]):
        raise ValueError(f"TF_CONFIG task {task_type}:{task_index} is not in the cluster's {cluster[task_type]!r}")
    has_chief = any(cluster.get(role) for role in CHIEF_ROLES)
    is_chief = task_type in CHIEF_ROLES or (task_type == "worker" and task_index == 0 and not has_chief)
    return WorkerInfo(task_type, task_index, max(1, _cluster_size(cluster)), is_chief)


def choose_strategy(env: Mapping[str, str], override: str | None = None) -> StrategyChoice:
    """Decides the strategy: an explicit override, else TPU_NAME, else a multi-worker
    TF_CONFIG, else mirrored (all local GPUs, or the CPU)."""
    forced = override if override not in (None, "", AUTO) else env.get(STRATEGY_ENV, AUTO) or AUTO
    source = "custom_config 'strategy'" if override not in (None, "", AUTO) else f"${STRATEGY_ENV}"
    if forced not in STRATEGIES:
        raise ValueError(f"Unknown training strategy {forced!r} (from {source}); allowed: {', '.join(STRATEGIES)}")

    tpu_name = env.get("TPU_NAME", "").strip()
    cluster = (_parse_tf_config(env["TF_CONFIG"]).get("cluster") or {}) if env.get("TF_CONFIG") else {}
    workers, ps_tasks = _cluster_size(cluster), len(cluster.get("ps", []))

    if forced == TPU:
        if not tpu_name:
            raise ValueError(
                f"Strategy 'tpu' forced by {source} but TPU_NAME is not set: set it to the TPU "
                "name, a grpc:// address, or 'local' on a TPU VM."
            )
        return StrategyChoice(TPU, f"forced by {source}; TPU_NAME={tpu_name}", tpu_name)
    if forced == PARAMETER_SERVER:
        _require_parameter_server_cluster(cluster, f"Strategy 'parameter_server' forced by {source}")
        return StrategyChoice(PARAMETER_SERVER, f"forced by {source}; TF_CONFIG lists {ps_tasks} ps task(s)")
    if forced == MULTI_WORKER:
        return StrategyChoice(MULTI_WORKER, f"forced by {source}; TF_CONFIG lists {workers} worker(s)")
    if forced == MIRRORED:
        return StrategyChoice(MIRRORED, f"forced by {source}")
    if tpu_name:
        return StrategyChoice(TPU, f"TPU_NAME={tpu_name} is set", tpu_name)
    if ps_tasks:
        _require_parameter_server_cluster(cluster, f"TF_CONFIG lists {ps_tasks} ps task(s)")
        return StrategyChoice(
            PARAMETER_SERVER,
            f"TF_CONFIG lists {ps_tasks} ps task(s) and {len(cluster.get('worker', []))} worker(s)",
        )
    if workers > 1:
        return StrategyChoice(MULTI_WORKER, f"TF_CONFIG lists {workers} workers")
    return StrategyChoice(MIRRORED, "no TPU_NAME and no multi-worker TF_CONFIG: local GPUs, or the CPU")


def _require_parameter_server_cluster(cluster: dict, why: str) -> None:
    """ParameterServerStrategy needs one coordinating 'chief' task, workers and ps tasks."""
    counts = {role: len(cluster.get(role, [])) for role in ("chief", "worker", "ps")}
    if counts["chief"] != 1 or not counts["worker"] or not counts["ps"]:
        raise ValueError(
            f"{why}, but parameter-server training needs exactly one 'chief' task (it coordinates), at "
            f"least one 'worker' and one 'ps' task; TF_CONFIG's cluster has "
            f"{ {role: len(tasks) for role, tasks in cluster.items()} }. On Vertex AI the first worker pool "
            "is the chief, the second the workers and the third the parameter servers; in a Kubeflow "
            "TFJob, add a Chief replica."
        )


def require_remote_paths(paths: Sequence[str]) -> None:
    """TPU workers cannot read this machine's disk: refuse local paths up front."""
    local = [p for p in paths if p and not p.startswith("gs://")]
    if local:
        raise ValueError(
            f"Training on a TPU needs data and model locations on Cloud Storage; these are local: "
            f"{local}. Use gs:// paths for the pipeline root and data."
        )


# ParameterServerStrategy shards a variable over the ps tasks only from this size up: smaller
# ones are cheaper whole, one round trip each.
PARTITION_MIN_BYTES = 256 << 10


@dataclasses.dataclass(frozen=True)
class TpuSystem:
    """The three TPU calls, replaceable in tests where no TPU exists."""

    resolver: Callable[[str], Any]
    connect: Callable[[Any], Any]
    initialize: Callable[[Any], Any]

    @classmethod
    def real(cls) -> TpuSystem:
        import tensorflow as tf

        return cls(
            resolver=lambda name: tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name),
            connect=tf.config.experimental_connect_to_cluster,
            initialize=tf.tpu.experimental.initialize_tpu_system,
        )


def create_strategy(
    choice: StrategyChoice, tpu_system: TpuSystem | None = None, strategy_factory: Callable[..., Any] | None = None
):
    """Builds the strategy ``choice`` names. TPU: resolve, connect, initialise, then build."""
    import tensorflow as tf

    if choice.kind == TPU:
        tpu_system = tpu_system or TpuSystem.real()
        resolver = tpu_system.resolver(choice.tpu_name)
        tpu_system.connect(resolver)
        tpu_system.initialize(resolver)
        return (strategy_factory or tf.distribute.TPUStrategy)(resolver)
    if choice.kind == PARAMETER_SERVER:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        ps_tasks = len(resolver.cluster_spec().as_dict().get("ps", []))
        # Variables of at least PARTITION_MIN_BYTES are split across the ps tasks (the wide
        # part's one-hot weights and the larger embeddings), so no one server holds them all.
        partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=PARTITION_MIN_BYTES, max_shards=ps_tasks
        )
        return (strategy_factory or tf.distribute.ParameterServerStrategy)(resolver, variable_partitioner=partitioner)
    if choice.kind == MULTI_WORKER:
        return (strategy_factory or tf.distribute.MultiWorkerMirroredStrategy)()
    return (strategy_factory or tf.distribute.MirroredStrategy)()


def public_name(strategy) -> str:
    """The strategy's name in tf.distribute's API (its classes carry version suffixes)."""
    import tensorflow as tf

    for name in ("TPUStrategy", "ParameterServerStrategy", "MultiWorkerMirroredStrategy", "MirroredStrategy"):
        if isinstance(strategy, getattr(tf.distribute, name)):
            return name
    return type(strategy).__name__
