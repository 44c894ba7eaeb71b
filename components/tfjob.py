"""The Trainer with --tfjob, TFX's with a change: its executor runs ``run_fn`` in the replicas
of a TFJob of Kubeflow's training operator (``kubeflow.org/v1``) instead, each running TFX's
Trainer executor on the task's inputs and outputs, created, waited for and deleted through
the Kubernetes API as kubectl's users have it configured (docs/kubeflow.md).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from absl import logging
from tfx.components.trainer import executor as tfx_trainer
from tfx.components.trainer.component import Trainer
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_component_specs

# custom_config[TFJOB_KEY]: the job's settings (pipeline/kubeflow_training.py builds them).
TFJOB_KEY = "tfjob"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
CONTAINER = "tensorflow"
# The port TF's servers listen on, named as the operator looks it up (its default).
PORT_NAME, PORT = "tfjob-port", 2222
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPES = ("Chief", "Worker", "PS")
LOG_LINES = 20
# How often the TFJob's status is read while it runs: one small GET, against a training that
# lasts minutes; at 10 s a finished job was noticed 5 s late on average.
POLL_SECONDS = 2.0
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
TRAINER_EXECUTOR = f"{tfx_trainer.GenericExecutor.__module__}.{tfx_trainer.GenericExecutor.__name__}"


class TfJobFailed(RuntimeError):
    """The TFJob failed; the message names the replica and its last log lines."""


def job_name(prefix: str) -> str:
    """A unique TFJob name Kubernetes accepts (lower-case letters, digits and dashes)."""
    cleaned = "".join(c if c.isalnum() else "-" for c in prefix.lower()).strip("-")[:40] or "trainer"
    return f"{cleaned}-{uuid.uuid4().hex[:8]}"


def replica_counts(settings: dict[str, Any]) -> dict[str, int]:
    """Replicas per TFJob replica type: always a chief, then the workers and parameter servers."""
    counts = {"Chief": 1, "Worker": int(settings.get("workers", 0)), "PS": int(settings.get("parameter_servers", 0))}
    return {kind: count for kind, count in counts.items() if count > 0}


def tfjob_body(name: str, namespace: str, command: list[str], settings: dict[str, Any]) -> dict[str, Any]:
    """The TFJob: each replica type's pod template runs ``command`` in the settings' image,
    with its resources, service account and the operator's ``tfjob-port``."""
    resources = {k: str(v) for k, v in (("cpu", settings.get("cpu")), ("memory", settings.get("memory"))) if v}
    specs = {}
    for kind, count in replica_counts(settings).items():
        container = {
            "name": CONTAINER,
            "image": settings["image"],
            "command": command,
            "ports": [{"name": PORT_NAME, "containerPort": PORT}],
        }
        if resources:
            container["resources"] = {"requests": resources, "limits": resources}
        pod = {"containers": [container], "restartPolicy": "Never"}
        if settings.get("service_account"):
            pod["serviceAccountName"] = settings["service_account"]
        specs[kind] = {"replicas": count, "restartPolicy": "Never", "template": {"spec": pod}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/created-by": "tfx-trainer"}},
        "spec": {"runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0}, "tfReplicaSpecs": specs},
    }


def replica_command(input_dict: dict, output_dict: dict, exec_properties: dict[str, Any]) -> list[str]:
    """What every replica runs: TFX's Trainer executor with the task's inputs and outputs,
    its custom_config without the TFJob's settings (so a replica trains rather than launches)."""
    custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
    custom_config.pop(TFJOB_KEY, None)
    properties = {**exec_properties, standard_component_specs.CUSTOM_CONFIG_KEY: json.dumps(custom_config)}
    return [
        "python",
        "-m",
        "tfx.scripts.run_executor",
        "--executor_class_path",
        TRAINER_EXECUTOR,
        "--inputs",
        artifact_utils.jsonify_artifact_dict(input_dict),
        "--outputs",
        artifact_utils.jsonify_artifact_dict(output_dict),
        "--exec-properties",
        json.dumps(properties, sort_keys=True),
    ]


def current_namespace() -> str:
    """The namespace the task runs in (its service account's), else the kubeconfig's."""
    if os.path.exists(SERVICE_ACCOUNT_NAMESPACE):
        with open(SERVICE_ACCOUNT_NAMESPACE) as f:
            return f.read().strip()
    from kubernetes import config

    _, active = config.list_kube_config_contexts()
    return active.get("context", {}).get("namespace") or "default"


def kubernetes_apis():
    """The custom-objects and core APIs, configured as kubectl's users have them."""
    from kubernetes import client, config

    config.load_config()
    return client.CustomObjectsApi(), client.CoreV1Api()


def _finished(status: dict) -> str | None:
    """ "Succeeded" or "Failed" once the job has ended (its last true condition), else None."""
    for condition in reversed(status.get("conditions") or []):
        if condition.get("status") == "True" and condition.get("type") in ("Succeeded", "Failed"):
            return condition["type"]
    return None


def failure(core, namespace: str, name: str, reason: str) -> str:
    """What failed: each failed replica's pod, exit code and last log lines."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={name}").items
    lines = [f"TFJob {namespace}/{name} failed: {reason}"]
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        if pod.status.phase != "Failed":
            continue
        codes = [
            s.state.terminated.exit_code for s in pod.status.container_statuses or [] if s.state and s.state.terminated
        ]
        tail = core.read_namespaced_pod_log(pod.metadata.name, namespace, container=CONTAINER, tail_lines=LOG_LINES)
        lines.append(f"replica {pod.metadata.name} exited with code {codes[0] if codes else '?'}; its last lines:")
        lines += [f"  {line}" for line in str(tail).rstrip().splitlines()]
    return "\n".join(lines)


def run_tfjob(body: dict, apis=None, poll_seconds: float = POLL_SECONDS, timeout_seconds: float | None = None) -> None:
    """Creates the TFJob, waits for it to end, and deletes it; raises ``TfJobFailed`` naming
    the failed replica (or the timeout)."""
    custom, core = apis or kubernetes_apis()
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    logging.info("Created TFJob %s/%s: %s", namespace, name, replica_counts_text(body))
    started = time.monotonic()
    try:
        while True:
            job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            ended = _finished(job.get("status") or {})
            if ended == "Succeeded":
                logging.info("TFJob %s/%s succeeded.", namespace, name)
                return
            if ended == "Failed":
                reasons = [c.get("message", "") for c in job["status"]["conditions"] if c.get("type") == "Failed"]
                raise TfJobFailed(failure(core, namespace, name, reasons[-1] or "a replica failed"))
            if timeout_seconds is not None and time.monotonic() - started > timeout_seconds:
                raise TfJobFailed(f"TFJob {namespace}/{name} did not end within {timeout_seconds:.0f} s")
            time.sleep(poll_seconds)
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        logging.info("Deleted TFJob %s/%s.", namespace, name)


def replica_counts_text(body: dict) -> str:
    specs = body["spec"]["tfReplicaSpecs"]
    return ", ".join(f"{spec['replicas']} {kind}" for kind, spec in specs.items())


class Executor(tfx_trainer.GenericExecutor):
    """TFX's Trainer, training in a TFJob's replicas (see the module docstring)."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
        settings = custom_config[TFJOB_KEY]
        namespace = settings.get("namespace") or current_namespace()
        body = tfjob_body(
            job_name(settings.get("name_prefix", "trainer")),
            namespace,
            replica_command(input_dict, output_dict, exec_properties),
            settings,
        )
        run_tfjob(body, poll_seconds=float(settings.get("poll_seconds", POLL_SECONDS)))


class TfJobTrainer(Trainer):
    """TFX's Trainer whose executor trains in a TFJob (custom_config[TFJOB_KEY] says how)."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
