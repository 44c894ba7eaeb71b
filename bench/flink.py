"""The pipeline's Beam components on the Flink session cluster against the DirectRunner: seconds
per component (ML Metadata) of the same run on the DirectRunner (default flags: workers by data
size) and on the cluster at each parallelism, and for each Flink job (the JobManager's REST API)
where the time goes: the component's wall time against the job's duration, the client side
between them from the run's log (job server start, staging and translation, submission, after
the job, TFX), and inside the job (scheduling, its critical path through its vertices, and on a
cluster the benchmark started, the Python SDK workers its tasks started and how long each took).

    python -m bench.flink [--sizes 10,100] [--parallelisms 1,2] [--repeats 1] [--master HOST:PORT]
    python -m bench.flink --report-only   # flink.md again from flink.json

Without --master the benchmark starts a cluster of its own (as root: ``--prefix``, ``--subnet``)
and stops it at the end, failed or not. Writes flink.json and flink.md in --output-dir after
every run; the runs' output roots stay under ``<output-dir>/flink-runs``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from bench.generate import cached_dataset
from bench.measure import latest_components, median_of, run_pipeline
from bench.report import machine_info
from pipeline.config import DEFAULT_OUTPUT_ROOT

if TYPE_CHECKING:
    from report.run_summary import ComponentRun

DEFAULT_OUTPUT_DIR = Path(DEFAULT_OUTPUT_ROOT) / "bench"
BEAM_COMPONENTS = ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator")
DIRECT = "direct"
# A job counts as a component's when it starts within the component's ML Metadata window
# widened by this much (the window's ends are recorded in whole milliseconds, by another process).
MATCH_SLACK_S = 1.0
# What the run's log says about each Beam job, by the line's text (Beam's job server's
# output, which Beam's client logs, and the client's own).
MILESTONES = {
    "job_server_starting": re.compile(r"Starting service with \('java'"),
    "job_server_ready": re.compile(r"Job server now running"),
    "submitting": re.compile(r"Submitting job '[^']*' \(([0-9a-f]{32})\)"),
    "done": re.compile(r"Job state changed to DONE"),
}
_LOG_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3}) ")
# An SDK worker: started by a sidecar's worker pool (its ``podman logs -t``), connected to its
# TaskManager (the TaskManager's log), by the worker id both name.
_WORKER_STARTED = re.compile(r"^(\S+) Starting worker with command .*'--id=([^']+)'")
_WORKER_CONNECTED = re.compile(r"Beam Fn Control client connected with id (\S+)")
# The client side of a Beam component on Flink, in order (``client_phases``).
PHASES = {
    "job_server_s": "job server start",
    "prepare_s": "staging, translation",
    "submit_s": "submission (jars, job graph)",
    "after_job_s": "after the job",
    "tfx_s": "TFX, Beam client (rest)",
}
PATH_STEPS_SHOWN, PATH_MIN_S = 5, 1.0


def config_name(parallelism: int | None) -> str:
    """A run's configuration: the DirectRunner (None) or the cluster at ``parallelism``."""
    return DIRECT if parallelism is None else f"flink-p{parallelism}"


def config_label(name: str) -> str:
    return name.replace("-p", " p")


def config_order(name: str) -> tuple[int, int]:
    """The DirectRunner first, then the cluster by parallelism."""
    return (0, 0) if name == DIRECT else (1, int(name.rsplit("-p", 1)[1]))


# The JobManager's REST API: what each job of a run did.


def rest(master: str, path: str, timeout: float = 10) -> dict:
    with urllib.request.urlopen(f"http://{master}{path}", timeout=timeout) as response:
        return json.load(response)


def vertex_record(vertex: dict, job_start_ms: int, inputs: Sequence[str] = ()) -> dict[str, Any]:
    """One vertex of a job: its id, name, the vertices it reads (``inputs``), parallelism, start
    (seconds after the job's), duration (so far, when it still runs), records."""
    metrics = vertex.get("metrics", {})
    started = vertex.get("start-time", -1)
    return {
        "id": vertex["id"],
        "inputs": list(inputs),
        "name": vertex["name"],
        "parallelism": vertex.get("parallelism"),
        "start_s": (started - job_start_ms) / 1000 if started > 0 else None,
        "duration_s": max(0, vertex.get("duration", 0)) / 1000,
        "read_records": metrics.get("read-records"),
        "write_records": metrics.get("write-records"),
    }


def job_record(detail: dict) -> dict[str, Any]:
    """A job as ``/jobs/<id>`` describes it: its times (epoch seconds), duration, how long it took
    to reach RUNNING and to start its first task, its vertices (longest first) and its critical path."""
    start_ms = detail["start-time"]
    stamps = detail.get("timestamps", {})
    inputs = {node["id"]: [i["id"] for i in node.get("inputs", [])] for node in detail.get("plan", {}).get("nodes", [])}
    vertices = [vertex_record(v, start_ms, inputs.get(v["id"], ())) for v in detail.get("vertices", [])]
    first = min((v["start_s"] for v in vertices if v["start_s"] is not None), default=None)
    running, initializing = stamps.get("RUNNING", 0), stamps.get("INITIALIZING", 0)
    return {
        "jid": detail["jid"],
        "name": detail["name"],
        "state": detail["state"],
        "start": start_ms / 1000,
        "end": detail["end-time"] / 1000 if detail.get("end-time", -1) > 0 else None,
        "duration_s": detail["duration"] / 1000,
        "to_running_s": (running - initializing) / 1000 if running and initializing else None,
        "to_first_task_s": first,
        "parallelism": max((v["parallelism"] or 0 for v in vertices), default=None),
        "vertices": sorted(vertices, key=lambda v: v["duration_s"], reverse=True),
        "critical_path": critical_path(vertices),
    }


def _vertex_end(vertex: dict[str, Any]) -> float:
    return vertex["start_s"] + vertex["duration_s"]


def _waited_for(current: dict[str, Any], started: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """What ``current`` waited for: its input that ended last, if that ended after ``current``
    started (its data streamed in); else the vertex of the job that ended last before ``current``
    started (Flink schedules a batch job's vertices region by region, as the blocking results a
    region reads are finished: the inputs of its other vertices, broadcast ones included)."""
    inputs = [started[i] for i in current["inputs"] if i in started]
    latest_input = max(inputs, key=_vertex_end, default=None)
    if latest_input is not None and _vertex_end(latest_input) > current["start_s"]:
        return latest_input
    earlier = [v for v in started.values() if v is not current and _vertex_end(v) <= current["start_s"]]
    return max(earlier, key=_vertex_end, default=None)


def critical_path(vertices: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where a job's time went, vertex by vertex, in the order they ran: from the vertex that ended
    last back through what each waited for (``_waited_for``). Each step's ``seconds`` run from the
    end of what it waited for (or its own start, if later) to its own end, and ``wait_s`` from that
    end to its start: so a path's seconds and waits add up to its last vertex's end (after the job's
    start). Flink's batch vertices run as their inputs stream, so their own durations overlap."""
    started = {v["id"]: v for v in vertices if v["start_s"] is not None}
    current = max(started.values(), key=_vertex_end, default=None)
    steps: list[dict[str, Any]] = []
    seen: set[str] = set()
    while current is not None and current["id"] not in seen:
        seen.add(current["id"])
        previous = _waited_for(current, started)
        ready = 0.0 if previous is None else _vertex_end(previous)
        begin = max(current["start_s"], ready)
        steps.append({"name": current["name"], "seconds": _vertex_end(current) - begin, "wait_s": begin - ready})
        current = previous
    return steps[::-1]


def flink_jobs(master: str, since: float, until: float) -> list[dict[str, Any]]:
    """The jobs the cluster started between ``since`` and ``until`` (epoch seconds), oldest first."""
    listed = rest(master, "/jobs/overview")["jobs"]
    ours = [job for job in listed if since * 1000 <= job["start-time"] <= until * 1000]
    return sorted((job_record(rest(master, f"/jobs/{job['jid']}")) for job in ours), key=lambda j: j["start"])


def match_jobs(
    jobs: Sequence[dict[str, Any]], components: Sequence[ComponentRun], slack: float = MATCH_SLACK_S
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Each component's jobs: those that started within its window (``slack`` wider each side;
    the closest window's when two hold it); and the jobs no component's window holds."""
    matched: dict[str, list[dict[str, Any]]] = {}
    unmatched = []
    for job in jobs:
        holding = [c for c in components if c.started - slack <= job["start"] <= c.finished + slack]
        if not holding:
            unmatched.append(job)
            continue
        best = min(holding, key=lambda c: max(c.started - job["start"], job["start"] - c.finished, 0.0))
        matched.setdefault(best.node_id, []).append(job)
    return matched, unmatched


# Inside a job: its SDK workers, from the sidecars' and the TaskManagers' logs.


def worker_starts(lines: Iterable[str]) -> list[tuple[float, str]]:
    """(epoch seconds, worker id) of each SDK worker a sidecar's pool started, from its
    ``podman logs -t`` (RFC 3339 times in UTC, to the nanosecond)."""
    found = []
    for line in lines:
        hit = _WORKER_STARTED.match(line)
        if hit:
            stamp = hit.group(1).rstrip("Z")
            whole, _, fraction = stamp.partition(".")
            moment = datetime.datetime.fromisoformat(f"{whole}.{fraction[:6].ljust(6, '0')}+00:00")
            found.append((moment.timestamp(), hit.group(2)))
    return found


def worker_connects(lines: Iterable[str]) -> list[tuple[float, str]]:
    """(epoch seconds, worker id) of each SDK worker that connected to a TaskManager, from its log."""
    found = []
    for line in lines:
        stamp = _LOG_TIME.match(line)
        hit = stamp and _WORKER_CONNECTED.search(line, stamp.end())
        if hit:
            found.append((_log_time(stamp), hit.group(1)))
    return found


def worker_start_seconds(
    starts: Sequence[tuple[float, str]], connects: Sequence[tuple[float, str]], since: float, until: float
) -> list[float]:
    """How long each SDK worker started between ``since`` and ``until`` (a job's run) took from
    the pool's start to its connection (the first of its id after it: ids restart with each job)."""
    found = []
    for started, worker in starts:
        if since <= started <= until:
            connected = next((t for t, other in connects if other == worker and started <= t <= until), None)
            if connected is not None:
                found.append(connected - started)
    return found


def read_worker_logs(spec: Any) -> dict[str, tuple[list[tuple[float, str]], list[tuple[float, str]]]]:
    """Each TaskManager's SDK worker starts (its sidecar's log) and connections (its own log)."""
    from rehearsal import podman

    logs = {}
    for host in spec.taskmanagers:
        output = podman.run("logs", "-t", spec.container(host), check=False)
        connects: list[tuple[float, str]] = []
        for path in sorted((spec.state / "log" / host.role).glob("flink--taskexecutor-*.log*")):
            with open(path, errors="replace") as lines:
                connects += worker_connects(lines)
        logs[host.role] = (worker_starts((output.stdout + output.stderr).splitlines()), connects)
    return logs


def add_worker_starts(jobs: Sequence[dict[str, Any]], logs: dict[str, tuple[list, list]], until: float) -> None:
    """Each job's SDK worker start seconds by TaskManager (``sdk_worker_starts_s``)."""
    for job in jobs:
        end = job["end"] or until
        job["sdk_worker_starts_s"] = {
            role: worker_start_seconds(starts, connects, job["start"], end) for role, (starts, connects) in logs.items()
        }


# The client side, from the run's log.


def _log_time(stamp: re.Match) -> float:
    """Epoch seconds of a ``_LOG_TIME`` match (this machine's local time, as Python's and Flink's logs write it)."""
    moment = datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")
    return moment.timestamp() + int(stamp.group(2)) / 1000


def log_milestones(lines: Iterable[str]) -> list[tuple[float, str, str | None]]:
    """(epoch seconds, milestone, job id or None) for each line of a run's log that marks one of ``MILESTONES``."""
    found = []
    for line in lines:
        stamp = _LOG_TIME.match(line)
        if stamp is None:
            continue
        for kind, pattern in MILESTONES.items():
            hit = pattern.search(line, stamp.end())
            if hit:
                found.append((_log_time(stamp), kind, hit.groups()[0] if hit.groups() else None))
                break
    return found


def read_milestones(output_root: Path) -> list[tuple[float, str, str | None]]:
    """The milestones of every log under the run's output root, in time order."""
    found = []
    for log in sorted((output_root / "logs").rglob("*.log")):
        with open(log, errors="replace") as lines:
            found += log_milestones(lines)
    return sorted(found)


def _last_before(
    milestones: Sequence[tuple[float, str, str | None]], kind: str, before: float, after: float
) -> float | None:
    times = [t for t, k, _ in milestones if k == kind and after <= t <= before]
    return times[-1] if times else None


def _job_phases(
    job: dict[str, Any], milestones: Sequence[tuple[float, str, str | None]], since: float
) -> dict[str, float]:
    """One job's client phases: its job server's start, staging and translation up to its
    submission, the submission until the JobManager started it, and from its end until the
    client saw it done. A phase whose milestones the log lacks is left out."""
    phases: dict[str, float] = {}
    submitted = next((t for t, k, jid in milestones if k == "submitting" and jid == job["jid"]), None)
    if submitted is None:
        return phases
    phases["submit_s"] = job["start"] - submitted
    ready = _last_before(milestones, "job_server_ready", submitted, since)
    if ready is not None:
        phases["prepare_s"] = submitted - ready
        starting = _last_before(milestones, "job_server_starting", ready, since)
        if starting is not None:
            phases["job_server_s"] = ready - starting
    if job["end"] is not None:
        done = next((t for t, k, _ in milestones if k == "done" and t >= job["end"]), None)
        if done is not None:
            phases["after_job_s"] = done - job["end"]
    return phases


def client_phases(
    component: ComponentRun, jobs: Sequence[dict[str, Any]], milestones: Sequence[tuple[float, str, str | None]]
) -> dict[str, Any]:
    """A Beam component's wall time (ML Metadata) split into its Flink jobs' durations and the
    client side: ``PHASES`` summed over its jobs, and the rest of the wall time (``tfx_s``: TFX
    before and after, the Beam pipeline's construction in Python)."""
    in_jobs = sum(job["duration_s"] for job in jobs)
    phases = dict.fromkeys(PHASES, 0.0)
    since = component.started - MATCH_SLACK_S
    for job in sorted(jobs, key=lambda j: j["start"]):
        for phase, seconds in _job_phases(job, milestones, since).items():
            phases[phase] += seconds
        since = job["end"] or job["start"]
    phases["tfx_s"] = component.seconds - in_jobs - sum(v for k, v in phases.items() if k != "tfx_s")
    return {
        "wall_s": component.seconds,
        "jobs": len(jobs),
        "in_jobs_s": in_jobs,
        "client_s": component.seconds - in_jobs,
        **phases,
    }


def dominant_phase(breakdowns: dict[str, dict[str, Any]]) -> tuple[str, float, float]:
    """The client phase that took longest over all of a run's Beam components: its name, its
    seconds, and the client side's total seconds."""
    totals = {phase: sum(b.get(phase) or 0.0 for b in breakdowns.values()) for phase in PHASES}
    phase = max(totals, key=totals.get)
    return phase, totals[phase], sum(b.get("client_s") or 0.0 for b in breakdowns.values())


# The runs.


def runner_flags(parallelism: int | None, master: str, job_server_jar: str, image: str) -> list[str]:
    """``local_runner.py``'s flags for a configuration: none but --no-report on the DirectRunner
    (as a user runs it), the cluster's at ``parallelism`` otherwise."""
    flags = ["--no-report"]
    if parallelism is None:
        return flags
    flags += ["--flink-master", master, "--flink-parallelism", str(parallelism)]
    return flags + ["--flink-job-server-jar", job_server_jar, "--flink-sdk-image", image]


class Target(NamedTuple):
    """The cluster the runs go to: its JobManager's REST address, and when the benchmark started
    it, the cluster itself (whose logs tell each job's SDK worker starts)."""

    master: str
    spec: Any = None


def measure_run(
    data_dir: Path, run_dir: Path, flags: Sequence[str], target: Target | None, stopped: threading.Event | None = None
) -> dict[str, Any]:
    """One fresh run of the pipeline: wall time, seconds per component, the load average around
    it; on the cluster (``target``) its Flink jobs and each finished Beam component's breakdown.
    A run killed by its deadline (``stopped`` set) is measured as far as it went."""
    output_root = run_dir / "outputs"
    run_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    since = time.time()
    try:
        measured = run_pipeline(data_dir, output_root, flags, run_dir / "run.log")
    except RuntimeError:
        if stopped is None or not stopped.is_set():
            raise
        measured = {"wall_s": time.time() - since, "peak_rss_mb": None}
    until = time.time()
    components = latest_components(output_root)
    result: dict[str, Any] = {
        "wall_s": measured["wall_s"],
        "stopped": stopped is not None and stopped.is_set(),
        "peak_rss_mb": measured["peak_rss_mb"],
        "load_1min_before": load_before,
        "load_1min_after": os.getloadavg()[0],
        "component_s": {c.node_id: c.seconds for c in components if c.state in ("complete", "cached")},
        "unfinished": {c.node_id: c.state for c in components if c.state not in ("complete", "cached")},
        "output_root": str(output_root),
    }
    if target is None:
        return result
    jobs = flink_jobs(target.master, since, until)
    # A job still running (its run stopped) was measured up to now: its component's time so far too.
    asked = time.time()
    if target.spec is not None:
        add_worker_starts(jobs, read_worker_logs(target.spec), asked)
    return result | analyse_flink_run(components, jobs, read_milestones(output_root), asked)


def analyse_flink_run(
    components: Sequence[ComponentRun],
    jobs: Sequence[dict[str, Any]],
    milestones: Sequence[tuple[float, str, str | None]],
    until: float,
) -> dict[str, Any]:
    """A run's Flink jobs by component (``match_jobs``), and each Beam component's breakdown
    (``client_phases``). A component still running when the run was stopped at ``until`` holds
    every job since it started; its breakdown is of its time so far (``so_far``)."""
    windows = [
        dataclasses.replace(c, finished=until, seconds=until - c.started) if c.state == "running" else c
        for c in components
    ]
    matched, unmatched = match_jobs(jobs, windows)
    by_id = {c.node_id: c for c in windows}
    breakdown = {}
    for node, node_jobs in matched.items():
        breakdown[node] = client_phases(by_id[node], node_jobs, milestones)
        if by_id[node].state == "running":
            breakdown[node]["so_far"] = True
    return {"breakdown": breakdown, "jobs": matched, "unmatched_jobs": unmatched}


def _summary_line(name: str, result: dict[str, Any]) -> str:
    beam = sum(result["component_s"].get(c, 0.0) for c in BEAM_COMPONENTS)
    line = f"    {name}: {result['wall_s']:.1f} s wall, Beam components {beam:.1f} s"
    if "breakdown" in result:
        in_jobs = sum(b["in_jobs_s"] for b in result["breakdown"].values())
        line += f" ({in_jobs:.1f} s in Flink jobs)"
    if result["unfinished"]:
        line += f", unfinished: {', '.join(f'{n} {s}' for n, s in result['unfinished'].items())}"
    return line + f", load {result['load_1min_before']:.1f} -> {result['load_1min_after']:.1f}"


def benchmark_size(results: dict[str, Any], size: float, args: argparse.Namespace, target: Target | None) -> bool:
    """Every configuration at one size, ``args.repeats`` times, the results written after each
    run; False when a run took longer than ``args.run_timeout`` minutes (it is stopped, the rest not run)."""
    data_dir, rows = cached_dataset(args.output_dir, size, args.seed)
    configs = ([None] if args.direct else []) + args.parallelism_list
    entry: dict[str, Any] = {"size": size, "rows": rows, "cluster": results["settings"]["cluster"], "configs": {}}
    results["sizes"].append(entry)
    repeats: dict[str, list[dict[str, Any]]] = {config_name(p): [] for p in configs}
    for repeat in range(args.repeats):
        for parallelism in configs:
            name = config_name(parallelism)
            print(f"  {name}, repeat {repeat + 1}/{args.repeats}", flush=True)
            flags = runner_flags(parallelism, target.master if target else "", args.job_server_jar, args.image)
            run_dir = args.output_dir / "flink-runs" / f"rows-{rows}" / name / f"repeat-{repeat}"
            shutil.rmtree(run_dir, ignore_errors=True)
            with deadline(args.run_timeout * 60) as expired:
                result = measure_run(data_dir, run_dir, flags, None if parallelism is None else target, expired)
            print(_summary_line(name, result), flush=True)
            repeats[name].append(result)
            entry["configs"][name] = {"median": median_of(repeats[name]), "repeats": repeats[name]}
            if result["stopped"]:
                entry["timed_out"] = {"config": name, "repeat": repeat, "minutes": args.run_timeout}
            write_results(results, args.output_dir)
            if result["stopped"]:
                print(f"    {name} stopped after {args.run_timeout:g} minutes: the benchmark ends here", flush=True)
                return False
    return True


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[threading.Event]:
    """Past ``seconds``, kills the pipeline run in progress (this process's ``local_runner.py``
    children and everything under them) and sets the event it yields."""
    import psutil

    expired = threading.Event()

    def stop_run() -> None:
        expired.set()
        runs = [p for p in psutil.Process().children() if "local_runner.py" in " ".join(_cmdline(p))]
        for process in [tree for run in runs for tree in (*run.children(recursive=True), run)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()

    timer = threading.Timer(seconds, stop_run)
    timer.start()
    try:
        yield expired
    finally:
        timer.cancel()


def _cmdline(process: Any) -> list[str]:
    import psutil

    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def rederived(results: dict[str, Any]) -> dict[str, Any]:
    """Results read back with each job's critical path worked out again from its vertices, as this
    version of the benchmark does (``--report-only``)."""
    for entry in results["sizes"]:
        for config in entry["configs"].values():
            for repeat in config["repeats"]:
                for job in (job for node_jobs in repeat.get("jobs", {}).values() for job in node_jobs):
                    if all("id" in vertex and "inputs" in vertex for vertex in job["vertices"]):
                        job["critical_path"] = critical_path(job["vertices"])
            config["median"] = median_of(config["repeats"])
    return results


def write_results(results: dict[str, Any], output_dir: Path) -> None:
    (output_dir / "flink.json").write_text(json.dumps(results, indent=2))
    (output_dir / "flink.md").write_text(markdown(results))


# The report.

SHOWN_MIN_S = 0.5
_VERTEX_LABEL = re.compile(r"\(\w+ at (.*?)\)(?: -> |$)")


def _row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return [_row(header), "|" + "---|" * len(header), *(_row(row) for row in rows)]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def vertex_label(name: str, width: int = 60) -> str:
    """A vertex's Beam transform, from Flink's name for it (``CHAIN MapPartition (MapPartition at
    [5]InputToRecord/{...}) -> FlatMap (...)``), cut to ``width`` characters."""
    hit = _VERTEX_LABEL.search(name)
    label = (hit.group(1) if hit else name).replace("|", "/")
    return label if len(label) <= width else label[: width - 1] + "…"


def component_table(entry: dict[str, Any]) -> list[str]:
    """Seconds per component (median over repeats) by configuration, the components that took
    ``SHOWN_MIN_S`` somewhere; then the Beam components' sum and the run's wall time."""
    medians = {name: entry["configs"][name]["median"] for name in sorted(entry["configs"], key=config_order)}
    nodes: list[str] = []
    for median in medians.values():
        nodes += [node for node in median["component_s"] if node not in nodes]
        nodes += [node for node in median.get("unfinished", {}) if node not in nodes]
    shown = [
        n
        for n in nodes
        if any(m["component_s"].get(n, 0.0) >= SHOWN_MIN_S or n in m.get("unfinished", {}) for m in medians.values())
    ]
    rows = [[node, *(_component_cell(m, node) for m in medians.values())] for node in shown]
    beam = [
        _seconds(sum(m["component_s"].get(c, 0.0) for c in BEAM_COMPONENTS)) + _stopped(m) for m in medians.values()
    ]
    rows.append(["Beam components (sum)", *beam])
    rows.append(["run (process wall)", *(_seconds(m["wall_s"]) + _stopped(m) for m in medians.values())])
    return _table(["component (s)", *(config_label(name) for name in medians)], rows)


def _component_cell(median: dict[str, Any], node: str) -> str:
    """A component's seconds, or its state when it did not finish (a run stopped meanwhile)."""
    return median.get("unfinished", {}).get(node) or _seconds(median["component_s"].get(node))


def _stopped(median: dict[str, Any]) -> str:
    return " (stopped)" if median.get("stopped") else ""


def breakdown_table(breakdown: dict[str, dict[str, Any]]) -> list[str]:
    """Each Beam component's wall time against its Flink jobs' and the client side's phases."""
    header = ["component", "wall s", "jobs", "in Flink jobs s", "client s", *PHASES.values()]
    keys = ["wall_s", "jobs", "in_jobs_s", "client_s", *PHASES]
    rows = [
        [f"{node} (so far)" if b.get("so_far") else node, *(_figure(k, b.get(k)) for k in keys)]
        for node, b in breakdown.items()
    ]
    rows.append(["total", *(_figure(k, sum(b.get(k) or 0.0 for b in breakdown.values())) for k in keys)])
    return _table(header, rows)


def _figure(key: str, value: float | None) -> str:
    """Seconds to a tenth; the count of jobs (a median: maybe a half) as it is."""
    return f"{value:g}" if key == "jobs" and value is not None else _seconds(value)


def path_label(job: dict[str, Any], min_seconds: float = PATH_MIN_S, steps: int = PATH_STEPS_SHOWN) -> str:
    """A job's critical path in a line: its ``steps`` longest steps of ``min_seconds`` or more, in order."""
    path = job.get("critical_path", [])
    if not path:
        return "-"
    kept = sorted(sorted(path, key=lambda s: s["seconds"], reverse=True)[:steps], key=path.index)
    shown = [
        f"{vertex_label(step['name'], 50)} {step['seconds']:.1f}" for step in kept if step["seconds"] >= min_seconds
    ]
    waits = sum(step.get("wait_s", 0.0) for step in path)
    total = sum(step["seconds"] for step in path)
    return " → ".join(shown) + f" (of {len(path)} steps: {total:.1f} s, waits {waits:.1f} s)"


def jobs_table(jobs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each Flink job: its component, duration, scheduling, and its critical path's longest steps."""
    rows = []
    for node, node_jobs in jobs.items():
        for job in node_jobs:
            name = job["name"] if job["state"] == "FINISHED" else f"{job['name']} ({job['state']})"
            rows.append(
                [
                    node,
                    name,
                    job["parallelism"],
                    _seconds(job["duration_s"]),
                    _seconds(job["to_running_s"]),
                    _seconds(job["to_first_task_s"]),
                    len(job["vertices"]),
                    workers_label(job),
                    path_label(job),
                ]
            )
    header = ["component", "job", "parallelism", "duration s", "to RUNNING s", "to first task s", "vertices"]
    return _table([*header, "SDK workers started", "critical path: its longest steps (s)"], rows)


def workers_label(job: dict[str, Any]) -> str:
    """How many SDK workers a job started, how long one took (median), and on the TaskManager that
    started most: how many, one after the other as the job's regions ran, and their seconds."""
    by_taskmanager = job.get("sdk_worker_starts_s")
    every = [seconds for starts in (by_taskmanager or {}).values() for seconds in starts]
    if not every:
        return "-"
    busiest = max(by_taskmanager.values(), key=sum)
    return f"{len(every)} × {statistics.median(every):.1f} s (one TaskManager: {len(busiest)}, {sum(busiest):.1f} s)"


def flink_section(name: str, median: dict[str, Any], first: dict[str, Any]) -> list[str]:
    """Where a configuration's Flink time went: the breakdown (medians) and the jobs (first repeat)."""
    lines = [f"### {config_label(name)}: where the Beam components' time goes", ""]
    if median["breakdown"]:
        phase, seconds, client = dominant_phase(median["breakdown"])
        in_jobs = sum(b["in_jobs_s"] for b in median["breakdown"].values())
        share = f"{100 * seconds / client:.0f}%" if client > 0 else "-"
        lines += [
            f"In Flink jobs {in_jobs:.1f} s, client side {client:.1f} s; its largest part: "
            f"{PHASES[phase]}, {seconds:.1f} s ({share}).",
            "",
            *breakdown_table(median["breakdown"]),
            "",
        ]
    lines += jobs_table(first["jobs"])
    if first.get("unmatched_jobs"):
        lines += ["", f"Jobs in no component's window: {', '.join(j['name'] for j in first['unmatched_jobs'])}"]
    return lines + [""]


NOTES = (
    "Component seconds: ML Metadata's execution create -> last update, median over repeats; components "
    f"under {SHOWN_MIN_S} s in every configuration are left out. direct: `local_runner.py` with its defaults "
    "(the DirectRunner, in-process below 100 MB of CSV, one worker per core above; ExampleGen's local fast "
    "path computes the statistics StatisticsGen then takes). flink pN: the same with `--flink-master "
    "--flink-parallelism N --flink-job-server-jar`, every Beam component a job of the session cluster "
    "(ExampleGen through Beam, StatisticsGen computing its statistics). In Flink jobs: the JobManager's "
    "duration of the component's jobs (`/jobs/<id>`, matched by time to the component's window). Client "
    "side = wall - in Flink jobs, split by the run's log: job server start (`Starting service` -> `Job "
    "server now running`), staging, translation (-> the job server's `Submitting job`), submission (-> the "
    "JobManager's start time: the job graph and the job server's class path uploaded), after the job (its "
    "end -> the client's `Job state changed to DONE`), and the rest (TFX before and after, the pipeline's "
    "construction in Python). To RUNNING: the job's INITIALIZING -> RUNNING; to first task: its start -> its "
    "first vertex's start. Critical path: from the vertex that ended last back through what each waited "
    "for (its input that ended last if that ended after it started, its data streaming in; else the vertex "
    "that ended last before it started, as Flink schedules a batch job region by region), each step counted "
    "from that end to its own (Flink's batch vertices run as their inputs stream, so their own durations "
    "overlap), waits: from that end to a step's start (scheduling, the first task's start included); its "
    f"{PATH_STEPS_SHOWN} longest steps of {PATH_MIN_S:g} s or more shown, all of them in flink.json. SDK "
    "workers started: Python SDK workers the job's tasks had the sidecars' pools start (a cluster the "
    "benchmark started only), each from the pool's `Starting worker` to the TaskManager's `Beam Fn Control "
    "client connected` of its id; median, and on the TaskManager that started most, their count and sum."
)


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: per size, the component table, then each Flink configuration's breakdown."""
    machine, settings = results["machine"], results["settings"]
    lines = [
        f"# Beam components on Flink against the DirectRunner ({machine['date_utc']})",
        "",
        f"Machine: {machine['cpus']} CPUs shared with other work (the 1-minute load average before and after "
        f"each run is in flink.json), {machine['ram_gb']} GB RAM; Python {machine['python']}, TFX "
        f"{machine['tfx']}, Beam {machine['apache_beam']}. Cluster: {settings['cluster']}, on the same machine. "
        f"Seed {settings['seed']}; {settings['repeats']} repeat(s), medians shown.",
        "",
    ]
    for entry in results["sizes"]:
        lines += [f"## {entry['rows']:,} rows", ""]
        if entry.get("cluster", settings["cluster"]) != settings["cluster"]:
            lines += [f"Cluster: {entry['cluster']}.", ""]
        if "timed_out" in entry:
            stopped = entry["timed_out"]
            lines += [f"{config_label(stopped['config'])} was stopped after {stopped['minutes']:g} minutes.", ""]
        if entry["configs"]:
            lines += [*component_table(entry), ""]
        for name in sorted(entry["configs"], key=config_order):
            if name != DIRECT:
                config = entry["configs"][name]
                lines += flink_section(name, config["median"], config["repeats"][0])
    return "\n".join([*lines, NOTES, ""])


# The command line, and the cluster it runs on.


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # so that the cluster's ``finally`` stops it


@contextlib.contextmanager
def own_cluster(args: argparse.Namespace) -> Iterator[Target]:
    """A cluster of the benchmark's own (``--prefix``, ``--subnet``, ``--image``) while the
    benchmark runs; stopped at the end, whatever happened (SIGTERM included)."""
    from flink_cluster import cluster, fetch, network

    spec = cluster.Cluster(network.Network(args.prefix, args.subnet), image=args.image)
    if why := cluster.missing_requirements(spec):
        raise SystemExit(f"error: the cluster cannot start here: {why}")
    fetch.fetch_all()
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        print(f"starting Flink cluster {args.prefix!r} on {args.subnet}", flush=True)
        cluster.up(spec)
        yield Target(spec.master, spec)
    finally:
        cluster.down(spec)
        signal.signal(signal.SIGTERM, previous)
        left = cluster.leftovers(spec)
        print(f"cluster {args.prefix!r} stopped" + (f"; left running: {', '.join(left)}" if left else ""), flush=True)


@contextlib.contextmanager
def cluster_for(args: argparse.Namespace) -> Iterator[Target | None]:
    """The cluster: --master's, one of our own, or None when no run needs one."""
    if not args.parallelism_list:
        yield None
    elif args.master:
        yield Target(args.master)
    else:
        with own_cluster(args) as target:
            yield target


def describe_cluster(target: Target | None, args: argparse.Namespace) -> str:
    if target is None:
        return "none"
    overview = rest(target.master, "/overview")
    owner = f"started by the benchmark as {args.prefix!r} on {args.subnet}" if target.spec else "given by --master"
    return (
        f"Flink {overview['flink-version']} session cluster at {target.master} ({owner}), "
        f"{overview['taskmanagers']} TaskManagers, {overview['slots-total']} slots in all, SDK workers in {args.image}"
    )


def _parser() -> argparse.ArgumentParser:
    from flink_cluster import cluster, fetch

    parser = argparse.ArgumentParser(
        prog="python -m bench.flink",
        description="The pipeline's Beam components on a Flink session cluster against the DirectRunner: "
        "seconds per component, and where each Flink job's time goes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--sizes", default="10,100", help="Multiples of the embedded data's rows (bench/generate.py).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the data generator.")
    parser.add_argument("--repeats", type=int, default=1, help="Runs per configuration; the tables show medians.")
    parser.add_argument("--parallelisms", default="1,2", help="The cluster's runs, by --flink-parallelism (or none).")
    parser.add_argument(
        "--direct", action=argparse.BooleanOptionalAction, default=True, help="Run the DirectRunner too."
    )
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=40,
        metavar="MINUTES",
        help="A run taking longer is stopped, and the benchmark with it (what it measured is kept).",
    )
    parser.add_argument("--master", metavar="HOST:PORT", help="A running cluster's JobManager (default: start one).")
    parser.add_argument("--prefix", default="bench", help="Names the cluster the benchmark starts.")
    parser.add_argument("--subnet", default="10.89.20.0/24", help="The addresses of the cluster the benchmark starts.")
    parser.add_argument("--image", default=cluster.DEFAULT_IMAGE, help="The SDK workers' image (the project's).")
    parser.add_argument("--job-server-jar", default=str(fetch.job_server_jar()), help="Beam's Flink job server.")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="Run nothing: write flink.md again from flink.json, each job's critical path worked out again.",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help="Generated data (cached, shared with `python -m bench`), runs, flink.json and flink.md; on the "
        "cluster's shared storage (under the system temp dir or the project's outputs/ or data/).",
    )
    return parser


def _numbers(parser: argparse.ArgumentParser, flag: str, text: str, kind: type) -> list:
    if text.strip().lower() == "none":
        return []
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        parser.error(f"{flag} must be numbers separated by commas, got {text!r}")
    if any(value <= 0 for value in values):
        parser.error(f"{flag} must be positive, got {text!r}")
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags, checked: sizes and parallelisms as lists, the output dir on the shared storage."""
    from flink_cluster import cluster

    parser = _parser()
    args = parser.parse_args(argv)
    args.size_list = _numbers(parser, "--sizes", args.sizes, float)
    args.parallelism_list = _numbers(parser, "--parallelisms", args.parallelisms, int)
    if not args.size_list:
        parser.error("--sizes: give at least one")
    if not args.direct and not args.parallelism_list:
        parser.error("nothing to run: --no-direct and no --parallelisms")
    if args.repeats < 1 or args.run_timeout <= 0:
        parser.error("--repeats must be at least 1, --run-timeout positive")
    args.output_dir = args.output_dir.resolve()
    shared = [Path(path).resolve() for path in cluster.default_shared()]
    if args.parallelism_list and not any(args.output_dir.is_relative_to(path) for path in shared):
        parser.error(f"--output-dir {args.output_dir} is not on the cluster's shared storage: under one of {shared}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs every size and configuration; writes and prints the results."""
    args = parse_args(argv)
    if args.report_only:
        results = rederived(json.loads((args.output_dir / "flink.json").read_text()))
        write_results(results, args.output_dir)
        print(markdown(results))
        return 0
    args.output_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {"seed": args.seed, "repeats": args.repeats, "parallelisms": args.parallelism_list},
        "sizes": [],
    }
    with cluster_for(args) as target:
        results["settings"]["cluster"] = describe_cluster(target, args)
        for size in args.size_list:
            print(f"size x{size:g}", flush=True)
            if not benchmark_size(results, size, args, target):
                break
    print()
    print(markdown(results))
    print(f"Written: {args.output_dir / 'flink.json'}, {args.output_dir / 'flink.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
