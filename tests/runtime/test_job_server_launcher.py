"""runtime.job_server_launcher: Beam's Flink job server, started by Beam's own code through the
launcher, ends when the process that started it is killed (SIGKILL: no clean-up of its own
runs); a launcher whose run has already gone starts no JVM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.job_server_launcher import LAUNCHER

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


def _children(pid: int) -> list[tuple[int, str]]:
    """The processes whose parent is ``pid``: their pids and program names."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if int(rest[1]) == pid:
            found.append((int(entry.name), name))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


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
        jvms = [pid for pid, name in _children(run.pid) if name == "java"]
        (jvm,) = jvms
        assert _running(jvm)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
        deadline = time.monotonic() + ENDED_WITHIN_SECONDS
        while _running(jvm) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(jvm), f"the job server's JVM (pid {jvm}) outlived the run that started it"
    finally:
        run.kill()
        for pid in filter(_running, jvms):
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
