"""The local JobService, driven through the real Vertex AI client over loopback gRPC: replicas as
processes with Vertex's environment, the job's states, failures, cancellation, and TFX's own
Vertex Trainer client end to end."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from google.api_core import exceptions
from google.cloud.aiplatform_v1 import JobServiceClient
from google.cloud.aiplatform_v1.services.job_service.transports.grpc import JobServiceGrpcTransport
from google.cloud.aiplatform_v1.types import JobState

from pipeline.vertex_training import VertexTraining
from rehearsal.cloud import jobs
from rehearsal.cloud.jobs import JobService, Replica

PARENT = "projects/p/locations/us-central1"
IMAGE = "gcr.io/p/pipeline:1"
# A replica that writes its environment (and working directory) to $DUMP_DIR/<task type>-<index>.json.
DUMP = (
    "import json, os; t = json.loads(os.environ['CLUSTER_SPEC'])['task']; "
    "path = os.path.join(os.environ['DUMP_DIR'], f\"{t['type']}-{t['index']}.json\"); "
    "json.dump({**os.environ, 'CWD': os.getcwd()}, open(path + '.tmp', 'w')); os.rename(path + '.tmp', path)"
)
WAIT_FOR_GO = "import os, time\nwhile not os.path.exists(os.environ['GO']): time.sleep(0.02)"
SLEEP = "import time; time.sleep(600)"


class Setup:
    """A ReplicaLauncher of local processes: a fresh home (also the working directory) per
    replica, proxy variables as a caller's environment has them, and whatever a test adds in
    ``extra``. (The rehearsal's launcher runs each replica in a container of the pool's image:
    tests/rehearsal/test_rehearsal_end_to_end.py.)"""

    def __init__(self, root) -> None:
        self.root, self.extra, self.replicas, self.images, self.removed = root, {}, [], [], []

    def environment(self, replica: Replica) -> dict[str, str]:
        self.replicas.append(replica)
        env = {**os.environ, "https_proxy": "http://proxy.invalid:3128", "no_proxy": "example.com"}
        env.pop("NO_PROXY", None)
        return {**env, **self.extra}

    def launch(self, replica: Replica, image: str, command: list[str], env: dict[str, str]) -> jobs.Launch:
        self.images.append(image)
        home = self.root / "replicas" / replica.job_id / replica.name
        home.mkdir(parents=True)
        return jobs.Launch(command, {**env, "HOME": str(home)}, str(home))

    def remove(self, replica: Replica) -> None:
        self.removed.append(replica.name)


@pytest.fixture
def setup(tmp_path) -> Setup:
    (tmp_path / "dumps").mkdir()
    return Setup(tmp_path)


@pytest.fixture
def service(tmp_path, setup):
    service = JobService(str(tmp_path / "jobs"), setup)
    yield service
    service.stop()


@pytest.fixture
def address(service) -> str:
    server = grpc.server(ThreadPoolExecutor(4))
    port = server.add_insecure_port("127.0.0.1:0")
    service.add_to_server(server)
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


@pytest.fixture
def client(address) -> JobServiceClient:
    return JobServiceClient(transport=JobServiceGrpcTransport(channel=grpc.insecure_channel(address)))


def _pool(script: str, replicas: int = 1, env: dict[str, str] | None = None, **machine) -> dict:
    return {
        "machine_spec": {"machine_type": "n1-standard-4", **machine},
        "replica_count": replicas,
        "container_spec": {
            "image_uri": IMAGE,
            "command": [sys.executable, "-c"],
            "args": [script],
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        },
    }


def _submit(client: JobServiceClient, pools: list[dict], output: str = "", **job):
    spec = {"worker_pool_specs": pools, "base_output_directory": {"output_uri_prefix": output}}
    return client.create_custom_job(parent=PARENT, custom_job={"display_name": "rehearsed", "job_spec": spec, **job})


# A deadline for the GetCustomJobs that want the job as it is now (without one, the long poll
# answers when the job ends).
ASK_SECONDS = 1.0


def _wait(client: JobServiceClient, name: str, *states: JobState, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while (job := client.get_custom_job(name=name, timeout=ASK_SECONDS)).state not in states:
        assert time.monotonic() < deadline, f"{name} still {job.state.name}, expected {states}: {job.error.message}"
        time.sleep(0.05)
    return job


def _dumps(tmp_path, *names: str, timeout: float = 30.0) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while not all((tmp_path / "dumps" / f"{n}.json").exists() for n in names):
        assert time.monotonic() < deadline, f"no environment dumped by {names}"
        time.sleep(0.05)
    return {n: json.loads((tmp_path / "dumps" / f"{n}.json").read_text()) for n in names}


def _record(service: JobService, name: str) -> jobs.JobRecord:
    (record,) = [r for r in service.jobs() if r.name == name]
    return record


def test_a_chief_and_workers_run_with_vertex_environment_until_the_chief_succeeds(client, service, setup, tmp_path):
    setup.extra = {"DUMP_DIR": str(tmp_path / "dumps"), "GO": str(tmp_path / "go")}
    created = _submit(
        client,
        [_pool(f"{DUMP}\n{WAIT_FOR_GO}", env={"FOO": "bar"}), _pool(DUMP, replicas=2, env={"FOO": "baz"})],
        output="gs://bucket/out/",
        labels={"team": "taxi"},
    )
    assert created.state == JobState.JOB_STATE_PENDING
    job_id = re.fullmatch(rf"{PARENT}/customJobs/(\d+)", created.name).group(1)
    assert (created.display_name, dict(created.labels), created.create_time is not None) == (
        "rehearsed",
        {"team": "taxi"},
        True,
    )
    running = _wait(client, created.name, JobState.JOB_STATE_RUNNING)
    assert running.start_time >= running.create_time

    envs = _dumps(tmp_path, "workerpool0-0", "workerpool1-0", "workerpool1-1")
    chief, worker1 = envs["workerpool0-0"], envs["workerpool1-1"]
    cluster_spec = json.loads(chief["CLUSTER_SPEC"])
    hosts = cluster_spec["cluster"]
    assert [len(hosts["workerpool0"]), len(hosts["workerpool1"])] == [1, 2]
    addresses = hosts["workerpool0"] + hosts["workerpool1"]
    assert all(a.startswith("127.0.0.1:") for a in addresses) and len(set(addresses)) == 3
    assert cluster_spec["task"] == {"type": "workerpool0", "index": 0}
    assert cluster_spec["environment"] == "cloud"
    assert cluster_spec["job"]["worker_pool_specs"][1]["container_spec"]["env"] == [{"name": "FOO", "value": "baz"}]
    assert json.loads(worker1["CLUSTER_SPEC"])["task"] == {"type": "workerpool1", "index": 1}
    for env, task in ((chief, {"type": "chief", "index": 0}), (worker1, {"type": "worker", "index": 1})):
        tf_config = json.loads(env["TF_CONFIG"])
        assert tf_config["cluster"] == {"chief": hosts["workerpool0"], "worker": hosts["workerpool1"]}
        assert tf_config["task"] == {**task, "trial": ""}
        assert (tf_config["environment"], tf_config["job"]) == ("cloud", cluster_spec["job"])
    for name, env in envs.items():
        assert env["FOO"] == ("bar" if name == "workerpool0-0" else "baz")
        assert env["AIP_MODEL_DIR"] == "gs://bucket/out/model/"
        assert env["AIP_CHECKPOINT_DIR"] == "gs://bucket/out/checkpoints/"
        assert env["AIP_TENSORBOARD_LOG_DIR"] == "gs://bucket/out/logs/"
        assert env["CLOUD_ML_JOB_ID"] == job_id
        assert (env["no_proxy"], env["NO_PROXY"]) == ("example.com,127.0.0.1,localhost", "127.0.0.1,localhost")
        assert env["https_proxy"] == "http://proxy.invalid:3128"
        assert env["HOME"] == env["CWD"] == str(tmp_path / "replicas" / job_id / name.replace("-", "-replica-"))
    assert setup.replicas == [
        Replica(0, 0, "workerpool0-replica-0", job_id),
        Replica(1, 0, "workerpool1-replica-0", job_id),
        Replica(1, 1, "workerpool1-replica-1", job_id),
    ]
    assert setup.images == [IMAGE] * 3  # each replica in its pool's container_spec.image_uri
    assert client.get_custom_job(name=created.name, timeout=ASK_SECONDS).state == JobState.JOB_STATE_RUNNING

    (tmp_path / "go").touch()
    done = _wait(client, created.name, JobState.JOB_STATE_SUCCEEDED)
    assert done.end_time >= done.start_time and not done.error.message
    record = _record(service, created.name)
    assert (record.state, record.display_name, record.not_rehearsed) == ("JOB_STATE_SUCCEEDED", "rehearsed", ())
    assert [(r.name, r.exit_code, r.stopped) for r in record.replicas] == [
        ("workerpool0-replica-0", 0, False),
        ("workerpool1-replica-0", 0, False),
        ("workerpool1-replica-1", 0, False),
    ]
    assert record.replicas[2].log_path == str(tmp_path / "jobs" / job_id / "workerpool1-replica-1.log")
    assert sorted(setup.removed) == [r.name for r in setup.replicas]  # each cleaned up once it ended
    assert [j.name for j in client.list_custom_jobs(parent=PARENT)] == [created.name]
    assert list(client.list_custom_jobs(parent="projects/other/locations/us-central1")) == []


def test_a_failing_worker_fails_the_job_with_its_last_log_lines(client, service):
    failing = "import sys\nfor i in range(30): print('line', i)\nsys.exit(3)"
    created = _submit(client, [_pool(SLEEP), _pool(failing)])
    failed = _wait(client, created.name, JobState.JOB_STATE_FAILED)
    message = failed.error.message
    assert "workerpool1-replica-0 exited with a non-zero status of 3" in message
    assert "line 10\n" in message and "line 29\n" in message and "line 9\n" not in message
    record = _record(service, created.name)
    assert [(r.name, r.exit_code, r.stopped) for r in record.replicas] == [
        ("workerpool0-replica-0", -15, True),  # the chief, stopped with the job
        ("workerpool1-replica-0", 3, False),
    ]
    assert record.error == message


def test_the_chief_finishing_stops_parameter_servers_that_never_exit(client, service):
    training = VertexTraining.parameter_server("p", "us-central1", IMAGE, replicas=3, parameter_servers=2)
    pools = training.worker_pool_specs()
    for pool, script in zip(pools, ("import time; time.sleep(0.2)", SLEEP, SLEEP), strict=True):
        pool["container_spec"].update(command=[sys.executable, "-c"], args=[script])
    created = _submit(client, pools)
    _wait(client, created.name, JobState.JOB_STATE_SUCCEEDED)
    record = _record(service, created.name)
    # -15: stopped by SIGTERM while still running, not waited for nor killed (-9) after the grace.
    assert [(r.name, r.exit_code, r.stopped) for r in record.replicas] == [
        ("workerpool0-replica-0", 0, False),
        ("workerpool1-replica-0", -15, True),
        ("workerpool1-replica-1", -15, True),
        ("workerpool2-replica-0", -15, True),
        ("workerpool2-replica-1", -15, True),
    ]


def test_tpu_and_gpu_pools_run_on_the_cpu_and_say_so(client, service, setup, tmp_path):
    setup.extra = {"DUMP_DIR": str(tmp_path / "dumps"), "TPU_NAME": "from-the-caller"}
    tpu = VertexTraining.tpu("p", "us-central1", IMAGE).worker_pool_specs()
    tpu[0]["container_spec"].update(command=[sys.executable, "-c"], args=[DUMP])
    tpu_job = _submit(client, tpu)
    _wait(client, tpu_job.name, JobState.JOB_STATE_SUCCEEDED)
    env = _dumps(tmp_path, "workerpool0-0")["workerpool0-0"]
    assert "TPU_NAME" not in env
    hosts = json.loads(env["CLUSTER_SPEC"])["cluster"]["workerpool0"]
    assert json.loads(env["TF_CONFIG"])["cluster"] == {"chief": hosts}  # a single replica: just the chief
    assert _record(service, tpu_job.name).not_rehearsed == (
        "workerpool0: 8 x TPU_V3 on cloud-tpu ran on the CPU; TPU_NAME removed from its environment "
        "(no TPU to resolve), so it chose a non-TPU strategy",
    )

    gpu = VertexTraining.parameter_server(
        "p",
        "us-central1",
        IMAGE,
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=4,
        machine_type="n1-standard-16",
    ).worker_pool_specs()
    for pool in gpu:
        pool["container_spec"].update(command=[sys.executable, "-c"], args=["pass"])
    gpu_job = _submit(client, gpu)
    _wait(client, gpu_job.name, JobState.JOB_STATE_SUCCEEDED)
    assert _record(service, gpu_job.name).not_rehearsed == (
        "workerpool1: 4 x NVIDIA_TESLA_T4 on n1-standard-16 (each of 2 replicas) ran on the CPU",
    )


def test_cancelling_terminates_the_replicas(client, service):
    created = _submit(client, [_pool(SLEEP), _pool(SLEEP, replicas=2)])
    _wait(client, created.name, JobState.JOB_STATE_RUNNING)
    client.cancel_custom_job(name=created.name)
    assert client.get_custom_job(name=created.name, timeout=ASK_SECONDS).state in (
        JobState.JOB_STATE_CANCELLING,
        JobState.JOB_STATE_CANCELLED,
    )
    cancelled = _wait(client, created.name, JobState.JOB_STATE_CANCELLED)
    assert cancelled.error.code == 1  # google.rpc.Code.CANCELLED, as Vertex documents
    record = _record(service, created.name)
    assert [(r.exit_code, r.stopped) for r in record.replicas] == [(-15, True)] * 3
    with pytest.raises(exceptions.FailedPrecondition):
        client.cancel_custom_job(name=created.name)


def test_stopping_the_service_cancels_what_still_runs(client, service):
    created = _submit(client, [_pool(SLEEP)])
    _wait(client, created.name, JobState.JOB_STATE_RUNNING)
    service.stop()
    record = _record(service, created.name)
    assert (record.state, record.error) == ("JOB_STATE_CANCELLED", "Stopped with the rehearsal's JobService")
    assert [(r.exit_code, r.stopped) for r in record.replicas] == [(-15, True)]


def test_getting_a_job_is_a_long_poll_answered_when_it_ends_or_before_the_deadline(client):
    """One GetCustomJob without a deadline, right after the job is created, answers with its
    end; with a deadline, it answers before it with the job as it is."""
    short = _submit(client, [_pool("import time; time.sleep(0.5)")])
    assert client.get_custom_job(name=short.name).state == JobState.JOB_STATE_SUCCEEDED
    going = _submit(client, [_pool(SLEEP)])
    assert client.get_custom_job(name=going.name, timeout=ASK_SECONDS).state in (
        JobState.JOB_STATE_PENDING,
        JobState.JOB_STATE_RUNNING,
    )


def test_unknown_jobs_and_malformed_requests_are_refused(client):
    with pytest.raises(exceptions.NotFound):
        client.get_custom_job(name=f"{PARENT}/customJobs/123")
    with pytest.raises(exceptions.NotFound):
        client.cancel_custom_job(name=f"{PARENT}/customJobs/123")
    with pytest.raises(exceptions.InvalidArgument, match="replica_count 1"):
        _submit(client, [_pool("pass", replicas=2)])


def test_a_replica_that_cannot_start_fails_the_job(client):
    pool = _pool("pass")
    pool["container_spec"]["command"] = ["/nonexistent/python"]
    failed = _wait(client, _submit(client, [pool]).name, JobState.JOB_STATE_FAILED)
    assert "workerpool0-replica-0 could not start '/nonexistent/python'" in failed.error.message


@pytest.fixture
def fake_python(tmp_path, setup) -> str:
    """A ``python`` first on the replicas' PATH: it records its arguments to $DUMP_DIR and exits 1
    in the pool $FAIL_POOL names, 0 elsewhere; TFX's container command runs verbatim."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "python"
    script.write_text(
        f"#!{sys.executable}\n"
        "import glob, json, os, sys, time\n"
        "task = json.loads(os.environ['CLUSTER_SPEC'])['task']\n"
        "name = f\"{task['type']}-{task['index']}\"\n"
        "dump = os.path.join(os.environ['DUMP_DIR'], name)\n"
        "json.dump(sys.argv[1:], open(dump + '.tmp', 'w'))\n"
        "os.rename(dump + '.tmp', dump + '.json')\n"
        "# The primary waits for every replica's record: its end ends the job, and the others with it.\n"
        "replicas = sum(len(h) for h in json.loads(os.environ['CLUSTER_SPEC'])['cluster'].values())\n"
        "dumped = lambda: len(glob.glob(os.path.join(os.environ['DUMP_DIR'], '*.json')))\n"
        "while task['type'] == 'workerpool0' and dumped() < replicas:\n"
        "    time.sleep(0.02)\n"
        "if task['type'] == os.environ.get('FAIL_POOL'):\n"
        "    print('run_executor failed here')\n"
        "    sys.exit(1)\n"
    )
    script.chmod(0o755)
    setup.extra = {"DUMP_DIR": str(tmp_path / "dumps"), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return str(script)


def _start_tfx_training(monkeypatch, address: str, asked: list[str] | None = None) -> None:
    """TFX's Vertex Trainer path (runner.start_cloud_training, VertexJobClient) as its executor
    calls it, with the gapic client pointed at the service and, should it poll again, polling
    every 50 ms, not 30 s; each state its GetCustomJobs answered is added to ``asked``."""
    from tfx.extensions.google_cloud_ai_platform import runner, training_clients
    from tfx.types import standard_artifacts

    def create_client(self) -> None:
        self._client = JobServiceClient(transport=JobServiceGrpcTransport(channel=grpc.insecure_channel(address)))

    get_job = training_clients.VertexJobClient.get_job

    def counted_get_job(self):
        job = get_job(self)
        (asked if asked is not None else []).append(job.state.name)
        return job

    monkeypatch.setattr(training_clients.VertexJobClient, "create_client", create_client)
    monkeypatch.setattr(training_clients.VertexJobClient, "get_job", counted_get_job)
    monkeypatch.setattr(runner, "_POLLING_INTERVAL_IN_SECONDS", 0.05)
    examples = standard_artifacts.Examples()
    examples.uri = "gs://bucket/examples"
    model = standard_artifacts.Model()
    model.uri = "gs://bucket/model"
    custom_config = VertexTraining.parameter_server("p", "us-central1", IMAGE).custom_config()
    job_args = json.loads(json.dumps(custom_config["ai_platform_training_args"]))
    runner.start_cloud_training(
        {"examples": [examples]},
        {"model": [model]},
        {"custom_config": json.dumps(custom_config)},
        "tfx.components.trainer.executor.GenericExecutor",
        job_args,
        None,
        enable_vertex=True,
        vertex_region="us-central1",
    )


def test_tfx_vertex_trainer_job_runs_through_the_service(monkeypatch, address, service, fake_python, tmp_path):
    asked = []
    _start_tfx_training(monkeypatch, address, asked)  # returns once the job SUCCEEDED
    # TFX asked once, right after submitting: the long poll answered with the job's end, so
    # its loop never slept (30 s a poll).
    assert asked == ["JOB_STATE_SUCCEEDED"]
    (record,) = service.jobs()
    assert record.state == "JOB_STATE_SUCCEEDED" and record.name.startswith(f"{PARENT}/customJobs/")
    assert record.display_name.startswith("tfx_")
    argvs = _dumps(tmp_path, "workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0")
    argv = argvs["workerpool0-0"]
    assert argv[:4] == [
        "-m",
        "tfx.scripts.run_executor",
        "--executor_class_path",
        "tfx.components.trainer.executor.GenericExecutor",
    ]
    assert "gs://bucket/examples" in argv[argv.index("--inputs") + 1]
    assert all(a == argv for a in argvs.values())


def test_tfx_vertex_trainer_raises_with_the_failing_replica(monkeypatch, address, fake_python, setup):
    setup.extra["FAIL_POOL"] = "workerpool1"
    with pytest.raises(RuntimeError, match="did not succeed") as failure:
        _start_tfx_training(monkeypatch, address)
    # Either replica of pool 1 may be the first seen to fail.
    assert re.search(r"workerpool1-replica-[01] exited with a non-zero status of 1", str(failure.value))
    assert "run_executor failed here" in str(failure.value)
