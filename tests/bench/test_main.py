"""bench/__main__.py: the command line, and the whole benchmark end to end at a tiny size.

No timing assertions: these keep the benchmark working, they do not judge performance.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import template
from bench.__main__ import main as bench_main
from bench.__main__ import parse_args
from pipeline.config import REPO_ROOT
from tests.support.runs import EXECUTED_COMPONENTS, with_inferred_schema

FLAGS = (
    "--sizes",
    "--seed",
    "--repeats",
    "--output-dir",
    "--batch-size",
    "--template",
    "--no-template",
    "--input-steps",
)


def test_help_exits_0_with_every_flag_and_without_tensorflow():
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bench", "--help"], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr
    for flag in FLAGS:
        assert flag in done.stdout, flag
    # -X importtime lists every module imported, one a line, on stderr.
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "bench.measure" in imported
    assert "tensorflow" not in imported and "tfx" not in imported


def test_bad_sizes_tasks_and_flags_the_benchmark_sets_are_refused():
    with pytest.raises(SystemExit):
        parse_args(["--sizes", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--enable-cache"])
    assert parse_args([])[0].template and not parse_args(["--no-template"])[0].template
    assert parse_args([])[0].task_list == ["multiclass", "regression"]
    assert parse_args(["--tasks", "regression,regression"])[0].task_list == ["regression"]
    assert parse_args(["--tasks", "none"])[0].task_list == []
    with pytest.raises(SystemExit):
        parse_args(["--tasks", "ranking"])


NUMBERS = (
    "rows",
    "wall_s",
    "peak_rss_mb",
    "peak_pss_mb",
    "max_process_rss_mb",
    "cached_wall_s",
    "cached_ratio",
    "steady_wall_s",
    "steady_ratio",
    "input_steps_per_s",
    "streamed_steps_per_s",
    "cached_steps_per_s",
    "input_vs_cached_ratio",
    "in_memory_load_s",
    "example_gen_rows_per_s",
)


# The template's own training length (TRAIN_NUM_STEPS = 1000, EVAL_NUM_STEPS = 150 in its
# configs.py), cut to this many steps each: the checks are on what the harness measures and
# reports of the template's run, which its number of steps does not change.
TEMPLATE_STEPS = 8
_TEMPLATE_STEPS = re.compile(r"^(TRAIN_NUM_STEPS|EVAL_NUM_STEPS) = \d+$", re.M)


@pytest.fixture
def short_template(monkeypatch):
    """``bench.template.prepare_template`` as it is, then the copied template's steps cut."""
    prepare = template.prepare_template

    def prepare_short(destination: Path, data_dir: Path) -> Path:
        prepared = prepare(destination, data_dir)
        configs = prepared / "pipeline" / "configs.py"
        short, count = _TEMPLATE_STEPS.subn(rf"\1 = {TEMPLATE_STEPS}", configs.read_text())
        assert count == 2, f"{configs}: TRAIN_NUM_STEPS and EVAL_NUM_STEPS not found; the template changed"
        configs.write_text(short)
        return prepared

    monkeypatch.setattr(template, "prepare_template", prepare_short)


@pytest.mark.slow
def test_harness_end_to_end_at_a_tiny_size(tmp_path, short_template):
    out = tmp_path / "bench"
    # In this process (`python -m bench` itself: the --help tests above): one interpreter
    # importing TensorFlow fewer; the runs it measures are processes of their own.
    argv = ["--sizes", "0.04", "--output-dir", str(out), "--input-steps", "10", "--batch-size", "32"]
    argv += ["--train-steps", "8", "--epochs", "1"]
    # Eight steps may leave the model no better than chance: a floor of 0 blesses the first
    # model whatever it scores, so the second run always goes through TFX against it (an
    # unblessed first run would be steady, and its rerun answered without TFX).
    argv += ["--blessing-threshold", "0"]
    # The scaffolded problem's Trainer would choose between the network and the trees
    # (family "choose": both trained and compared, tests/models/test_choice.py); here it
    # trains the network alone. No run reports (tests/report/): the harness measures the
    # runs, it does not read what they write.
    argv += ["--hparam", "choice_rows=0", "--no-report"]
    # One other task covers bench/tasks.py; each task costs a scaffold and a run.
    argv += ["--template", "--tasks", "regression"]
    assert bench_main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    for key in ("date_utc", "cpus", "ram_gb", "python", "tensorflow", "tfx"):
        assert results["machine"][key]
    [size] = results["sizes"]
    figures = size["median"]
    assert figures["rows"] == 600
    for key in NUMBERS:
        assert figures[key] > 0, key
    for component in with_inferred_schema(EXECUTED_COMPONENTS):
        assert component in figures["component_s"]
    assert figures["component_s"]["Transform"] > 0 and figures["component_s"]["Trainer"] > 0
    # Memory while each long component ran (at least the runner's own process).
    assert figures["component_peak_rss_mb"]["Transform"] > 100 and figures["component_peak_rss_mb"]["Trainer"] > 100
    # PSS is polled every PSS_POLL_SECONDS only: Transform, the longest here, has samples.
    assert figures["component_peak_pss_mb"]["Transform"] > 100
    # PSS splits shared pages between processes; RSS counts them in each.
    assert figures["peak_pss_mb"] <= figures["peak_rss_mb"] * 1.05
    assert figures["cached_run_states"]["Transform"] == "cached"
    # Third run: nothing changed, so TFX was not even started (runs/unchanged.py).
    assert figures["steady_reused"] is True and figures["steady_run_states"] == {}
    table = (out / "results.md").read_text()
    assert "| x0.04 | 600 |" in table and "| Trainer |" in table
    assert "Peak RSS (MB, process tree) while each component ran" in table
    assert "Peak PSS (MB, process tree) while each component ran" in table
    # The regression problem was scaffolded from the same CSV and run through every component.
    regression = figures["tasks"]["regression"]
    assert regression["scaffold_s"] > 0 and regression["scaffold_peak_pss_mb"] > 0
    assert regression["component_s"]["Evaluator"] > 0 and "rmse" in regression["metrics"]
    assert "| 600 | regression |" in table
    # The template ran on the same data; the ratios use it, not the quoted figures.
    template = figures["template"]
    assert template["wall_s"] > 0 and template["peak_rss_mb"] > 0 and template["peak_pss_mb"] > 0
    assert set(template["component_states"].values()) == {"complete"}
    assert {"CsvExampleGen", "Transform", "Trainer", "Evaluator", "Pusher"} <= set(template["component_s"])
    assert f"| {figures['wall_s'] / template['wall_s']:.2f}x |" in table and "x (quoted) |" not in table
    assert "TFX taxi template, same session and data" in table
