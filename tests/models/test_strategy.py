"""Strategy choice (pure) and construction, with the TPU system calls substituted."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from models import strategy as S

TWO_WORKERS = json.dumps(
    {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}
)
ONE_WORKER = json.dumps({"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}})
# What Vertex AI sets for a job with chief, worker and parameter-server pools.
PS_CLUSTER = {"chief": ["h:0"], "worker": ["h:1", "h:2"], "ps": ["h:3"]}
WITH_PS = json.dumps({"cluster": PS_CLUSTER, "task": {"type": "worker", "index": 1}})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, S.MIRRORED),
        ({"TF_CONFIG": ONE_WORKER}, S.MIRRORED),
        ({"TF_CONFIG": TWO_WORKERS}, S.MULTI_WORKER),
        ({"TPU_NAME": "my-tpu"}, S.TPU),
        ({"TPU_NAME": "my-tpu", "TF_CONFIG": TWO_WORKERS}, S.TPU),
        ({"TPU_NAME": "  "}, S.MIRRORED),
        ({"TF_CONFIG": WITH_PS}, S.PARAMETER_SERVER),
        ({"TPU_NAME": "my-tpu", "TF_CONFIG": WITH_PS}, S.TPU),
    ],
)
def test_automatic_choice(env, expected):
    choice = S.choose_strategy(env)
    assert choice.kind == expected
    assert choice.reason


def test_tpu_choice_carries_the_name():
    assert S.choose_strategy({"TPU_NAME": "grpc://10.0.0.2:8470"}).tpu_name == "grpc://10.0.0.2:8470"


def test_override_from_custom_config_wins_over_environment():
    choice = S.choose_strategy({"TPU_NAME": "t", S.STRATEGY_ENV: "tpu"}, override="mirrored")
    assert choice.kind == S.MIRRORED and "custom_config" in choice.reason


def test_override_from_environment():
    assert S.choose_strategy({S.STRATEGY_ENV: "multi_worker"}).kind == S.MULTI_WORKER


@pytest.mark.parametrize(("env", "override"), [({}, "gpu"), ({S.STRATEGY_ENV: "estimator"}, None)])
def test_unknown_override_lists_the_allowed_values(env, override):
    with pytest.raises(ValueError, match="allowed: auto, tpu, parameter_server, multi_worker, mirrored"):
        S.choose_strategy(env, override)


def test_parameter_server_choice_says_what_the_cluster_holds():
    choice = S.choose_strategy({"TF_CONFIG": WITH_PS})
    assert choice.reason == "TF_CONFIG lists 1 ps task(s) and 2 worker(s)"
    forced = S.choose_strategy({"TF_CONFIG": WITH_PS}, "parameter_server")
    assert forced.kind == S.PARAMETER_SERVER and "custom_config" in forced.reason


@pytest.mark.parametrize(
    ("cluster", "override"),
    [
        ({"worker": ["h:1", "h:2"], "ps": ["h:3"]}, None),  # a TFJob without a Chief replica
        ({"chief": ["h:0", "h:9"], "worker": ["h:1"], "ps": ["h:3"]}, None),
        ({"chief": ["h:0"], "ps": ["h:3"]}, None),
        ({"chief": ["h:0"], "worker": ["h:1"]}, "parameter_server"),
        ({}, "parameter_server"),
    ],
)
def test_parameter_server_training_refuses_a_cluster_it_cannot_run_on(cluster, override):
    env = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})} if cluster else {}
    with pytest.raises(ValueError, match="exactly one 'chief' task.*add a Chief replica"):
        S.choose_strategy(env, override)


def test_parameter_server_strategy_is_built_on_the_tf_config_cluster(monkeypatch):
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": PS_CLUSTER | {"ps": ["h:3", "h:4"]}, "task": {"type": "chief", "index": 0}})
    )
    built = {}

    def factory(resolver, variable_partitioner):
        built.update(cluster=resolver.cluster_spec().as_dict(), task=(resolver.task_type, resolver.task_id))
        built["partitioner"] = variable_partitioner
        return "ps-strategy"

    assert S.create_strategy(S.choose_strategy({"TF_CONFIG": WITH_PS}), strategy_factory=factory) == "ps-strategy"
    assert built["cluster"]["ps"] == ["h:3", "h:4"] and built["task"] == ("chief", 0)
    # Large variables are split over both ps tasks; small ones stay whole.
    partitioner = built["partitioner"]
    large = partitioner(tf.TensorShape([S.PARTITION_MIN_BYTES, 1]), tf.float32)
    small = partitioner(tf.TensorShape([16, 4]), tf.float32)
    assert large == [2, 1] and small == [1, 1]


def test_public_name_drops_tf_distributes_version_suffixes():
    assert S.public_name(tf.distribute.MirroredStrategy()) == "MirroredStrategy"
    assert S.public_name(object()) == "object"


def test_forcing_tpu_without_a_tpu_name_says_how_to_fix_it():
    with pytest.raises(ValueError, match="TPU_NAME is not set"):
        S.choose_strategy({}, "tpu")


def test_malformed_tf_config_is_named():
    with pytest.raises(ValueError, match="TF_CONFIG"):
        S.choose_strategy({"TF_CONFIG": "{not json"})


def test_no_tpu_builds_a_real_mirrored_strategy():
    strategy = S.create_strategy(S.choose_strategy({}))
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync >= 1


def test_tpu_path_resolves_connects_initializes_then_builds():
    calls = []
    system = S.TpuSystem(
        resolver=lambda name: calls.append(("resolve", name)) or f"resolver:{name}",
        connect=lambda resolver: calls.append(("connect", resolver)),
        initialize=lambda resolver: calls.append(("initialize", resolver)),
    )

    def factory(resolver):
        calls.append(("strategy", resolver))
        return "tpu-strategy"

    result = S.create_strategy(S.choose_strategy({"TPU_NAME": "my-tpu"}), system, factory)
    assert result == "tpu-strategy"
    assert calls == [
        ("resolve", "my-tpu"),
        ("connect", "resolver:my-tpu"),
        ("initialize", "resolver:my-tpu"),
        ("strategy", "resolver:my-tpu"),
    ]


def test_tpu_refuses_local_paths():
    with pytest.raises(ValueError, match="use gs://|Use gs://"):
        S.require_remote_paths(["gs://bucket/data", "/home/me/outputs"])
    S.require_remote_paths(["gs://bucket/data", "gs://bucket/model"])


def _tf_config(cluster: dict, task_type: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


WORKERS = {"worker": ["h:1", "h:2", "h:3"]}
WITH_CHIEF = {"chief": ["h:0"], "worker": ["h:1", "h:2"]}


@pytest.mark.parametrize(
    ("tf_config", "expected"),
    [
        (None, (None, 0, 1, True)),
        ("", (None, 0, 1, True)),
        (json.dumps({"cluster": {}}), (None, 0, 1, True)),
        (_tf_config(WORKERS, "worker", 0), ("worker", 0, 3, True)),
        (_tf_config(WORKERS, "worker", 2), ("worker", 2, 3, False)),
        (_tf_config(WITH_CHIEF, "chief", 0), ("chief", 0, 3, True)),
        # With a chief in the cluster, worker 0 is an ordinary worker.
        (_tf_config(WITH_CHIEF, "worker", 0), ("worker", 0, 3, False)),
        (_tf_config({"master": ["h:0"], "worker": ["h:1"]}, "master", 0), ("master", 0, 1, True)),
        (_tf_config({**WITH_CHIEF, "evaluator": ["h:9"]}, "evaluator", 0), ("evaluator", 0, 3, False)),
    ],
)
def test_worker_info_finds_the_chief_as_tf_distribute_does(tf_config, expected):
    info = S.worker_info(tf_config)
    assert (info.task_type, info.task_index, info.num_workers, info.is_chief) == expected


def test_worker_info_agrees_with_tf_distribute_on_who_is_chief():
    from tensorflow.python.distribute import multi_worker_util

    for cluster, task_type, index in [
        (WORKERS, "worker", 0),
        (WORKERS, "worker", 1),
        (WITH_CHIEF, "chief", 0),
        (WITH_CHIEF, "worker", 0),
    ]:
        expected = multi_worker_util.is_chief(tf.train.ClusterSpec(cluster), task_type, index)
        assert S.worker_info(_tf_config(cluster, task_type, index)).is_chief == expected, (cluster, task_type, index)


@pytest.mark.parametrize(
    "tf_config",
    [
        json.dumps({"cluster": WORKERS}),
        json.dumps({"cluster": WORKERS, "task": {"type": "worker", "index": -1}}),
        _tf_config(WORKERS, "worker", 3),
        "[1, 2]",
    ],
)
def test_worker_info_rejects_a_tf_config_without_a_valid_task(tf_config):
    with pytest.raises(ValueError, match="TF_CONFIG"):
        S.worker_info(tf_config)
