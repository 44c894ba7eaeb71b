"""The benchmark's results as Markdown, and what they were measured on.

Without ``--template`` the "vs template" ratios are against TFX's taxi template as measured
once and quoted in ``template_reference.json`` beside this module (its figures by row
count, and when, where and how they were measured): data, not code, so re-measuring it
changes only that file.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any

import models  # noqa: F401  (sets TensorFlow's environment before machine_info imports it; models/__init__.py)
from bench.measure import CACHED_BATCHES, POLL_SECONDS, PSS_POLL_SECONDS

TEMPLATE_REFERENCE_FILE = Path(__file__).with_name("template_reference.json")


def load_template_reference(path: Path = TEMPLATE_REFERENCE_FILE) -> dict[str, Any]:
    """The template's quoted figures and their provenance (``source``, ``measured_on``,
    ``machine``, ``reference``); ``figures_by_rows`` maps a row count to the template's
    ``wall_s`` and ``example_gen_s`` at that size."""
    reference = json.loads(path.read_text())
    reference["figures_by_rows"] = {int(rows): figures for rows, figures in reference["figures_by_rows"].items()}
    return reference


TEMPLATE_REFERENCE = load_template_reference()


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    import apache_beam
    import psutil
    import tensorflow as tf
    from tfx import version as tfx_version

    return {
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "tfx": tfx_version.__version__,
        "apache_beam": apache_beam.__version__,
    }


def template_figures(figures: dict[str, Any]) -> dict[str, float] | None:
    """The template's wall and ExampleGen seconds for these figures' size: measured in the
    same session when the benchmark ran it (--template), else quoted (TEMPLATE_REFERENCE)."""
    measured = figures.get("template")
    if measured:
        return {"wall_s": measured["wall_s"], "example_gen_s": measured["component_s"].get("CsvExampleGen", 0.0)}
    return TEMPLATE_REFERENCE["figures_by_rows"].get(int(figures["rows"]))


def _steady_states(figures: dict[str, Any]) -> str:
    """The third run's components: not started at all, or how many TFX found cached."""
    if figures.get("steady_reused"):
        return "unchanged: TFX not started"
    return f"{figures['steady_components']:g}/{figures['components']:g}"


def _table_head(columns: list[str]) -> list[str]:
    """A Markdown table's header row and the rule under it."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _tasks_table(sizes: list[dict[str, Any]], components: list[str]) -> list[str]:
    """Each task's run beside the binary one's, per size: the scaffold's seconds and peak
    PSS, the run's wall seconds and peak PSS, seconds per component, and the Evaluator's
    seconds against the binary Evaluator's; then peak PSS per component."""
    with_tasks = [s["median"] for s in sizes if s["median"].get("tasks")]
    if not with_tasks:
        return []
    header = ["rows", "task", "scaffold s", "scaffold PSS MB", "wall s", "peak PSS MB", *components]
    header.append("Evaluator vs binary")
    seconds = ["", "Each task on the same data (`bench/tasks.py`), scaffolded and run once fresh:", ""]
    seconds += _table_head(header)
    memory = ["", "Peak PSS (MB, process tree) while each component ran, per task:", ""]
    memory += ["| rows | task | " + " | ".join(components) + " |", "|" + "---|" * (len(components) + 2)]
    for r in with_tasks:
        binary_evaluator = r["component_s"].get("Evaluator", 0.0)
        runs = {"binary": {**r, "scaffold_s": None}, **r["tasks"]}
        for task, run in runs.items():
            evaluator = run["component_s"].get("Evaluator", 0.0)
            scaffolded = run.get("scaffold_s") is not None
            cells = [
                f"{r['rows']:,.0f}",
                task,
                f"{run['scaffold_s']:.1f}" if scaffolded else "-",
                f"{run['scaffold_peak_pss_mb']:.0f}" if scaffolded else "-",
                f"{run['wall_s']:.1f}",
                f"{run['peak_pss_mb']:.0f}",
                *(f"{run['component_s'].get(c, 0.0):.1f}" for c in components),
                f"{evaluator / binary_evaluator:.2f}x" if binary_evaluator else "-",
            ]
            seconds.append("| " + " | ".join(cells) + " |")
            peaks = run.get("component_peak_pss_mb", {})
            memory.append(
                f"| {r['rows']:,.0f} | {task} | " + " | ".join(f"{peaks.get(c, 0.0):.0f}" for c in components) + " |"
            )
    return seconds + memory


def _heading(results: dict[str, Any]) -> list[str]:
    """The title, the machine, and how the runs were made."""
    m = results["machine"]
    settings = results["settings"]
    repeats = settings["repeats"]
    return [
        f"# Pipeline benchmark ({m['date_utc']})",
        "",
        f"Machine: {m['cpus']} CPUs, {m['ram_gb']} GB RAM, {m['platform']}; Python {m['python']}, "
        f"TensorFlow {m['tensorflow']}, TFX {m['tfx']}, Beam {m['apache_beam']}.",
        f"Runner args: `{' '.join(settings['runner_args']) or '(defaults)'}`; seed "
        f"{settings['seed']}; "
        + (f"figures are medians of {repeats} repeats." if repeats > 1 else "one run per size (no repeats)."),
        "",
    ]


SUMMARY_COLUMNS = [
    "size",
    "rows",
    "wall s",
    "vs template",
    "ExampleGen rows/s",
    "vs template",
    "peak RSS MB",
    "peak PSS MB",
    "max proc RSS MB",
    "2nd run s (ratio)",
    "3rd run s (ratio, cached)",
    "input/in-memory",
    "streamed/in-memory",
    "load s",
]


def _summary_cells(size: dict[str, Any]) -> list[str]:
    """One size's row of the summary (``SUMMARY_COLUMNS``)."""
    r = size["median"]
    template = template_figures(r)
    mark = "" if "template" in r else " (quoted)"
    example_gen_s = r["component_s"].get("CsvExampleGen", 0.0)
    return [
        f"x{size['size']:g}",
        f"{r['rows']:,.0f}",
        f"{r['wall_s']:.1f}",
        f"{r['wall_s'] / template['wall_s']:.2f}x{mark}" if template else "-",
        f"{r['example_gen_rows_per_s']:,.0f}",
        f"{template['example_gen_s'] / example_gen_s:.1f}x faster{mark}" if template and example_gen_s else "-",
        f"{r['peak_rss_mb']:.0f}",
        f"{r['peak_pss_mb']:.0f}",
        f"{r['max_process_rss_mb']:.0f}",
        f"{r['cached_wall_s']:.1f} ({r['cached_ratio']:.2f})",
        f"{r['steady_wall_s']:.1f} ({r['steady_ratio']:.2f}, {_steady_states(r)})",
        f"{r['input_vs_cached_ratio']:.2f}",
        f"{r['streamed_vs_cached_ratio']:.2f}",
        f"{r['in_memory_load_s']:.1f}",
    ]


def _summary_table(sizes: list[dict[str, Any]]) -> list[str]:
    """A row per size, then how wall time and peak RSS grew from the smallest to the largest."""
    lines = _table_head(SUMMARY_COLUMNS)
    lines += ["| " + " | ".join(_summary_cells(s)) + " |" for s in sizes]
    if len(sizes) > 1:
        first, last = sizes[0]["median"], sizes[-1]["median"]
        lines += [
            "",
            f"From {first['rows']:,.0f} to {last['rows']:,.0f} rows ({last['rows'] / first['rows']:.0f}x): "
            f"wall time {last['wall_s'] / first['wall_s']:.2f}x, peak RSS "
            f"{last['peak_rss_mb'] / first['peak_rss_mb']:.2f}x.",
        ]
    return lines


def _per_component_table(sizes: list[dict[str, Any]], components: list[str], key: str, digits: int) -> list[str]:
    """A row per size: its figures under ``key`` (component -> value), one column per component."""
    lines = ["| rows | " + " | ".join(components) + " |", "|" + "---|" * (len(components) + 1)]
    for s in sizes:
        values = s["median"].get(key, {})
        lines.append(
            f"| {s['median']['rows']:,.0f} | "
            + " | ".join(f"{values.get(c, 0.0):.{digits}f}" for c in components)
            + " |"
        )
    return lines


def _template_table(sizes: list[dict[str, Any]]) -> list[str]:
    """The template's runs measured in the same session (--template), if any."""
    measured = [s["median"] for s in sizes if "template" in s["median"]]
    if not measured:
        return []
    names = list(dict.fromkeys(c for r in measured for c in r["template"]["component_s"]))
    lines = [
        "",
        "TFX taxi template, same session and data (`tfx template copy --model=taxi`, every component "
        "enabled, 1000 train steps): wall s, peak RSS and PSS MB, then seconds per component:",
        "",
    ]
    lines += _table_head(["rows", "wall s", "peak RSS MB", "peak PSS MB", *names])
    for r in measured:
        t = r["template"]
        lines.append(
            f"| {r['rows']:,.0f} | {t['wall_s']:.1f} | {t['peak_rss_mb']:.0f} | "
            f"{t['peak_pss_mb']:.0f} | " + " | ".join(f"{t['component_s'].get(c, 0.0):.1f}" for c in names) + " |"
        )
    return lines


def _peak_memory_tables(sizes: list[dict[str, Any]], components: list[str]) -> list[str]:
    """Peak RSS, then peak PSS, while each component ran."""
    lines = []
    for measure in ("rss", "pss"):
        lines += ["", f"Peak {measure.upper()} (MB, process tree) while each component ran:", ""]
        lines += _per_component_table(sizes, components, f"component_peak_{measure}_mb", 0)
    return lines


def _notes() -> list[str]:
    """What each figure is and how it was measured."""
    quoted = TEMPLATE_REFERENCE
    return [
        "",
        "wall s: end-to-end `local_runner.py` in a fresh output directory (process start to exit, imports "
        "included). vs template: against the TFX taxi template on the same data, run in the same session "
        f"(--template), or, marked (quoted), against its figures measured on {quoted['machine']} on "
        f"{quoted['measured_on']} (bench/{TEMPLATE_REFERENCE_FILE.name}, from {quoted['reference']}). peak RSS: "
        f"largest sum of RSS over the runner's process tree, polled every {POLL_SECONDS} s with psutil (shared pages "
        f"counted once per process); peak PSS: the same with each shared page split between its processes, polled "
        f"every {PSS_POLL_SECONDS} s (costly to read); max proc RSS: "
        "ru_maxrss of the largest single process. 2nd run: `--enable-cache` again on the same output root; the "
        "resolver, Evaluator and Pusher rerun because the first run's blessed model is now the baseline (the "
        "reused model itself, so the Evaluator copies its first evaluation of it). 3rd "
        "run: nothing changed since the 2nd; local_runner finds it so and starts no TFX (unchanged: "
        "runs/unchanged.py), or TFX runs and ML Metadata records n/m components as cached. "
        "input/in-memory: training steps/s fed by `models.data.input_fn` as run_fn calls it, over steps/s "
        f"on {CACHED_BATCHES} batches cached in memory; streamed: the same with the in-memory load switched off; "
        "load s: parsing the train split into memory. Data: resampled and perturbed from data/taxi/taxi.csv "
        "(see bench/generate.py).",
    ]


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: a summary per size, then seconds per component."""
    sizes = results["sizes"]
    components = list(dict.fromkeys(c for s in sizes for c in s["median"]["component_s"]))
    lines = _heading(results)
    lines += _summary_table(sizes)
    lines += ["", "Seconds per component (ML Metadata execution create -> last update):", ""]
    lines += _per_component_table(sizes, components, "component_s", 1)
    lines += _template_table(sizes)
    lines += _tasks_table(sizes, components)
    lines += _peak_memory_tables(sizes, components)
    lines += _notes()
    return "\n".join(lines) + "\n"
