"""bench/report.py: the Markdown table, and the template's quoted figures it compares with."""

from __future__ import annotations

from bench import report
from tests.support.sample_data import EMBEDDED_ROWS


def test_table_compares_with_the_template_figures_at_their_sizes():
    figures = {
        "rows": 1_500_200,
        "wall_s": 231.5,
        "component_s": {"CsvExampleGen": 23.5, "Trainer": 40.0},
        "example_gen_rows_per_s": 1_500_200 / 23.5,
        "peak_rss_mb": 2000,
        "peak_pss_mb": 1700,
        "max_process_rss_mb": 1500,
        "cached_wall_s": 60.0,
        "cached_ratio": 0.26,
        "steady_wall_s": 25.0,
        "steady_ratio": 0.11,
        "steady_components": 9,
        "components": 10,
        "input_vs_cached_ratio": 0.97,
        "streamed_vs_cached_ratio": 0.5,
        "in_memory_load_s": 4.0,
    }
    results = {
        "machine": {
            "date_utc": "d",
            "cpus": 2,
            "ram_gb": 24,
            "platform": "p",
            "python": "3.11",
            "tensorflow": "2.16",
            "tfx": "1.16",
            "apache_beam": "2.61",
        },
        "settings": {"repeats": 1, "runner_args": [], "seed": 0},
        "sizes": [{"size": 100, "median": figures}],
    }
    table = report.markdown(results)
    quoted = report.TEMPLATE_REFERENCE["figures_by_rows"][1_500_200]
    assert f"| {231.5 / quoted['wall_s']:.2f}x (quoted) |" in table  # wall time against the template's
    assert f"| {quoted['example_gen_s'] / 23.5:.1f}x faster (quoted) |" in table  # ExampleGen against its
    assert "| 1,500,200 | 23.5 | 40.0 |" in table


def test_template_reference_loads_with_its_provenance_and_figures():
    """bench/template_reference.json: the figures template_figures() quotes at the sizes the
    benchmark is run at (x1, x10, x100 the embedded data), and where they come from."""
    reference = report.load_template_reference()
    for key in ("source", "measured_on", "machine", "reference"):
        assert reference[key], key
    for size in (1, 10, 100):
        quoted = reference["figures_by_rows"][size * EMBEDDED_ROWS]
        assert quoted["wall_s"] > 0 and quoted["example_gen_s"] > 0
        assert report.template_figures({"rows": size * EMBEDDED_ROWS}) == quoted
    assert report.template_figures({"rows": 7}) is None


def test_the_third_run_says_whether_tfx_started():
    assert report._steady_states({"steady_reused": True, "steady_components": 0, "components": 11}) == (
        "unchanged: TFX not started"
    )
    assert report._steady_states({"steady_reused": False, "steady_components": 9, "components": 11}) == "9/11"


def test_each_task_is_shown_beside_the_binary_run_with_its_evaluator_ratio():
    def run(evaluator: float, **extra) -> dict:
        return {
            "wall_s": 100.0,
            "peak_pss_mb": 1500,
            "component_s": {"Trainer": 30.0, "Evaluator": evaluator},
            "component_peak_pss_mb": {"Trainer": 1400, "Evaluator": 1200},
            **extra,
        }

    scaffolded = {"scaffold_s": 12.5, "scaffold_peak_pss_mb": 400}
    figures = {
        "rows": 1_500_200,
        **run(20.0),
        "tasks": {"multiclass": run(25.0, **scaffolded), "regression": run(40.0, **scaffolded)},
    }
    lines = report._tasks_table([{"size": 100, "median": figures}], ["Trainer", "Evaluator"])
    seconds, memory = ({}, {})
    for line in (line for line in lines if line.startswith("| 1,500,200 | ")):
        (memory if line.split(" | ")[1] in seconds else seconds)[line.split(" | ")[1]] = line
    rows = seconds
    assert rows["binary"].startswith("| 1,500,200 | binary | - | - | 100.0 | 1500 | 30.0 | 20.0 | 1.00x")
    assert "| 12.5 | 400 |" in rows["multiclass"] and rows["multiclass"].endswith("| 25.0 | 1.25x |")
    assert rows["regression"].endswith("| 40.0 | 2.00x |")
    assert memory["regression"] == "| 1,500,200 | regression | 1400 | 1200 |"  # peak PSS per component
    assert report._tasks_table([{"size": 100, "median": {"rows": 10}}], ["Trainer"]) == []
