"""The Kubernetes API stand-in for TFJobs, driven by the Trainer's own TFJob launcher
(components/tfjob.py) through the real ``kubernetes`` client: the operator's TF_CONFIG and
the strategy it makes ``run_fn`` pick, success, a failed replica named with its last lines,
the job deleted either way, and what the API refuses."""

from __future__ import annotations

import json
import os
import sys

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from components import tfjob
from models.strategy import MIRRORED, MULTI_WORKER, PARAMETER_SERVER, choose_strategy
from rehearsal.cloud import jobs
from rehearsal.cloud.kubernetes import NAMESPACE, KubernetesApi

IMAGE = "registry.example.com/pipeline:1"
# Writes TF_CONFIG (or "none") to the log, then by replica type: the chief exits 0 once every
# other replica has logged, a PS serves until stopped, a worker exits with $WORKER_EXIT.
REPLICA = r"""
import os, sys, time
print("TF_CONFIG=" + os.environ.get("TF_CONFIG", "none"), flush=True)
kind = os.environ["REPLICA_KIND"]
if kind == "ps":
    time.sleep(600)
if kind == "worker":
    print("worker line 1\nworker line 2", flush=True)
    sys.exit(int(os.environ.get("WORKER_EXIT", "0")))
time.sleep(float(os.environ.get("CHIEF_WAIT", "1")))
"""


class LocalProcesses:
    """Replicas as local processes of this Python, each told its replica type."""

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.extra, self.hosts, self.removed = extra or {}, [], []

    def environment(self, replica: jobs.Replica) -> dict[str, str]:
        return dict(os.environ)

    def launch(self, replica, image, command, env, hosts=()):
        self.hosts.append(dict(hosts))
        kind = replica.name.rsplit("-", 2)[1]
        return jobs.Launch(command, {**os.environ, **env, **self.extra, "REPLICA_KIND": kind})

    def remove(self, replica) -> None:
        self.removed.append(replica.name)


@pytest.fixture
def api(tmp_path):
    def start(extra=None) -> tuple[KubernetesApi, tuple]:
        standin = KubernetesApi(str(tmp_path / "kubernetes"), LocalProcesses(extra))
        standin.start()
        started.append(standin)
        configuration = client.Configuration()
        config.load_kube_config(config_file=standin.kubeconfig(), client_configuration=configuration)
        api_client = client.ApiClient(configuration)
        return standin, (client.CustomObjectsApi(api_client), client.CoreV1Api(api_client))

    started: list[KubernetesApi] = []
    yield start
    for standin in started:
        standin.stop()


def _body(workers: int, parameter_servers: int) -> dict:
    settings = {"image": IMAGE, "workers": workers, "parameter_servers": parameter_servers}
    return tfjob.tfjob_body(tfjob.job_name("taxi"), NAMESPACE, [sys.executable, "-c", REPLICA], settings)


def _tf_configs(standin: KubernetesApi) -> dict[str, str]:
    (record,) = standin.records()
    found = {}
    for replica in record["replicas"]:
        with open(replica["log"]) as f:
            found[replica["pod"]] = f.readline().strip().removeprefix("TF_CONFIG=")
    return found


@pytest.mark.parametrize(
    ("workers", "parameter_servers", "strategy"),
    [(0, 0, MIRRORED), (1, 0, MULTI_WORKER), (2, 0, MULTI_WORKER), (1, 1, PARAMETER_SERVER)],
)
def test_each_replica_gets_the_operators_tf_config_and_the_strategy_follows(api, workers, parameter_servers, strategy):
    standin, apis = api()
    body = _body(workers, parameter_servers)
    tfjob.run_tfjob(body, apis, poll_seconds=0.1, timeout_seconds=120)
    configs = _tf_configs(standin)
    name = body["metadata"]["name"]
    expected_pods = {f"{name}-chief-0"} | {f"{name}-worker-{i}" for i in range(workers)}
    expected_pods |= {f"{name}-ps-{i}" for i in range(parameter_servers)}
    assert set(configs) == expected_pods
    for pod, text in configs.items():
        if workers + parameter_servers == 0:
            assert text == "none"  # a single replica gets no TF_CONFIG from the operator
            env = {}
        else:
            parsed = json.loads(text)
            kind, index = pod.removeprefix(f"{name}-").split("-")
            assert parsed["task"] == {"type": kind, "index": int(index)} and parsed["environment"] == "cloud"
            assert sorted(parsed["cluster"]) == sorted(
                {"chief", *(["worker"] if workers else []), *(["ps"] if parameter_servers else [])}
            )
            assert all(
                address.startswith(f"{name}-{kind}-{i}.{NAMESPACE}.svc:")
                for kind, addresses in parsed["cluster"].items()
                for i, address in enumerate(addresses)
            )
            env = {"TF_CONFIG": text}
        if pod.endswith("chief-0"):
            assert choose_strategy(env).kind == strategy
    # The job is gone once it ended: the launcher deletes it.
    with pytest.raises(ApiException) as gone:
        apis[0].get_namespaced_custom_object(tfjob.GROUP, tfjob.VERSION, NAMESPACE, tfjob.PLURAL, name)
    assert gone.value.status == 404


def test_a_parameter_server_is_stopped_when_the_chief_succeeds(api):
    standin, apis = api()
    tfjob.run_tfjob(_body(1, 1), apis, poll_seconds=0.1, timeout_seconds=120)
    (record,) = standin.records()
    by_type = {r["type"]: r for r in record["replicas"]}
    assert record["state"] == "Succeeded"
    assert by_type["Chief"]["exit_code"] == 0 and by_type["PS"]["stopped"]


def test_a_failed_replica_is_named_with_its_exit_code_and_last_lines_and_the_job_is_deleted(api):
    standin, apis = api({"WORKER_EXIT": "3", "CHIEF_WAIT": "30"})
    body = _body(1, 0)
    with pytest.raises(tfjob.TfJobFailed) as failed:
        tfjob.run_tfjob(body, apis, poll_seconds=0.1, timeout_seconds=120)
    name = body["metadata"]["name"]
    message = str(failed.value)
    assert f"TFJob {NAMESPACE}/{name} failed: TFJob {name} has failed because 1 Worker replica(s) failed." in message
    assert f"replica {name}-worker-0 exited with code 3; its last lines:" in message
    assert (
        "worker line 2" in message and f"{name}-chief-0" not in message.split("its last lines")[0].rsplit("\n", 1)[-1]
    )
    (record,) = standin.records()
    assert record["state"] == "Failed"
    assert {r["type"]: r["stopped"] for r in record["replicas"]}["Chief"]  # stopped when the job failed


def test_the_api_refuses_a_wrong_token_and_a_tfjob_without_a_tensorflow_container(api, tmp_path):
    standin, (custom, _) = api()
    body = _body(1, 0)
    body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(tfjob.GROUP, tfjob.VERSION, NAMESPACE, tfjob.PLURAL, body)
    assert refused.value.status == 422 and "no container named 'tensorflow'" in refused.value.body
    kubeconfig = json.loads(open(standin.kubeconfig()).read())
    kubeconfig["users"][0]["user"]["token"] = "not-the-token"
    (tmp_path / "wrong.json").write_text(json.dumps(kubeconfig))
    wrong = client.Configuration()
    config.load_kube_config(config_file=str(tmp_path / "wrong.json"), client_configuration=wrong)
    with pytest.raises(ApiException) as unauthorized:
        client.CustomObjectsApi(client.ApiClient(wrong)).create_namespaced_custom_object(
            tfjob.GROUP, tfjob.VERSION, NAMESPACE, tfjob.PLURAL, _body(0, 0)
        )
    assert unauthorized.value.status == 401


def test_replicas_resolve_each_others_service_names(api):
    standin, apis = api()
    body = _body(1, 1)
    tfjob.run_tfjob(body, apis, poll_seconds=0.1, timeout_seconds=120)
    (hosts, *_) = standin._launcher.hosts
    name = body["metadata"]["name"]
    assert hosts == {f"{name}-{kind}-0.{NAMESPACE}.svc": "127.0.0.1" for kind in ("chief", "worker", "ps")}
