"""The history of a pipeline's runs: span, window, metric, blessed, champion, pushed, drift.

One JSON line per run (failed runs included), appended when the run ends under
``<output root>/history/<pipeline>.jsonl`` and never pruned: what the run summary, the run
report and the replay command show of earlier runs, once pruning (``runs/prune.py``) has
removed their artifacts and the evaluations with them.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from collections.abc import Sequence

HISTORY_DIR = "history"
SHOWN_RUNS = 5


@dataclasses.dataclass(frozen=True)
class Entry:
    """One run as the history keeps it."""

    run_id: str
    finished: str
    outcome: str  # "blessed", "not blessed", or "failed: <component>"
    metric: str
    value: float | None = None
    span: int | None = None
    window: str | None = None
    pushed: bool = False
    drift: str = "-"
    warm_start: str | None = None
    seconds: float = 0.0
    # Seconds per component (what grows, if a run takes longer than the one before).
    components: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def blessed(self) -> bool:
        return self.outcome == "blessed"


def history_path(output_root: str, pipeline_name: str) -> str:
    return os.path.join(output_root, HISTORY_DIR, f"{pipeline_name}.jsonl")


def _drift(drift: dict | None) -> str:
    """A word or two: what DriftGate found against the champion's data."""
    if drift is None:
        return "-"
    if not drift.get("baseline"):
        return "no baseline"
    breaches = sorted({d["feature"] for d in drift.get("drift", []) if d.get("breached")})
    if not breaches:
        return "within"
    return ("accepted: " if drift.get("accepted") else "breached: ") + ", ".join(breaches)


def entry_from_summary(summary, metric: str, failed_component: str | None = None) -> Entry:
    """The history's entry for a run (``run_summary.RunSummary``); ``failed_component``
    names where a failed run stopped."""
    if failed_component is not None:
        outcome = f"failed: {failed_component}"
    elif summary.blessed is None:
        outcome = "not evaluated"
    else:
        outcome = "blessed" if summary.blessed else "not blessed"
    return Entry(
        run_id=summary.run_id,
        finished=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        outcome=outcome,
        metric=metric,
        value=summary.metrics.get(metric),
        span=summary.span,
        window=summary.window,
        pushed=bool(summary.pushed_to),
        drift="breached: the run stopped" if failed_component == "DriftGate" else _drift(summary.drift),
        warm_start=summary.warm_start,
        seconds=round(sum(c.seconds for c in summary.components), 1),
        components={c.node_id: round(c.seconds, 1) for c in summary.components},
    )


def append(path: str, entry: Entry) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(dataclasses.asdict(entry)) + "\n")


def read(path: str) -> list[Entry]:
    """Every entry, oldest first (none when the pipeline has no history yet)."""
    if not os.path.exists(path):
        return []
    known = {field.name for field in dataclasses.fields(Entry)}
    with open(path) as f:
        return [Entry(**{k: v for k, v in json.loads(line).items() if k in known}) for line in f if line.strip()]


def champions(entries: Sequence[Entry]) -> list[str | None]:
    """After each run, the run id of the champion (the newest blessed run so far)."""
    champion, result = None, []
    for entry in entries:
        if entry.blessed:
            champion = entry.run_id
        result.append(champion)
    return result


def format_recent(entries: Sequence[Entry], shown: int = SHOWN_RUNS) -> str:
    """The last ``shown`` runs as a small table, the champion after each marked."""
    if not entries:
        return "History: this is the pipeline's first recorded run"
    after = champions(entries)
    metric = entries[-1].metric
    rows = [("run", "span", "window", metric, "outcome", "champion", "pushed", "drift", "seconds")]
    for entry, champion in list(zip(entries, after, strict=True))[-shown:]:
        rows.append(
            (
                entry.run_id,
                "-" if entry.span is None else str(entry.span),
                entry.window or "-",
                "-" if entry.value is None else f"{entry.value:.4f}",
                entry.outcome,
                "this run" if champion == entry.run_id else ("-" if champion is None else "kept"),
                "yes" if entry.pushed else "no",
                entry.drift,
                f"{entry.seconds:.1f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"History: the last {len(rows) - 1} of {len(entries)} run(s)"]
    lines += ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def record(
    output_root: str, pipeline_name: str, summary, metric: str, failed_component: str | None = None
) -> list[Entry]:
    """Appends the run to the pipeline's history; every entry, this run's last."""
    path = history_path(output_root, pipeline_name)
    append(path, entry_from_summary(summary, metric, failed_component))
    return read(path)
