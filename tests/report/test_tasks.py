"""The report of a real run of each shipped problem that is not binary: the penguins'
species (multi-class) and body mass (regression), run end to end by ``local_runner`` on
their own data. What the report shows must be what the run computed: the confusion
matrix's counts are TFMA's and add up to the Evaluator's example count, its classes are the
spec's; the residuals are the model's on every eval example and agree with the Evaluator's
own RMSE, MAE and means; and neither page speaks of AUC."""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from models import problem as problem_lib
from pipeline.config import REPO_ROOT, PipelineConfig
from report import read

SVG = "{http://www.w3.org/2000/svg}"
# Small data, a short training: a real run of every component in about 20 seconds.
RUN_FLAGS = ["--infer-schema", "--train-steps", "100", "--no-report"]


def _run(name: str, output_root) -> SimpleNamespace:
    """``local_runner`` on ``data/<name>``; the problem, configuration and run summary."""
    import local_runner
    from report.run_summary import summarize_run

    directory = str(REPO_ROOT / "data" / name)
    assert local_runner.main(["--problem", directory, "--output-root", str(output_root), *RUN_FLAGS]) == 0
    problem = problem_lib.load(directory)
    config = PipelineConfig(problem=problem, output_root=str(output_root), infer_schema=True)
    summary = summarize_run(local_runner.metadata_config(config), config.pipeline_name)
    return SimpleNamespace(problem=problem, config=config, summary=summary)


@pytest.fixture(scope="module")
def species(tmp_path_factory) -> SimpleNamespace:
    run = _run("penguins", tmp_path_factory.mktemp("species"))
    assert run.problem.task == problem_lib.Task.MULTICLASS
    run.report = read.read_report(run.summary, run.problem)
    return run


@pytest.fixture(scope="module")
def body_mass(tmp_path_factory) -> SimpleNamespace:
    run = _run("penguin-body-mass", tmp_path_factory.mktemp("body_mass"))
    assert run.problem.task == problem_lib.Task.REGRESSION
    run.report = read.read_report(run.summary, run.problem)
    return run


def _page(run) -> str:
    from report.write import write_report

    with open(write_report(run.summary, run.config), encoding="utf-8") as f:
        return f.read()


def _plot(page: str, name: str) -> ET.Element:
    """The SVG of the page's plot ``name``, parsed."""
    found = re.search(rf'data-plot="{re.escape(name)}" src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert found, f"no plot {name!r} on the page"
    return ET.fromstring(base64.b64decode(found.group(1)))


def _texts(root: ET.Element) -> list[str]:
    return [element.text for element in root.iter(f"{SVG}text")]


def _overall(report: read.Report) -> dict[str, float]:
    assert report.slices[0].name == "Overall"
    return report.slices[0].metrics


# --- multi-class ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_class_matrix_counts_every_eval_example_under_the_specs_class_names(species):
    report, classes = species.report, list(species.problem.label.classes)
    matrix = report.plots["classes"]
    assert matrix.actual == classes and matrix.predicted[: len(classes)] == classes
    overall = _overall(report)
    assert matrix.total == pytest.approx(overall["example_count"])
    # TFMA's accuracy, computed apart from the matrix, is its diagonal's share.
    diagonal = sum(matrix.counts[i][i] for i in range(len(classes)))
    assert diagonal / matrix.total == pytest.approx(overall["accuracy"], abs=1e-6)
    # Each row holds the examples of its class: as many as StatisticsGen counted in the eval split.
    label_column = {c.name: c for c in report.columns["eval"]}[species.problem.label.column]
    assert {name: sum(row) for name, row in zip(classes, matrix.counts, strict=True)} == pytest.approx(
        {name: count for name, count in label_column.top_values}
    )
    assert not {"roc", "calibration", "confusion"} & set(report.plots)
    assert report.residuals is None and report.unavailable == {}


@pytest.mark.slow
def test_the_multi_class_thresholds_and_training_speak_of_accuracy(species):
    report = species.report
    assert report.thresholds == [f"accuracy at least {species.config.blessing.threshold:g}"]
    assert report.training["monitored"] == "val_accuracy"
    assert {"loss", "accuracy"} <= set(report.curves)


@pytest.mark.slow
def test_the_multi_class_page_shows_the_matrix_and_each_class_and_no_auc(species):
    page = _page(species)
    matrix = species.report.plots["classes"]
    assert "AUC" not in page
    assert not any(f'data-plot="{name}"' in page for name in ("roc", "calibration", "confusion"))
    texts = _texts(_plot(page, "class_confusion"))
    assert set(species.problem.label.classes) <= set(texts)
    assert [f"{count:.0f}" for row in matrix.counts for count in row] == [t for t in texts if t.isdigit()]
    for index, name in enumerate(matrix.actual):
        line = re.search(rf"<li data-class='{name}' data-precision='([^']+)' data-recall='([^']+)'>", page)
        assert line, name
        assert float(line.group(1)) == pytest.approx(matrix.precision(index))
        assert float(line.group(2)) == pytest.approx(matrix.recall(index))
    assert "validation accuracy" in page and 'data-plot="training:accuracy"' in page
    assert "It is blessed on its accuracy" in page
    assert "Not drawn" not in page


# --- regression ----------------------------------------------------------------------------


@pytest.mark.slow
def test_residuals_are_the_models_on_every_eval_example_and_agree_with_the_evaluator(body_mass):
    report = body_mass.report
    found = report.residuals
    assert found is not None, report.unavailable
    overall = _overall(report)
    # The eval split is smaller than the cap: every example read, one residual each.
    assert not found.capped
    assert len(found.actual) == len(found.predicted) == len(found.residuals) == found.rows_read
    assert found.rows_read == overall["example_count"]
    # The same model and examples as the Evaluator's: its metrics, recomputed from the residuals.
    assert found.rmse == pytest.approx(overall["rmse"], rel=1e-4)
    assert sum(map(abs, found.residuals)) / found.rows_read == pytest.approx(overall["mae"], rel=1e-4)
    assert sum(found.actual) / found.rows_read == pytest.approx(overall["mean_label"], rel=1e-5)
    assert sum(found.predicted) / found.rows_read == pytest.approx(overall["mean_prediction"], rel=1e-5)
    assert found.model_dir == body_mass.summary.pushed_to
    assert not {"roc", "calibration", "confusion", "classes"} & set(report.plots)


@pytest.mark.slow
def test_the_regression_thresholds_and_training_speak_of_rmse(body_mass):
    report = body_mass.report
    assert report.thresholds == [f"RMSE at most {body_mass.config.blessing.threshold:g}"]
    assert report.training["monitored"] == "val_rmse"


@pytest.mark.slow
def test_residuals_read_at_most_the_cap_in_the_splits_order(body_mass):
    found = read.residuals(body_mass.summary, body_mass.problem, limit=25)
    assert found.capped and found.rows_read == len(found.actual) == 25
    assert found.actual == body_mass.report.residuals.actual[:25]
    assert found.predicted == pytest.approx(body_mass.report.residuals.predicted[:25], rel=1e-5)


@pytest.mark.slow
def test_without_a_pushed_model_the_trainers_model_predicts(body_mass):
    summary = dataclasses.replace(body_mass.summary, pushed_to=None)
    found = read.residuals(summary, body_mass.problem)
    assert found.model_dir.startswith(body_mass.summary.outputs[read.TRAINER_MODEL])
    assert found.predicted == pytest.approx(body_mass.report.residuals.predicted, rel=1e-5)


@pytest.mark.slow
def test_the_regression_page_shows_both_residual_plots_and_no_auc(body_mass):
    page = _page(body_mass)
    found = body_mass.report.residuals
    assert "AUC" not in page
    assert not any(f'data-plot="{name}"' in page for name in ("roc", "calibration", "confusion", "class_confusion"))
    scatter = _plot(page, "predicted_against_actual")
    assert len([e for e in scatter.iter() if e.get("class") == "point"]) == found.rows_read
    label = body_mass.problem.label.name
    assert {f"actual {label}", f"predicted {label}"} <= set(_texts(scatter))
    histogram = _plot(page, "residuals")
    assert f"actual minus predicted {label}" in _texts(histogram)
    assert f"<span data-residual='rmse'>{found.rmse:.4g}</span>" in page
    assert f"all {found.rows_read} examples of the eval split" in page
    assert "validation RMSE" in page and 'data-plot="training:rmse"' in page
    assert "Not drawn" not in page


@pytest.mark.slow
def test_residuals_that_cannot_be_drawn_say_why_and_the_report_still_renders(body_mass, tmp_path):
    from report.page import render

    outputs = {k: v for k, v in body_mass.summary.outputs.items() if k != read.TRAINER_MODEL}
    no_model = dataclasses.replace(body_mass.summary, pushed_to=None, outputs=outputs)
    report = read.read_report(no_model, body_mass.problem)
    assert report.residuals is None and "no serving model" in report.unavailable["residuals"]
    assert "Residuals</h3><p class='bad'>Not drawn: the run has no serving model" in render(report)

    # Examples that are not gzipped tf.Examples: TensorFlow's error, in words, in the plots' place.
    (tmp_path / read.EVAL_SPLIT_DIR).mkdir()
    (tmp_path / read.EVAL_SPLIT_DIR / "data_tfrecord-00000-of-00001.gz").write_bytes(b"not a record")
    examples = next(k for k in body_mass.summary.outputs if k.endswith(read.EXAMPLES))
    broken = dataclasses.replace(body_mass.summary, outputs={**body_mass.summary.outputs, examples: str(tmp_path)})
    report = read.read_report(broken, body_mass.problem)
    assert report.residuals is None
    assert report.unavailable["residuals"].startswith("DataLossError: ") and "function_node" not in str(
        report.unavailable
    )
    page = render(report)
    assert "Not drawn: " in page and 'data-plot="residuals"' not in page and "id='metrics'" in page


# --- both: what the model looks at ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("run_name", ["species", "body_mass"])
def test_importance_starts_from_the_evaluators_own_metric_and_covers_every_served_column(run_name, request):
    run = request.getfixturevalue(run_name)
    found, problem = run.report.importance, run.problem
    assert found is not None, run.report.unavailable
    metric = problem.blessing.metric
    # Every eval example (fewer than the cap here), so the same value the Evaluator computed.
    assert found.rows == int(_overall(run.report)["example_count"])
    assert found.baseline == pytest.approx(run.summary.metrics[metric], rel=1e-4)
    served = set(problem.served_columns)
    assert {c.column for c in found.columns} == served
    assert max(c.drop for c in found.columns) > 0  # the model leans on something
    page = _page(run)
    assert "<h2>What the model looks at</h2>" in page
    assert all(f"data-column='{c}'" in page for c in served)


# --- both, in a browser --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("run_name", ["species", "body_mass"])
def test_each_page_loads_in_a_browser_with_every_plot_drawn(run_name, request):
    from report.write import write_report
    from tests.support.browser import errors, open_page

    run = request.getfixturevalue(run_name)
    path = write_report(run.summary, run.config)
    opened = open_page(path)
    drawn = opened["plots"]
    assert errors(opened) == []
    assert opened["requests"] == [f"file://{path}"]
    expected = {"species": {"class_confusion"}, "body_mass": {"predicted_against_actual", "residuals"}}[run_name]
    assert expected <= {name for name, _, _, _ in drawn}
    assert all(complete and width > 100 and height > 100 for _, complete, width, height in drawn)


# --- the report's code names no column -----------------------------------------------------


def test_the_report_code_names_none_of_the_taxi_problems_columns():
    """The report is the problem's: the example problem's column and label names come from
    its spec at run time, never from the report's code."""
    taxi = problem_lib.load(str(REPO_ROOT / "data" / "taxi"))
    names = set(taxi.raw_columns) | {taxi.label.name}
    code = {
        path: (REPO_ROOT / "report" / path).read_text(encoding="utf-8")
        for path in sorted(os.listdir(REPO_ROOT / "report"))
        if path.endswith(".py")
    }
    assert len(code) >= 5
    found = {(path, name) for path, text in code.items() for name in names if re.search(rf"\b{name}\b", text)}
    assert found == set()
