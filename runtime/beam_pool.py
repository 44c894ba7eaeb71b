"""Beam's local worker processes, started once per run and shared by every Beam component
(``PooledDirectRunner``: Beam's FnApiRunner with workers from the pool), which also take plain
calls (``call_each``: ExampleGen's CSV encoding). Local runs only; one of the speedups
(docs/performance-techniques.md).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any

import grpc
from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms import environments
from apache_beam.utils import thread_pool_executor

from runtime import speedups, start, worker_process_env

# Imported by each pool process once it is listening: what the Beam components' workers
# would otherwise import afresh for every component.
WARM_MODULES = (
    "tensorflow",
    "tfx_bsl.coders.example_coder",
    "tensorflow_data_validation",
    "tensorflow_transform.beam",
    "tensorflow_model_analysis",
    "tfx.components",
)

# What a pool process prints before the result of a call (``call_each``), so that anything
# a library prints to its standard output is not taken for one.
_RESULT = "beam-pool-result "

_lock = threading.Lock()
# One ``call_each`` at a time: a call holds its processes' standard input and output.
_calls_lock = threading.Lock()
_pool: _Pool | None = None
_starting: threading.Thread | None = None


class _Pool:
    """``size`` worker processes and, in this process, the one address Beam's external
    environment takes, which hands each worker request to the next process in turn."""

    def __init__(self, size: int) -> None:
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=worker_process_env(),
            )
            for _ in range(size)
        ]
        # Each process prints its address once it listens; its stdin stays open for its
        # life (it exits when this process's end closes it, however this process ends).
        addresses = [process.stdout.readline().strip() for process in self.processes]
        if not all(addresses):
            self.close()
            raise RuntimeError(
                "A Beam worker process of the pool exited before it listened; run with --beam-workers 1 to "
                "run Beam in this process, and see the error printed above."
            )
        self.channels = [grpc.insecure_channel(address) for address in addresses]
        self.stubs = [beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(channel) for channel in self.channels]
        self._next = itertools.cycle(self.stubs)
        self.server = grpc.server(thread_pool_executor.shared_unbounded_instance())
        self.address = f"localhost:{self.server.add_insecure_port('localhost:0')}"
        beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(_Dispatcher(self), self.server)
        self.server.start()

    def next_stub(self):
        with _lock:
            return next(self._next)

    def alive(self) -> bool:
        return all(process.poll() is None for process in self.processes)

    def ended_processes(self, wait_seconds: float = 2.0) -> list[str]:
        """Each process that has ended, with how ("pid 12 killed by signal 9"); a process
        that is ending is given ``wait_seconds`` to be seen ended."""
        deadline = time.monotonic() + wait_seconds
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        return [
            f"pid {process.pid} " + (f"killed by signal {-code}" if code < 0 else f"exited with code {code}")
            for process in self.processes
            if (code := process.poll()) is not None
        ]

    def call(self, process: subprocess.Popen, function: str, args: Sequence[Any]) -> None:
        process.stdin.write(json.dumps({"function": function, "args": list(args)}) + "\n")
        process.stdin.flush()

    def result(self, process: subprocess.Popen) -> dict[str, Any]:
        """The next result ``process`` prints; other lines go on to this process's stderr."""
        while True:
            line = process.stdout.readline()
            if not line:
                return {"error": f"the pool process {process.pid} exited (code {process.wait()}) during the call"}
            if line.startswith(_RESULT):
                return json.loads(line[len(_RESULT) :])
            sys.stderr.write(line)

    def kill(self) -> None:
        for process in self.processes:
            process.kill()
        self.close()

    def close(self) -> None:
        if getattr(self, "server", None) is not None:
            self.server.stop(None)
        for channel in getattr(self, "channels", ()):
            channel.close()
        for process in self.processes:
            if process.stdin:
                with contextlib.suppress(OSError):
                    process.stdin.close()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


class _Dispatcher(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    def __init__(self, pool: _Pool) -> None:
        self._pool = pool

    def StartWorker(self, request, context):  # noqa: N802 - gRPC method name
        return self._pool.next_stub().StartWorker(request)

    def StopWorker(self, request, context):  # noqa: N802 - gRPC method name
        # Nothing to stop: the harness ends when the runner closes its control channel.
        return beam_fn_api_pb2.StopWorkerResponse()


def pool_address(size: int) -> str:
    """The address of this process's pool of ``size`` worker processes, started on first use."""
    return _pool_of(size).address


def _pool_of(size: int) -> _Pool:
    """This process's pool of ``size`` worker processes, started on first use."""
    global _pool
    with _lock:
        # A pool of another size, or with a process gone (killed, out of memory), is replaced.
        if _pool is not None and (len(_pool.processes) != size or not _pool.alive()):
            _pool.close()
            _pool = None
        if _pool is None:
            _pool = _Pool(size)
            atexit.register(_pool.close)
        return _pool


def close() -> None:
    """Closes the run's pool, if it has one (its next user starts a new one)."""
    global _pool
    if _starting is not None:
        _starting.join()
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


def start_in_background(size: int) -> None:
    """Starts the run's pool of ``size`` processes in the background, unless it runs already:
    its processes import ``WARM_MODULES`` while the caller goes on."""
    global _starting
    with _lock:
        if _pool is not None and len(_pool.processes) == size and _pool.alive():
            return
        _starting = threading.Thread(target=pool_address, args=(size,), name="beam-pool-start", daemon=True)
        _starting.start()


def call_each(function: str, calls: Sequence[Sequence[Any]]) -> list[Any] | None:
    """``function`` ("package.module:name", importable in a pool process, its arguments and
    result JSON) called once per argument list in ``calls``, all at the same time, each in
    its own process of the run's pool; the results in order. None when the run has no pool
    of at least that many processes (the caller then runs the calls itself).

    A call that raises is a ``RuntimeError`` here, with its traceback; the pool's processes
    are then killed, so that none works on after the failure (the next user of the pool
    starts a new one)."""
    global _pool
    if _starting is not None:
        _starting.join()
    with _calls_lock:
        with _lock:
            pool = _pool
        if pool is None or len(pool.processes) < len(calls) or not pool.alive():
            return None
        processes = pool.processes[: len(calls)]
        for process, args in zip(processes, calls, strict=True):
            pool.call(process, function, args)
        answers = [pool.result(process) for process in processes]
        failed = [answer["error"] for answer in answers if "error" in answer]
        if failed:
            with _lock:
                if _pool is pool:
                    _pool = None
            pool.kill()
            raise RuntimeError(f"{function} failed in a Beam pool process:\n{failed[0][-3000:]}")
        return [answer["result"] for answer in answers]


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    """One ``call_each`` call, run in this pool process."""
    try:
        module, name = request["function"].split(":")
        return {"result": getattr(importlib.import_module(module), name)(*request["args"])}
    except Exception:  # noqa: BLE001 - the caller raises it, with this traceback
        return {"error": traceback.format_exc()}


class PooledDirectRunner(FnApiRunner):
    """Beam's FnApiRunner (the DirectRunner's), its workers taken from the pool:
    ``--runner=runtime.beam_pool.PooledDirectRunner --direct_num_workers=N``."""

    def run_pipeline(self, pipeline, options):
        speedups.check(speedups.by_name("beam-pool"))
        workers = options.view_as(DirectOptions).direct_num_workers or os.cpu_count() or 1
        pool = _pool_of(workers)
        self._default_environment = environments.ExternalEnvironment(pool.address)
        try:
            return super().run_pipeline(pipeline, options)
        except Exception as error:
            # Beam says only that a channel closed; the cause is a pool process that ended.
            ended = pool.ended_processes()
            if ended:
                raise RuntimeError(
                    "A Beam worker process of the run's pool ended in the middle of the pipeline "
                    f"({'; '.join(ended)}); what it printed went to this process's standard error. Run the same "
                    "command again (with --enable-cache the finished components are reused), or with "
                    "--beam-workers 1 to run Beam in this process."
                ) from error
            raise


def serve() -> None:
    """A pool process: Beam's external worker pool servicer, each worker an SDK harness in a
    thread of this process; prints its address, imports ``WARM_MODULES``, then answers the
    calls its parent writes to its stdin (``call_each``), and exits when its parent closes
    stdin."""
    import logging

    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer

    # What the workers log stays here; their errors fail the step they ran, and so reach
    # the runner (the worker processes Beam starts itself log the same way to the runner,
    # which shows a run's progress only).
    logging.getLogger().setLevel(logging.ERROR)
    # Before the first worker starts: the runner's pickles may be in the local form.
    start.before_pickles(pickles_stay_here=True)
    address, server = BeamFnExternalWorkerPoolServicer.start(use_process=False, state_cache_size=0)
    print(address, flush=True)
    start.before_imports()
    with start.heavy_imports():
        for module in WARM_MODULES:
            # Only a head start: a worker that needs a module imports it anyway.
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
    start.after_imports()
    for line in sys.stdin:
        print(_RESULT + json.dumps(_answer(json.loads(line))), flush=True)
    server.stop(None)
    # What the process registered to do at exit (TensorFlow's removal of the modules its
    # autograph wrote to the temp dir), then an exit that skips the interpreter's teardown.
    atexit._run_exitfuncs()
    os._exit(0)


def main(argv: Sequence[str]) -> int:
    serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
