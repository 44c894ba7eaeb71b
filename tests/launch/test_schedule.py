"""When scheduled runs start: the cron Vertex AI takes, the schedule's name and times, and
what the command says about a schedule (the flags themselves: tests/test_kubeflow_runner.py)."""

from __future__ import annotations

import datetime

import pytest

from launch import schedule
from pipeline.config import PipelineConfig


@pytest.mark.parametrize(
    ("cron", "sent"),
    [
        ("0 3 * * 1", "0 3 * * 1"),
        ("  */15   8-18 * JAN,JUL MON-FRI ", "*/15 8-18 * JAN,JUL MON-FRI"),
        ("TZ=America/New_York 0 3 * * 1", "TZ=America/New_York 0 3 * * 1"),
        ("CRON_TZ=UTC 30 2 1 * *", "CRON_TZ=UTC 30 2 1 * *"),
    ],
)
def test_cron_as_vertex_takes_it(cron, sent):
    assert schedule.check_cron(cron) == sent


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("0 3 * *", "has 4 fields; Vertex AI takes 5 (minute hour day-of-month month day-of-week)"),
        ("0 0 3 * * 1", "has 6 fields"),
        ("@daily", "has 1 fields"),
        ("TZ=Europe/Berlin", "has 0 fields"),
        ("TZ=Mars/Olympus 0 3 * * 1", "'Mars/Olympus' in 'TZ=Mars/Olympus 0 3 * * 1' is not an IANA time zone"),
        ("0 3 * * 1#2", "the day-of-week field '1#2' is not unix-cron"),
    ],
)
def test_cron_vertex_would_refuse_is_refused_here(cron, says):
    with pytest.raises(ValueError) as raised:
        schedule.check_cron(cron)
    assert says in str(raised.value)


def test_schedule_display_name_is_the_pipeline_name_within_vertex_limit():
    assert schedule.schedule_display_name("taxi-big-tipper") == "taxi-big-tipper-schedule"
    long_name = schedule.schedule_display_name("p" * 128)
    assert len(long_name) == 128 and long_name.endswith("-schedule")


def test_times_are_sent_in_utc():
    berlin = datetime.datetime.fromisoformat("2099-01-05T04:00:00+01:00")
    assert schedule.rfc3339(berlin) == "2099-01-05T03:00:00Z"


def test_a_schedule_in_one_line():
    weekly = schedule.Schedule(cron="0 3 * * 1", display_name="p-schedule")
    assert schedule.schedule_summary(weekly) == "cron '0 3 * * 1', from now, no end, 1 run at a time"
    start = datetime.datetime(2099, 1, 5, 3, tzinfo=datetime.UTC)
    window = schedule.Schedule("0 3 * * 1", "p-schedule", start_time=start, end_time=start, max_run_count=2)
    assert schedule.schedule_summary(window) == (
        "cron '0 3 * * 1', from 2099-01-05T03:00:00Z until 2099-01-05T03:00:00Z, at most 2 runs, 1 run at a time"
    )


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("*.csv", "reads the files matching gs://b/data/*.csv as they are when the run starts"),
        ("span-{SPAN}/*.csv", "resolves the newest span matching gs://b/data/span-{SPAN}/*.csv when the run starts"),
    ],
)
def test_each_scheduled_run_reads_the_data_as_it_is_when_it_starts(pattern, says):
    config = PipelineConfig(data_root="gs://b/data/", output_root="gs://b/tfx", data_pattern=pattern)
    found = schedule.how_runs_find_data(config)
    assert says in found and "without recompiling" in found
