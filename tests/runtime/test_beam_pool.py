"""The pool of Beam worker processes (runtime/beam_pool.py): real Beam pipelines run on
it give the DirectRunner's results in the pool's processes, every pipeline of a run is
served by the same processes, a failing step fails its pipeline with its own error and
leaves the pool usable, and the processes go when their parent goes. The same processes
take plain calls, each in its own process, a failing one raising its error."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile

import apache_beam as beam
import psutil
import pytest
from apache_beam.internal import dill_pickler
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.config import REPO_ROOT
from runtime import beam_args, beam_pool
from runtime.processes import ended_within
from runtime.speedups import pickle_codec

WORKERS = 2


def _options(tmp_path, *extra: str) -> PipelineOptions:
    return PipelineOptions(
        [*beam_args.pipeline_args(WORKERS), f"--temp_location={tmp_path}", *extra],
    )


def _square_with_pid(x: int) -> str:
    return f"{os.getpid()} {x * x}"


def _fail_on_seven(x: int) -> int:
    if x == 7:
        raise ValueError(f"bad row {x}")
    return x


def _run_on_pool(tmp_path, name: str, fn) -> list[list[str]]:
    """The words of ``fn(x)`` for x in 0..199, run on the pool."""
    output = str(tmp_path / name)
    with beam.Pipeline(options=_options(tmp_path)) as pipeline:
        (
            pipeline
            | beam.Create(range(200))
            | beam.Reshuffle()
            | beam.Map(fn)
            | beam.io.WriteToText(output, shard_name_template="")
        )
    with open(output) as lines:
        return [line.split() for line in lines]


def _run_squares(tmp_path, name: str) -> list[tuple[int, int]]:
    """(pid of the process that squared it, x squared) for x in 0..199, run on the pool."""
    return [(int(pid), int(square)) for pid, square in _run_on_pool(tmp_path, name, _square_with_pid)]


def _pickler_with_pid(_) -> str:
    from apache_beam.internal import pickler

    return f"{os.getpid()} {pickler.desired_pickle_lib.__name__}"


def _pool_pids() -> set[int]:
    return {process.pid for process in beam_pool._pool.processes}


def test_a_pipeline_on_the_pool_gives_the_direct_runners_result_in_the_pools_processes(tmp_path):
    rows = _run_squares(tmp_path, "squares.txt")
    assert sorted(square for _, square in rows) == sorted(x * x for x in range(200))
    assert {pid for pid, _ in rows} <= _pool_pids()
    assert os.getpid() not in _pool_pids()
    assert len(_pool_pids()) == WORKERS


def test_every_pipeline_of_a_run_is_served_by_the_same_processes(tmp_path):
    _run_squares(tmp_path, "first.txt")
    address, pids = beam_pool.pool_address(WORKERS), _pool_pids()
    rows = _run_squares(tmp_path, "second.txt")
    assert beam_pool.pool_address(WORKERS) == address
    assert _pool_pids() == pids
    assert {pid for pid, _ in rows} <= pids


def test_a_failing_step_fails_its_pipeline_with_its_error_and_the_pool_serves_the_next(tmp_path):
    with pytest.raises(Exception, match="bad row 7"):
        with beam.Pipeline(options=_options(tmp_path)) as pipeline:
            _ = pipeline | beam.Create(range(20)) | beam.Reshuffle() | beam.Map(_fail_on_seven)
    rows = _run_squares(tmp_path, "after.txt")
    assert len(rows) == 200


def test_a_new_pools_workers_read_pickles_in_the_local_form_from_the_first(tmp_path, monkeypatch):
    """The runner writes its pickles in the pickle codec's form; a pool started for this
    pipeline reads them from its very first bundle (installed before its server starts)."""
    monkeypatch.setattr(dill_pickler, "bz2", pickle_codec.BEAM_COMPRESSOR)
    pickle_codec.install(pickles_stay_here=True)
    beam_pool.close()
    rows = _run_squares(tmp_path, "local_form.txt")
    assert sorted(square for _, square in rows) == sorted(x * x for x in range(200))
    assert {pid for pid, _ in rows} <= _pool_pids()


def test_the_pools_workers_pickle_with_the_local_runs_pickler(tmp_path):
    """A pool process builds no pipeline, so no pipeline's options set its pickler: it is
    set when the process starts (runtime.start.before_pickles), as the runs' args set theirs."""
    rows = _run_on_pool(tmp_path, "picklers.txt", _pickler_with_pid)
    assert {int(pid) for pid, _ in rows} <= _pool_pids()
    assert {name for _, name in rows} == {f"apache_beam.internal.{beam_args.LOCAL_PICKLE_LIBRARY}_pickler"}


def test_a_pool_with_a_process_gone_is_replaced(tmp_path):
    beam_pool.pool_address(WORKERS)
    gone = beam_pool._pool.processes[0]
    gone.kill()
    gone.wait()
    rows = _run_squares(tmp_path, "replaced.txt")
    assert gone.pid not in _pool_pids()
    assert {pid for pid, _ in rows} <= _pool_pids()


def _kill_own_process(x: int) -> int:
    if x == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    return x


def test_a_pool_process_ending_mid_pipeline_fails_it_naming_the_process_and_the_pool_is_replaced(tmp_path):
    """Beam alone would say only that a channel closed prematurely."""
    beam_pool.pool_address(WORKERS)
    before = _pool_pids()
    with pytest.raises(RuntimeError, match=r"pool ended in the middle of the pipeline \(pid \d+ killed by signal 9\)"):
        _run_on_pool(tmp_path, "killed.txt", _kill_own_process)
    rows = _run_squares(tmp_path, "after.txt")
    assert {pid for pid, _ in rows} <= _pool_pids() and _pool_pids() != before


def test_the_pool_processes_exit_when_their_parent_is_killed(tmp_path):
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from runtime import beam_pool; beam_pool.pool_address(2); "
            "print(*(p.pid for p in beam_pool._pool.processes), flush=True); import time; time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    children = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(children) == 2 and all(psutil.pid_exists(pid) for pid in children)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert ended_within(children, 60)


def _print_and_return(text: str) -> str:
    print(text, flush=True)
    return f"{os.getpid()} {text}"


def test_calls_run_each_in_its_own_process_of_the_pool():
    beam_pool.pool_address(WORKERS)
    pids = beam_pool.call_each("os:getpid", [[]] * WORKERS)
    assert sorted(pids) == sorted(_pool_pids())
    assert beam_pool.call_each("os.path:join", [["a", "b"], ["c", "d"]]) == ["a/b", "c/d"]


def test_what_a_call_prints_is_not_taken_for_its_result(capfd):
    beam_pool.pool_address(WORKERS)
    [answer] = beam_pool.call_each(f"{__name__}:_print_and_return", [["printed"]])
    pid, text = answer.split()
    assert int(pid) in _pool_pids() and text == "printed"
    assert "printed" in capfd.readouterr().err


def test_a_failing_call_raises_its_error_and_the_next_user_gets_a_new_pool(tmp_path):
    beam_pool.pool_address(WORKERS)
    before = list(beam_pool._pool.processes)
    with pytest.raises(RuntimeError, match=r"(?s)os\.path:nope failed in a Beam pool process.*AttributeError"):
        beam_pool.call_each("os.path:nope", [[1], [2]])
    assert all(process.poll() is not None for process in before)
    assert beam_pool.call_each("os.path:join", [["a", "b"]]) is None
    rows = _run_squares(tmp_path, "after_failed_call.txt")
    assert {pid for pid, _ in rows} <= _pool_pids()
    assert not {process.pid for process in before} & _pool_pids()


def test_without_a_pool_of_enough_processes_the_caller_runs_its_calls():
    beam_pool.pool_address(WORKERS)
    assert beam_pool.call_each("os:getpid", [[]] * (WORKERS + 1)) is None
    beam_pool.close()
    assert beam_pool.call_each("os:getpid", [[]]) is None


def _autograph_files() -> list[str]:
    """The modules TensorFlow's autograph wrote to this process's temp dir, once it has
    converted a function."""
    import tensorflow as tf

    @tf.function
    def absolute(x):
        if x > 0:
            return x
        return -x

    absolute(tf.constant(1))
    return glob.glob(os.path.join(tempfile.gettempdir(), "__autograph_generated_file*"))


def test_the_pool_processes_leave_nothing_in_the_temp_dir(tmp_path, monkeypatch):
    beam_pool.close()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    beam_pool.pool_address(WORKERS)
    written = beam_pool.call_each(f"{__name__}:_autograph_files", [[]] * WORKERS)
    assert all(files and os.path.dirname(files[0]) == str(tmp_path) for files in written), written
    beam_pool.close()
    assert not os.listdir(tmp_path)


def test_calls_wait_for_a_pool_started_in_the_background():
    beam_pool.close()
    beam_pool.start_in_background(WORKERS)
    pids = beam_pool.call_each("os:getpid", [[]] * WORKERS)
    assert sorted(pids) == sorted(_pool_pids())
    beam_pool.start_in_background(WORKERS)  # running already: the same processes
    assert sorted(beam_pool.call_each("os:getpid", [[]] * WORKERS)) == sorted(pids)
