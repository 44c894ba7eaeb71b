"""The serving side of parameter-server training (with a stand-in server) and the chief's
validation steps; the real four-process training is in test_trainer.py."""

from __future__ import annotations

import json
import math
import threading

import pytest
import tensorflow as tf

from models import data, parameter_server
from models.strategy import worker_info
from tests.support.fn_args import fn_args_for

GZIP = tf.io.TFRecordOptions(compression_type="GZIP")

CLUSTER = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]}


@pytest.fixture
def as_ps_task(monkeypatch):
    tf_config = json.dumps({"cluster": CLUSTER, "task": {"type": "ps", "index": 0}})
    monkeypatch.setenv("TF_CONFIG", tf_config)
    return worker_info(tf_config)


def test_a_serving_task_starts_its_server_and_returns_once_the_chief_is_done(as_ps_task, tmp_path):
    started = []

    class Server:
        target = "grpc://127.0.0.1:3"

        def __init__(self, cluster_spec, job_name, task_index, protocol, start):
            started.append((cluster_spec.as_dict(), job_name, task_index, protocol, start))

    marker = tmp_path / "training.json"
    served = threading.Thread(
        target=parameter_server.serve, args=(as_ps_task, str(marker), Server), kwargs={"poll_seconds": 0.01}
    )
    served.start()
    served.join(timeout=0.3)
    assert served.is_alive(), "stopped serving before the chief was done"
    marker.write_text("{}")
    served.join(timeout=5)
    assert not served.is_alive()
    assert started == [(CLUSTER, "ps", 0, "grpc", True)]


def test_validation_steps_cover_the_eval_split_unless_capped(trainer_inputs, tmp_path):
    eval_files = fn_args_for(trainer_inputs, tmp_path, {}).eval_files
    rows = data.count_records(eval_files)
    # Counted independently: one record per row of the split's gzipped TFRecord files.
    files = [f for pattern in eval_files for f in tf.io.gfile.glob(pattern)]
    assert rows == sum(1 for f in files for _ in tf.compat.v1.io.tf_record_iterator(f, GZIP))
    assert rows > 64
    assert parameter_server.validation_steps(eval_files, 64, None) == math.ceil(rows / 64)
    assert parameter_server.validation_steps(eval_files, 64, 3) == 3
