"""bench/flink.py's pure parts, on made-up runs: Flink's job records, the jobs matched to the
components by time, the client side's arithmetic from a run's log, and the Markdown tables."""

from __future__ import annotations

import datetime

import pytest

from bench import flink
from report.run_summary import ComponentRun

JID_A, JID_B, JID_C = "a" * 32, "b" * 32, "c" * 32


def log_line(epoch: float, message: str) -> str:
    """A line of a run's log as runtime/terminal.py formats it (local time, milliseconds)."""
    moment = datetime.datetime.fromtimestamp(epoch)
    return f"{moment:%Y-%m-%d %H:%M:%S},{moment.microsecond // 1000:03d} I apache_beam x.py:1] {message}"


def job(jid: str, start: float, duration: float, name: str = "BeamApp") -> dict:
    return {
        "jid": jid,
        "name": name,
        "state": "FINISHED",
        "start": start,
        "end": start + duration,
        "duration_s": duration,
    }


def vertex(vertex_id: str, start: float, duration: float, *inputs: str, name: str | None = None) -> dict:
    """A vertex as ``job_record`` keeps it: seconds after the job's start."""
    return {
        "id": vertex_id,
        "inputs": list(inputs),
        "name": name or vertex_id,
        "start_s": start,
        "duration_s": duration,
    }


def test_a_job_record_has_its_times_scheduling_vertices_and_critical_path():
    detail = {
        "jid": JID_A,
        "name": "BeamApp-root-1",
        "state": "FINISHED",
        "start-time": 1_000_000,
        "end-time": 1_090_000,
        "duration": 90_000,
        "timestamps": {"INITIALIZING": 1_000_000, "CREATED": 1_000_200, "RUNNING": 1_000_500},
        "vertices": [
            {"id": "v1", "name": "DataSource (Impulse)", "parallelism": 2, "start-time": 1_002_000, "duration": 3_000},
            {
                "id": "v2",
                "name": "MapPartition (MapPartition at [4]{InputToRecord})",
                "parallelism": 2,
                "start-time": 1_002_000,
                "duration": 56_000,
                "metrics": {"read-records": 150, "write-records": 150},
            },
            {"id": "v3", "name": "DataSink (DiscardingOutput)", "parallelism": 1, "start-time": -1, "duration": -1},
        ],
        "plan": {
            "nodes": [
                {"id": "v1"},
                {"id": "v2", "inputs": [{"num": 0, "id": "v1"}]},
                {"id": "v3", "inputs": [{"id": "v2"}]},
            ]
        },
    }
    record = flink.job_record(detail)
    assert (record["start"], record["end"], record["duration_s"]) == (1000.0, 1090.0, 90.0)
    assert record["to_running_s"] == 0.5
    assert record["to_first_task_s"] == 2.0
    assert record["parallelism"] == 2
    assert [v["id"] for v in record["vertices"]] == ["v2", "v1", "v3"]
    assert [v["duration_s"] for v in record["vertices"]] == [56.0, 3.0, 0.0]
    assert record["vertices"][0]["inputs"] == ["v1"]
    assert record["vertices"][0]["read_records"] == 150
    assert record["vertices"][2]["start_s"] is None
    # v2 ran from 2 s to 58 s, its input v1 ended at 5 s: 53 s of its own; v3 never started.
    assert record["critical_path"] == [
        {"name": "DataSource (Impulse)", "seconds": 3.0, "wait_s": 2.0},
        {"name": "MapPartition (MapPartition at [4]{InputToRecord})", "seconds": 53.0, "wait_s": 0.0},
    ]


def steps(path: list[dict]) -> list[tuple[str, float, float]]:
    return [(step["name"], round(step["seconds"], 3), round(step["wait_s"], 3)) for step in path]


def test_the_critical_path_follows_the_input_that_ended_last_while_it_ran():
    vertices = [
        vertex("read", 0.5, 17.5),
        vertex("infer", 0.5, 32.0, "read"),  # ends at 32.5
        vertex("split", 1.0, 74.0, "read", "infer"),  # waits for infer: 42.5 s of its own
        vertex("write", 1.0, 78.0, "split"),  # ends at 79
        vertex("side", 2.0, 5.0, "read"),  # ends early, on no path
        vertex("late", 80.0, 6.0, "write"),  # started 1 s after its input ended
    ]
    path = flink.critical_path(vertices)
    assert steps(path) == [
        ("read", 17.5, 0.5),
        ("infer", 14.5, 0.0),
        ("split", 42.5, 0.0),
        ("write", 4.0, 0.0),
        ("late", 6.0, 1.0),
    ]
    assert sum(step["seconds"] + step["wait_s"] for step in path) == pytest.approx(86.0)  # the last end


def test_a_vertex_scheduled_after_its_inputs_ended_waited_for_what_ended_just_before_it_started():
    vertices = [
        vertex("impulse", 0.2, 0.3),
        vertex("analyze", 0.5, 150.0, "impulse"),  # ends at 150.5, an input of none of the tail
        vertex("other", 0.5, 20.0, "impulse"),  # ends at 20.5
        vertex("tail-impulse", 151.0, 0.5),  # its region scheduled once "analyze" finished
        vertex("publish", 151.0, 19.0, "tail-impulse", "other"),  # ends at 170
    ]
    assert steps(flink.critical_path(vertices)) == [
        ("impulse", 0.3, 0.2),
        ("analyze", 150.0, 0.0),
        ("tail-impulse", 0.5, 0.5),
        ("publish", 18.5, 0.0),
    ]


def test_a_job_that_has_not_started_a_vertex_has_no_critical_path():
    assert flink.critical_path([{"id": "v", "inputs": [], "name": "v", "start_s": None, "duration_s": 0.0}]) == []


def test_each_job_goes_to_the_component_whose_window_holds_its_start():
    components = [
        ComponentRun("CsvExampleGen", "complete", 100.0, started=1000.0, finished=1100.0),
        ComponentRun("StatisticsGen", "complete", 50.0, started=1100.5, finished=1150.5),
        ComponentRun("Transform", "complete", 60.0, started=1200.0, finished=1260.0),
    ]
    jobs = [
        job(JID_A, 1020.0, 70.0),
        job(JID_B, 1120.0, 20.0),
        job(JID_C, 1205.0, 10.0),
        job("d" * 32, 1210.0, 10.0),
        job("e" * 32, 1170.0, 5.0),
    ]
    matched, unmatched = flink.match_jobs(jobs, components)
    assert {node: [j["jid"] for j in node_jobs] for node, node_jobs in matched.items()} == {
        "CsvExampleGen": [JID_A],
        "StatisticsGen": [JID_B],
        "Transform": [JID_C, "d" * 32],
    }
    assert [j["jid"] for j in unmatched] == ["e" * 32]


def test_a_job_starting_between_two_windows_goes_to_the_closer_one():
    components = [
        ComponentRun("StatisticsGen", "complete", 10.0, started=100.0, finished=110.0),
        ComponentRun("Transform", "complete", 10.0, started=110.8, finished=120.0),
    ]
    matched, _ = flink.match_jobs([job(JID_A, 110.6, 5.0)], components)
    assert list(matched) == ["Transform"]


def milestone_log(component_start: float) -> list[str]:
    """A component's log with one Beam job: job server 3 s to start, 4 s to submission, the
    JobManager starting the job 15 s later (at +22), the job done at +72 and seen done at +74."""
    t = component_start
    return [
        log_line(t + 0.5, "Going to run a new execution"),
        log_line(t + 1.0, "Starting service with ('java' '-jar' 'job-server.jar')"),
        log_line(t + 4.0, "[main] INFO JobServerDriver - Job server now running, terminate with Ctrl+C"),
        log_line(t + 5.0, "[grpc] INFO ArtifactStagingService - Staging artifacts for job_1."),
        log_line(t + 8.0, f"[io] INFO RestClusterClient - Submitting job 'BeamApp-root-1' ({JID_A})."),
        log_line(t + 23.0, f"[io] INFO RestClusterClient - Successfully submitted job 'BeamApp-root-1' ({JID_A})"),
        "  a continuation line, without a time",
        log_line(t + 74.0, "Job state changed to DONE"),
    ]


def test_the_logs_milestones_are_read_with_their_times_and_job_ids():
    start = datetime.datetime(2026, 11, 29, 18, 9, 35, 250_000).timestamp()
    found = flink.log_milestones(milestone_log(start))
    assert [(round(t - start, 3), kind, jid) for t, kind, jid in found] == [
        (1.0, "job_server_starting", None),
        (4.0, "job_server_ready", None),
        (8.0, "submitting", JID_A),
        (74.0, "done", None),
    ]


def test_a_components_wall_time_is_its_jobs_plus_the_client_phases():
    start = 1_795_975_775.0
    component = ComponentRun("CsvExampleGen", "complete", 76.0, started=start, finished=start + 76.0)
    the_job = job(JID_A, start + 22.0, 50.0)
    phases = flink.client_phases(component, [the_job], flink.log_milestones(milestone_log(start)))
    assert phases["wall_s"] == 76.0
    assert phases["jobs"] == 1
    assert phases["in_jobs_s"] == 50.0
    assert phases["client_s"] == pytest.approx(26.0)
    assert phases["job_server_s"] == pytest.approx(3.0)
    assert phases["prepare_s"] == pytest.approx(4.0)
    assert phases["submit_s"] == pytest.approx(14.0)
    assert phases["after_job_s"] == pytest.approx(2.0)
    assert phases["tfx_s"] == pytest.approx(3.0)  # 1 s before the job server, 2 s after DONE
    assert sum(phases[p] for p in flink.PHASES) == pytest.approx(phases["client_s"])


def test_two_jobs_of_a_component_add_up_each_with_its_own_job_server():
    start = 10_000.0
    lines = milestone_log(start) + [
        line.replace(JID_A, JID_B) for line in milestone_log(start + 80.0) if "new execution" not in line
    ]
    component = ComponentRun("Transform", "complete", 160.0, started=start, finished=start + 160.0)
    jobs = [job(JID_A, start + 22.0, 50.0), job(JID_B, start + 102.0, 50.0)]
    phases = flink.client_phases(component, jobs, flink.log_milestones(lines))
    assert phases["in_jobs_s"] == 100.0
    assert phases["job_server_s"] == pytest.approx(6.0)
    assert phases["submit_s"] == pytest.approx(28.0)
    assert phases["after_job_s"] == pytest.approx(4.0)
    assert phases["tfx_s"] == pytest.approx(160.0 - 100.0 - 6.0 - 8.0 - 28.0 - 4.0)


def test_a_stopped_runs_running_component_holds_its_jobs_and_is_broken_down_so_far():
    components = [
        ComponentRun("CsvExampleGen", "complete", 100.0, started=1000.0, finished=1100.0),
        # Still running when the run was stopped: ML Metadata last updated it when it started.
        ComponentRun("StatisticsGen", "running", 0.1, started=1100.5, finished=1100.6),
    ]
    running_job = job(JID_B, 1120.0, 300.0) | {"state": "RUNNING", "end": None}
    analysed = flink.analyse_flink_run(components, [job(JID_A, 1010.0, 80.0), running_job], [], until=1420.5)
    assert {node: [j["jid"] for j in jobs] for node, jobs in analysed["jobs"].items()} == {
        "CsvExampleGen": [JID_A],
        "StatisticsGen": [JID_B],
    }
    assert analysed["unmatched_jobs"] == []
    assert "so_far" not in analysed["breakdown"]["CsvExampleGen"]
    so_far = analysed["breakdown"]["StatisticsGen"]
    assert so_far["so_far"] is True
    assert (so_far["wall_s"], so_far["in_jobs_s"], so_far["client_s"]) == (320.0, 300.0, 20.0)
    assert flink.breakdown_table(analysed["breakdown"])[3].startswith("| StatisticsGen (so far) | 320.0 | 1 |")


def test_without_the_logs_milestones_the_whole_client_side_is_the_rest():
    component = ComponentRun("Evaluator", "complete", 40.0, started=0.0, finished=40.0)
    phases = flink.client_phases(component, [job(JID_A, 10.0, 25.0)], [])
    assert phases["client_s"] == 15.0
    assert phases["tfx_s"] == 15.0
    assert phases["submit_s"] == 0.0


def test_sdk_workers_are_read_from_the_pools_and_the_taskmanagers_logs():
    pool = [
        "2026-11-29T19:07:01.911843285Z Starting worker with command ['/opt/apache/beam/boot', '--id=1-1', "
        "'--logging_endpoint=localhost:1']",
        "2026-11-29T19:07:02.000000000Z 2026/11/29 19:07:02 Provision info:",
        "2026-11-29T19:07:48.7Z Starting worker with command ['/opt/apache/beam/boot', '--id=2-1']",
    ]
    started = datetime.datetime(2026, 11, 29, 19, 7, 1, 911843, tzinfo=datetime.UTC).timestamp()
    assert flink.worker_starts(pool) == [(started, "1-1"), (started + 46.788157, "2-1")]
    connected = datetime.datetime(2026, 11, 29, 19, 7, 13, 329_000).timestamp()
    taskmanager = [
        log_line(connected - 11.0, "INFO GrpcLoggingService [] - Beam Fn Logging client connected."),
        log_line(connected, "INFO FnApiControlClientPoolService [] - Beam Fn Control client connected with id 1-1"),
    ]
    assert flink.worker_connects(taskmanager) == [(pytest.approx(connected), "1-1")]


def test_a_workers_start_runs_to_the_first_connection_of_its_id_within_the_job():
    starts = [(100.0, "1-1"), (150.0, "2-1"), (300.0, "1-1"), (90.0, "9-1")]
    connects = [(20.0, "1-1"), (111.0, "1-1"), (163.0, "2-1"), (312.0, "1-1"), (95.0, "9-1")]
    # The second job's 1-1 is another worker; 9-1 started before the job; a start never connected is left out.
    assert flink.worker_start_seconds(starts, connects, 99.0, 200.0) == [11.0, 13.0]
    assert flink.worker_start_seconds(starts + [(180.0, "3-1")], connects, 99.0, 200.0) == [11.0, 13.0]
    jobs = [job(JID_A, 99.0, 101.0), job(JID_B, 290.0, 30.0) | {"end": None}]
    flink.add_worker_starts(jobs, {"taskmanager1": (starts, connects), "taskmanager2": ([], [])}, until=400.0)
    assert jobs[0]["sdk_worker_starts_s"] == {"taskmanager1": [11.0, 13.0], "taskmanager2": []}
    assert jobs[1]["sdk_worker_starts_s"] == {"taskmanager1": [12.0], "taskmanager2": []}


def test_a_job_without_worker_figures_or_path_shows_none():
    assert flink.path_label(job(JID_A, 0.0, 1.0)) == "-"
    assert flink.workers_label(job(JID_A, 0.0, 1.0)) == "-"
    assert flink.workers_label(job(JID_A, 0.0, 1.0) | {"sdk_worker_starts_s": {"taskmanager1": []}}) == "-"


def test_the_dominant_phase_is_the_largest_over_the_components():
    breakdowns = {
        "CsvExampleGen": {"client_s": 26.0, "job_server_s": 3.0, "submit_s": 17.0, "tfx_s": 6.0},
        "Evaluator": {"client_s": 30.0, "job_server_s": 4.0, "submit_s": 15.0, "prepare_s": 11.0},
    }
    assert flink.dominant_phase(breakdowns) == ("submit_s", 32.0, 56.0)


@pytest.mark.parametrize(
    ("name", "label"),
    [
        (
            "CHAIN MapPartition (MapPartition at [5]InputToRecord/{CreateFilenames, ReadFromText}) -> "
            "FlatMap (FlatMap at ExtractOutput[0])",
            "[5]InputToRecord/{CreateFilenames, ReadFromText}",
        ),
        ("GroupReduce (GroupReduce at WriteSplit[train]/GroupByKey)", "WriteSplit[train]/GroupByKey"),
        ("DataSource (Impulse)", "DataSource (Impulse)"),
        ("MapPartition (MapPartition at [2]X/{FlatMap(<lambda at core.py:1>), Map(decode)})", None),
    ],
)
def test_a_vertex_is_labelled_by_its_beam_transform(name, label):
    assert flink.vertex_label(name) == (label or "[2]X/{FlatMap(<lambda at core.py:1>), Map(decode)}")


def test_a_long_vertex_label_is_cut():
    assert flink.vertex_label("GroupReduce (GroupReduce at " + "x" * 100 + ")", width=10) == "x" * 9 + "…"


def run_result(component_s: dict[str, float], wall: float, breakdown: dict | None = None, **extra) -> dict:
    result = {"wall_s": wall, "stopped": False, "component_s": component_s, "unfinished": {}}
    result |= {"load_1min_before": 1.0, "load_1min_after": 2.0, **extra}
    if breakdown is not None:
        path = [
            {"name": "DataSource (Impulse)", "seconds": 5.0, "wait_s": 1.5},
            {
                "name": "CHAIN MapPartition (MapPartition at [5]Read/{ReadFromText}) -> FlatMap",
                "seconds": 12.0,
                "wait_s": 0.0,
            },
            {"name": "Partition", "seconds": 0.2, "wait_s": 0.5},
            {"name": "GroupReduce (GroupReduce at Write/GroupByKey)", "seconds": 60.0, "wait_s": 0.0},
        ]
        details = {"parallelism": 2, "to_running_s": 0.4, "to_first_task_s": 1.5, "vertices": [{}] * 33}
        details["sdk_worker_starts_s"] = {"taskmanager1": [11.0, 12.0, 13.0], "taskmanager2": [10.0, 30.0]}
        jobs = {"CsvExampleGen": [job(JID_A, 0.0, 80.0) | details | {"critical_path": path}]}
        result |= {"breakdown": breakdown, "jobs": jobs, "unmatched_jobs": []}
    return result


@pytest.fixture
def results() -> dict:
    breakdown = {
        "CsvExampleGen": {
            "wall_s": 100.0,
            "jobs": 1,
            "in_jobs_s": 80.0,
            "client_s": 20.0,
            "job_server_s": 2.0,
            "prepare_s": 3.0,
            "submit_s": 12.0,
            "after_job_s": 2.0,
            "tfx_s": 1.0,
        }
    }
    direct = run_result({"CsvExampleGen": 10.0, "SchemaGen": 0.01, "Trainer": 30.0}, 60.0)
    p2 = run_result({"CsvExampleGen": 100.0, "SchemaGen": 0.02, "Trainer": 31.0}, 160.0, breakdown)
    configs = {"flink-p2": {"median": p2, "repeats": [p2]}, "direct": {"median": direct, "repeats": [direct]}}
    machine = {"date_utc": "2026-11-29T18:00:00+00:00", "cpus": 2, "ram_gb": 23.5, "python": "3.11.7"}
    machine |= {"tfx": "1.16.0", "apache_beam": "2.61.0"}
    settings = {"seed": 0, "repeats": 1, "cluster": "Flink 1.19.3 session cluster"}
    return {"machine": machine, "settings": settings, "sizes": [{"size": 10, "rows": 150020, "configs": configs}]}


def test_the_component_table_has_a_column_per_configuration_direct_first(results):
    table = flink.component_table(results["sizes"][0])
    assert table[0] == "| component (s) | direct | flink p2 |"
    assert "| CsvExampleGen | 10.0 | 100.0 |" in table
    assert "| Trainer | 30.0 | 31.0 |" in table
    assert not any("SchemaGen" in row for row in table)  # under half a second everywhere
    assert "| Beam components (sum) | 10.0 | 100.0 |" in table
    assert table[-1] == "| run (process wall) | 60.0 | 160.0 |"


def test_the_markdown_shows_where_the_flink_time_goes(results):
    text = flink.markdown(results)
    assert "## 150,020 rows" in text
    assert (
        "In Flink jobs 80.0 s, client side 20.0 s; its largest part: submission (jars, job graph), 12.0 s (60%)."
        in text
    )
    assert "| CsvExampleGen | 100.0 | 1 | 80.0 | 20.0 | 2.0 | 3.0 | 12.0 | 2.0 | 1.0 |" in text
    assert "| total | 100.0 | 1 | 80.0 | 20.0 | 2.0 | 3.0 | 12.0 | 2.0 | 1.0 |" in text
    path = "DataSource (Impulse) 5.0 → [5]Read/{ReadFromText} 12.0 → Write/GroupByKey 60.0"
    path += " (of 4 steps: 77.2 s, waits 2.0 s)"
    workers = "5 × 12.0 s (one TaskManager: 2, 40.0 s)"
    assert f"| CsvExampleGen | BeamApp | 2 | 80.0 | 0.4 | 1.5 | 33 | {workers} | {path} |" in text
    assert "2 CPUs shared with other work" in text


def test_a_stopped_run_is_named_with_what_it_finished(results):
    stopped = run_result(
        {"CsvExampleGen": 700.0}, 1500.0, {}, stopped=True, unfinished={"StatisticsGen": "running"}
    ) | {"jobs": {}}
    configs = {"flink-p2": {"median": stopped, "repeats": [stopped]}}
    timed_out = {"config": "flink-p2", "repeat": 0, "minutes": 25}
    results["sizes"].append({"size": 100, "rows": 1500200, "configs": configs, "timed_out": timed_out})
    text = flink.markdown(results)
    assert "## 1,500,200 rows\n\nflink p2 was stopped after 25 minutes." in text
    table = flink.component_table(results["sizes"][1])
    assert "| StatisticsGen | running |" in table
    assert "| Beam components (sum) | 700.0 (stopped) |" in table
    assert table[-1] == "| run (process wall) | 1500.0 (stopped) |"


def test_the_runner_flags_of_each_configuration():
    assert flink.runner_flags(None, "10.0.0.2:8081", "job.jar", "img") == ["--no-report"]
    assert flink.runner_flags(2, "10.0.0.2:8081", "job.jar", "img") == [
        "--no-report",
        "--flink-master",
        "10.0.0.2:8081",
        "--flink-parallelism",
        "2",
        "--flink-job-server-jar",
        "job.jar",
        "--flink-sdk-image",
        "img",
    ]


def test_the_output_dir_must_be_on_the_clusters_shared_storage(tmp_path, capsys):
    with pytest.raises(SystemExit):
        flink.parse_args(["--output-dir", "/var/lib/elsewhere"])
    assert "shared storage" in capsys.readouterr().err
    args = flink.parse_args(["--output-dir", "/var/lib/elsewhere", "--parallelisms", "none"])
    assert args.parallelism_list == []
    assert flink.parse_args(["--sizes", "10,100", "--parallelisms", "2,1"]).parallelism_list == [2, 1]
