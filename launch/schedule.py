"""When Vertex AI Pipelines starts runs of the compiled job: the --schedule-* flags, their
checks, the ``Schedule`` they become and how the command describes it.

Pure values, no clients: ``launch.submission.schedule_on_vertex`` sends a ``Schedule``.
Every bad value fails here naming its flag, not later at Vertex's API.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import re
import zoneinfo
from typing import TYPE_CHECKING, Any

from launch.flag_errors import SettingsError, flag_value

if TYPE_CHECKING:
    from pipeline.config import PipelineConfig

# Vertex AI takes unix-cron: five fields, optionally after a TZ=/CRON_TZ= IANA time zone.
CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,-]+")
_CRON_EXAMPLE = "'TZ=Europe/Berlin 0 3 * * 1' (Mondays at 03:00 Berlin time)"


def check_cron(cron: str) -> str:
    """The cron expression as Vertex AI takes it, whitespace collapsed; a ValueError saying
    what is wrong otherwise, so a typo fails here and not at Vertex's API."""
    fields = cron.split()
    prefix = fields[:1] if fields and fields[0].startswith(("TZ=", "CRON_TZ=")) else []
    if prefix:
        zone = fields.pop(0).partition("=")[2]
        try:
            zoneinfo.ZoneInfo(zone)
        except (ValueError, zoneinfo.ZoneInfoNotFoundError):
            raise ValueError(f"{zone!r} in {cron!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") from None
    if len(fields) != len(CRON_FIELDS):
        raise ValueError(
            f"{cron!r} has {len(fields)} fields; Vertex AI takes {len(CRON_FIELDS)} ({' '.join(CRON_FIELDS)}), "
            f"optionally after TZ=<IANA time zone>, e.g. {_CRON_EXAMPLE}"
        )
    for name, field in zip(CRON_FIELDS, fields, strict=True):
        if not _CRON_FIELD.fullmatch(field):
            raise ValueError(f"{cron!r}: the {name} field {field!r} is not unix-cron (digits, names, * / , -)")
    return " ".join(prefix + fields)


# At most one scheduled run at a time: two runs of one pipeline would read the same newest
# data and race to bless and push a model. A run due while one is going is skipped, not queued.
MAX_CONCURRENT_RUNS = 1


@dataclasses.dataclass(frozen=True)
class Schedule:
    """When Vertex AI Pipelines starts runs of the compiled job (``check_cron`` checks the
    cron; times are timezone-aware)."""

    cron: str
    display_name: str
    start_time: datetime.datetime | None = None
    end_time: datetime.datetime | None = None
    max_run_count: int | None = None


def schedule_display_name(pipeline_name: str) -> str:
    """The schedule's display name: the pipeline's, marked as its schedule (Vertex allows 128 characters)."""
    suffix = "-schedule"
    return pipeline_name[: 128 - len(suffix)] + suffix


def rfc3339(when: datetime.datetime) -> str:
    """A time as Vertex's API takes it: UTC, ``Z``."""
    return when.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def add_schedule_flags(group: Any) -> None:
    """The --schedule-* flags, in the submission group: a schedule replaces --submit's one run."""
    group.add_argument(
        "--schedule-cron",
        metavar="CRON",
        help="Instead of one run now, create a Vertex AI Pipelines schedule that runs the compiled job at these "
        "times: unix-cron, 5 fields, after TZ=<IANA zone> to name the time zone, e.g. 'TZ=Europe/Berlin 0 3 * * 1'. "
        "One run at a time; the --submit settings (service account, network, labels, cache) apply to every run.",
    )
    group.add_argument(
        "--schedule-start", metavar="ISO-8601", help="With --schedule-cron: first possible run, e.g. 2030-01-06T00:00Z."
    )
    group.add_argument("--schedule-end", metavar="ISO-8601", help="With --schedule-cron: no runs after this time.")
    group.add_argument(
        "--schedule-max-runs", type=int, help="With --schedule-cron: the schedule completes after this many runs."
    )


def check_schedule_flags(args: argparse.Namespace) -> None:
    """--schedule-cron replaces a one-off run, and the window flags only shape a schedule."""
    if args.schedule_cron is None:
        for flag in ("--schedule-start", "--schedule-end", "--schedule-max-runs"):
            if flag_value(args, flag) is not None:
                raise SettingsError(f"{flag} shapes a Vertex AI schedule: add --schedule-cron, or drop {flag}")
        return
    for flag, clash, fix in (
        ("--submit", "starts one run now", "drop --submit to schedule, or drop --schedule-cron to run once"),
        ("--kfp-host", "sends to Kubeflow Pipelines", "schedules are created on Vertex AI only: drop --kfp-host"),
        ("--rehearse", "runs the job here once", "rehearse without --schedule-cron first, then schedule"),
        ("--span", "pins every run to one span", "drop --span so each run ingests the newest span"),
    ):
        given = flag_value(args, flag)
        if given is not None and given is not False:  # --span 0 is a span
            raise SettingsError(f"--schedule-cron creates a Vertex AI schedule and {flag} {clash}: {fix}")


def _schedule_time(flag: str, value: str | None) -> datetime.datetime | None:
    if value is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise SettingsError(
            f"{flag} expects an ISO-8601 date and time, e.g. 2030-01-06T03:00Z; got {value!r}"
        ) from None
    if when.utcoffset() is None:
        raise SettingsError(f"{flag} {value!r} has no time zone: add one, e.g. {value}Z (UTC) or {value}+01:00")
    return when


def schedule_from_args(args: argparse.Namespace, pipeline_name: str) -> Schedule:
    """The --schedule-* flags as a Schedule, named after the pipeline; each bad value names its flag."""
    try:
        cron = check_cron(args.schedule_cron)
    except ValueError as err:
        raise SettingsError(f"--schedule-cron {err}") from err
    start = _schedule_time("--schedule-start", args.schedule_start)
    end = _schedule_time("--schedule-end", args.schedule_end)
    if start and end and end <= start:
        raise SettingsError(f"--schedule-end {args.schedule_end} is not after --schedule-start {args.schedule_start}")
    if end and end <= datetime.datetime.now(datetime.UTC):
        raise SettingsError(f"--schedule-end {args.schedule_end} is in the past: no run would start")
    if args.schedule_max_runs is not None and args.schedule_max_runs < 1:
        raise SettingsError(f"--schedule-max-runs must be at least 1, got {args.schedule_max_runs}")
    return Schedule(
        cron=cron,
        display_name=schedule_display_name(pipeline_name),
        start_time=start,
        end_time=end,
        max_run_count=args.schedule_max_runs,
    )


def schedule_summary(schedule: Schedule) -> str:
    """The schedule's cron and window in one line."""
    parts = [f"cron {schedule.cron!r}", f"from {rfc3339(schedule.start_time)}" if schedule.start_time else "from now"]
    parts[-1] += f" until {rfc3339(schedule.end_time)}" if schedule.end_time else ", no end"
    if schedule.max_run_count:
        parts.append(f"at most {schedule.max_run_count} runs")
    parts.append(f"{MAX_CONCURRENT_RUNS} run at a time")
    return ", ".join(parts)


def how_runs_find_data(config: PipelineConfig) -> str:
    """What each scheduled run reads: ExampleGen's driver resolves --data-pattern under
    --data-root when the run starts, not when the job was compiled."""
    where = f"{config.data_root.rstrip('/')}/{config.data_pattern}"
    driver = "Each run runs this compiled job as it is; its ExampleGen driver"
    if config.has_spans:
        return (
            f"{driver} resolves the newest span matching {where} when the run starts (the Trainer learns from the "
            f"{config.window_spans} newest), so new spans are picked up without recompiling."
        )
    return (
        f"{driver} reads the files matching {where} as they are when the run starts, so new files are picked up "
        "without recompiling (a {SPAN} in --data-pattern reads only the newest span)."
    )
