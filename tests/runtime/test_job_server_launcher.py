"""runtime.job_server_launcher: Beam's Flink job server, started by Beam's own code through the
launcher, ends when the process that started it is killed (SIGKILL: no clean-up of its own
runs); a launcher whose run has already gone starts no JVM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from runtime.job_server_launcher import LAUNCHER
from runtime.processes import alive, ended_within

# A run's process, reduced to what starts the job server: Beam's FlinkJarJobServer, which
# returns once the JVM's gRPC port answers.
RUN = """
import sys, time
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.flink_runner import FlinkJarJobServer

jar, launcher, artifacts = sys.argv[1:]
options = [f"--flink_job_server_jar={jar}", f"--job_server_java_launcher={launcher}", f"--artifacts_dir={artifacts}"]
FlinkJarJobServer(PipelineOptions(options)).start()
print("started", flush=True)
time.sleep(600)
"""
ENDED_WITHIN_SECONDS = 60


@pytest.mark.slow  # a JVM, and Flink's and Beam's parts (fetched by `make test`)
def test_the_job_server_ends_when_the_run_that_started_it_is_killed(job_server_jar, tmp_path):
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, str(job_server_jar), LAUNCHER, str(tmp_path / "artifacts")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    jvms = []
    try:
        assert run.stdout.readline().strip() == "started"
        jvms = [child.pid for child in psutil.Process(run.pid).children() if child.name() == "java"]
        (jvm,) = jvms
        assert alive(jvm)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
        outlived = f"the job server's JVM (pid {jvm}) outlived the run that started it"
        assert ended_within([jvm], ENDED_WITHIN_SECONDS), outlived
    finally:
        run.kill()
        for pid in filter(alive, jvms):
            os.kill(pid, signal.SIGKILL)


def test_a_launcher_whose_run_has_gone_starts_no_jvm():
    """Nobody reads the pipe Beam would read the JVM's output from: its run has ended."""
    read, write = os.pipe()
    os.close(read)
    try:
        launched = subprocess.run([LAUNCHER, "-version"], stdout=write, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write)
    assert launched.returncode == 1 and b"version" not in launched.stderr
