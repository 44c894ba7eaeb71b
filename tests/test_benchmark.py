"""benchmark.py: the data generator's guarantees, and the harness end to end at a tiny size.

No timing assertions: these keep the harness working, they do not judge performance.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import benchmark
from tests.conftest import write_sample

SOURCE_ROWS = 300


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _label_rate(rows: list[dict[str, str]]) -> float:
    big = sum(1 for r in rows if r["fare"] and float(r["fare"]) > 0 and float(r["tips"] or 0) > 0.2 * float(r["fare"]))
    return big / len(rows)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """Every 50th row of the embedded data (all months, hours, and some empty cells)."""
    return write_sample(tmp_path_factory.mktemp("source"), SOURCE_ROWS, every=50) / "data.csv"


@pytest.fixture(scope="module")
def generated(source, tmp_path_factory) -> Path:
    return benchmark.generate_dataset(tmp_path_factory.mktemp("gen") / "out.csv", 2000, seed=7, source=source)


def test_row_count_and_header(source, generated):
    source_header, _ = _read(source)
    header, rows = _read(generated)
    assert header == source_header
    assert len(rows) == 2000
    assert not Path(str(generated) + ".partial").exists()


def test_deterministic_for_a_seed_different_for_another(source, generated, tmp_path):
    again = benchmark.generate_dataset(tmp_path / "again.csv", 2000, seed=7, source=source)
    other = benchmark.generate_dataset(tmp_path / "other.csv", 2000, seed=8, source=source)
    assert again.read_bytes() == generated.read_bytes()
    assert other.read_bytes() != generated.read_bytes()


def test_rows_are_perturbed_not_copied(source, generated):
    _, source_rows = _read(source)
    _, rows = _read(generated)
    originals = {tuple(r.values()) for r in source_rows}
    assert sum(tuple(r.values()) in originals for r in rows) < len(rows) * 0.05


def test_empty_cells_stay_empty(source, generated):
    _, source_rows = _read(source)
    _, rows = _read(generated)
    # Every generated row comes from a source row with the same company/payment and the
    # same pattern of empty cells (the perturbation never fills or empties a cell).
    patterns = {(r["company"], r["payment_type"], tuple(v == "" for v in r.values())) for r in source_rows}
    assert all((r["company"], r["payment_type"], tuple(v == "" for v in r.values())) in patterns for r in rows)
    assert any(r["dropoff_latitude"] == "" for r in rows)


def test_calendar_columns_follow_the_timestamp(generated):
    _, rows = _read(generated)
    for r in rows:
        moment = datetime.datetime.fromtimestamp(int(r["trip_start_timestamp"]), datetime.timezone.utc)
        assert int(r["trip_start_hour"]) == moment.hour
        assert int(r["trip_start_month"]) == moment.month
        assert int(r["trip_start_day"]) == moment.isoweekday() % 7 + 1  # 1 = Sunday


def test_the_source_uses_the_same_calendar_convention():
    """The embedded data's own hour/day/month agree with the offset the generator uses."""
    _, rows = _read(benchmark.SOURCE_CSV)
    for r in rows[:500]:
        assert benchmark._calendar(int(r["trip_start_timestamp"])) == (
            int(r["trip_start_hour"]), int(r["trip_start_day"]), int(r["trip_start_month"]))


def test_label_rate_stays_realistic(generated):
    _, source_rows = _read(benchmark.SOURCE_CSV)
    _, rows = _read(generated)
    assert 0.20 < _label_rate(source_rows) < 0.25  # 22.5% in the embedded data
    assert 0.15 < _label_rate(rows) < 0.30


def test_dataset_cache_is_reused(tmp_path):
    first, rows = benchmark.cached_dataset(tmp_path, 0.01, seed=3)
    stamp = (first / "data.csv").stat().st_mtime_ns
    again, _ = benchmark.cached_dataset(tmp_path, 0.01, seed=3)
    assert again == first and (again / "data.csv").stat().st_mtime_ns == stamp
    assert rows == round(0.01 * 15002)


def test_help_and_bad_sizes():
    assert "--sizes" in subprocess.run([sys.executable, "benchmark.py", "--help"], capture_output=True, text=True,
                                       check=True, cwd=benchmark.REPO_ROOT).stdout
    with pytest.raises(SystemExit):
        benchmark.parse_args(["--sizes", "0"])
    with pytest.raises(SystemExit):
        benchmark.parse_args(["--enable-cache"])
    assert benchmark.parse_args([])[0].template and not benchmark.parse_args(["--no-template"])[0].template


NUMBERS = ("rows", "wall_s", "peak_rss_mb", "peak_pss_mb", "max_process_rss_mb", "cached_wall_s", "cached_ratio",
           "steady_wall_s", "steady_ratio", "input_steps_per_s", "streamed_steps_per_s", "cached_steps_per_s",
           "input_vs_cached_ratio", "in_memory_load_s", "example_gen_rows_per_s")
COMPONENTS = ("CsvExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "AnomalyGate", "Transform",
              "Trainer", "Evaluator", "Pusher")


@pytest.mark.slow
def test_harness_end_to_end_at_a_tiny_size(tmp_path):
    out = tmp_path / "bench"
    subprocess.run(
        [sys.executable, "benchmark.py", "--sizes", "0.04", "--output-dir", str(out), "--input-steps", "10",
         "--batch-size", "32", "--train-steps", "8", "--epochs", "1", "--min-eval-auc", "0.5", "--template"],
        check=True, cwd=benchmark.REPO_ROOT, env={**os.environ, "TF_USE_LEGACY_KERAS": "1"},
    )
    results = json.loads((out / "results.json").read_text())
    for key in ("date_utc", "cpus", "ram_gb", "python", "tensorflow", "tfx"):
        assert results["machine"][key]
    [size] = results["sizes"]
    figures = size["median"]
    assert figures["rows"] == 600
    for key in NUMBERS:
        assert figures[key] > 0, key
    for component in COMPONENTS:
        assert component in figures["component_s"]
    assert figures["component_s"]["Transform"] > 0 and figures["component_s"]["Trainer"] > 0
    # Memory while each long component ran (at least the runner's own process).
    assert figures["component_peak_rss_mb"]["Transform"] > 100 and figures["component_peak_rss_mb"]["Trainer"] > 100
    # PSS is polled every PSS_POLL_SECONDS only: Transform, the longest here, has samples.
    assert figures["component_peak_pss_mb"]["Transform"] > 100
    # PSS splits shared pages between processes; RSS counts them in each.
    assert figures["peak_pss_mb"] <= figures["peak_rss_mb"] * 1.05
    assert figures["cached_run_states"]["Transform"] == "cached"
    # Third run: nothing changed, so the Evaluator and Pusher are reused too.
    assert figures["steady_run_states"]["Evaluator"] == "cached"
    assert figures["steady_run_states"]["Pusher"] == "cached"
    table = (out / "results.md").read_text()
    assert "| x0.04 | 600 |" in table and "| Trainer |" in table
    assert "Peak RSS (MB, process tree) while each component ran" in table
    assert "Peak PSS (MB, process tree) while each component ran" in table
    # The template ran on the same data; the ratios use it, not the quoted figures.
    template = figures["template"]
    assert template["wall_s"] > 0 and template["peak_rss_mb"] > 0 and template["peak_pss_mb"] > 0
    assert set(template["component_states"].values()) == {"complete"}
    assert {"CsvExampleGen", "Transform", "Trainer", "Evaluator", "Pusher"} <= set(template["component_s"])
    assert f"| {figures['wall_s'] / template['wall_s']:.2f}x |" in table and "x (quoted) |" not in table
    assert "TFX taxi template, same session and data" in table


def test_template_is_copied_with_every_component_enabled_on_our_data(tmp_path):
    data_dir = write_sample(tmp_path / "data", 50)
    destination = benchmark.prepare_template(tmp_path / "template", data_dir)
    assert "# components.append(" not in (destination / "pipeline" / "pipeline.py").read_text()
    assert (destination / "data").resolve() == data_dir.resolve()
    # The template's own runner, with LocalDagRunner.run replaced by a listing of the DAG.
    listing = subprocess.run(
        [sys.executable, "-c", "import local_runner; from tfx import v1 as tfx; "
         "tfx.orchestration.LocalDagRunner.run = lambda self, p: print('DAG:', ','.join(c.id for c in p.components)); "
         "local_runner.run()"],
        cwd=destination, capture_output=True, text=True, check=True, env={**os.environ, "TF_USE_LEGACY_KERAS": "1"},
    ).stdout
    dag = listing.split("DAG: ", 1)[1].split()[0].split(",")
    # ExampleValidator stays out: the template only appends it when a schema file is given.
    assert sorted(dag) == sorted(["CsvExampleGen", "StatisticsGen", "SchemaGen", "Transform", "Trainer",
                                  "latest_blessed_model_resolver", "Evaluator", "Pusher"])


def test_peak_memory_is_attributed_to_the_component_running_at_the_time():
    from pipeline.run_summary import ComponentRun

    components = [ComponentRun("Transform", "complete", 10.0, started=100.0, finished=110.0),
                  ComponentRun("Trainer", "complete", 5.0, started=110.5, finished=115.5),
                  ComponentRun("Pusher", "cached", 0.0, started=200.0, finished=200.0)]
    samples = [(99.0, 9000.0, 8000.0), (101.0, 800.0, 600.0), (105.0, 1200.0, 1000.0), (109.9, 900.0, 1100.0),
               (111.0, 700.0, 500.0), (113.0, 800.0, None), (115.0, 650.0, 550.0)]
    assert benchmark.peak_by_component(samples, components) == {"Transform": 1200.0, "Trainer": 800.0, "Pusher": 0.0}
    assert benchmark.peak_by_component(samples, components, column=2) == {"Transform": 1100.0, "Trainer": 550.0,
                                                                          "Pusher": 0.0}


def test_table_compares_with_the_template_figures_at_their_sizes():
    figures = {"rows": 1_500_200, "wall_s": 231.5, "component_s": {"CsvExampleGen": 23.5, "Trainer": 40.0},
               "example_gen_rows_per_s": 1_500_200 / 23.5, "peak_rss_mb": 2000, "peak_pss_mb": 1700,
               "max_process_rss_mb": 1500, "cached_wall_s": 60.0, "cached_ratio": 0.26, "steady_wall_s": 25.0,
               "steady_ratio": 0.11, "steady_components": 9, "components": 10, "input_vs_cached_ratio": 0.97,
               "streamed_vs_cached_ratio": 0.5, "in_memory_load_s": 4.0}
    results = {"machine": {"date_utc": "d", "cpus": 2, "ram_gb": 24, "platform": "p", "python": "3.11",
                           "tensorflow": "2.16", "tfx": "1.16", "apache_beam": "2.61"},
               "settings": {"repeats": 1, "runner_args": [], "seed": 0},
               "sizes": [{"size": 100, "median": figures}]}
    table = benchmark.markdown(results)
    assert f"| {231.5 / 463:.2f}x (quoted) |" in table  # wall time against the template's 463 s
    assert f"| {188 / 23.5:.1f}x faster (quoted) |" in table  # ExampleGen against the template's 188 s
    assert "| 1,500,200 | 23.5 | 40.0 |" in table
