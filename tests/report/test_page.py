"""The page, from a report put together by hand: sections present only for what the run
produced, text escaped, the verdict and the drift said plainly."""

from __future__ import annotations

from report.page import render
from report.read import ClassConfusion, Column, Report, Residuals, SliceMetrics, describe_metric
from report.run_summary import ComponentRun, RunSummary


def _report(**summary_fields) -> Report:
    components = [
        ComponentRun("CsvExampleGen", "complete", 1.0, 100.0, 101.0),
        ComponentRun("Trainer", "FAILED", 2.0, 101.0, 103.0),
    ]
    return Report(RunSummary(run_id="run-<1>", components=components, **summary_fields))


def test_a_run_stopped_early_shows_what_it_got_to():
    page = render(_report())
    assert "<title>Run run-&lt;1&gt;</title>" in page  # escaped
    assert "id='run'" in page and 'data-plot="timeline"' in page
    assert "id='evaluation'" not in page and "id='training'" not in page
    assert "Nothing pushed in this run." in page
    assert "Configuration</h2><p>Not recorded with this run" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_columns_slices_verdict_and_drift():
    report = _report(
        blessed=False,
        validation_failures=["auc: 0.7 < 0.9"],
        drift={
            "baseline": "/b",
            "serving": None,
            "accepted": True,
            "drift": [
                dict(
                    split="train",
                    feature="fare",
                    measure="Jensen-Shannon divergence",
                    value=0.7,
                    threshold=0.05,
                    breached=True,
                )
            ],
        },
    )
    report.columns = {
        split: [
            Column("fare", "number", 10, 0.0, quantiles=[(0.0, 5.0, 5.0), (5.0, 10.0, 5.0)]),
            Column("payment_type", "text", 10, 0.1, top_values=[("Cash", 6.0), ("<b>", 3.0)]),
        ]
        for split in ("train", "eval")
    }
    report.anomalies = []
    report.slices = [
        SliceMetrics("Overall", {"auc": 0.7, "example_count": 10.0}),
        SliceMetrics("payment_type = Cash", {"auc": 0.8}),
    ]
    report.baseline = {"auc": {"baseline": 0.75, "change": -0.05}, "example_count": {"baseline": 10.0}}
    page = render(report, {"train_steps": 400})
    assert "Against the baseline model (overall)" in page and "data-change='auc'>-0.0500<" in page
    assert "data-change='example_count'" not in page
    assert "NOT blessed: auc: 0.7 &lt; 0.9" in page
    assert "Drift: ACCEPTED with --accept-drift" in page and "<td class='bad'>over</td>" in page
    assert "No anomalies: the data meets its contract." in page
    assert 'data-plot="column:fare"' in page and 'data-plot="column:payment_type"' in page
    assert "data-metric='auc' data-value='0.7'>0.7000<" in page and ">10<" in page
    assert "<tr data-slice='payment_type = Cash'>" in page
    assert "<code>400</code>" in page


def test_numbers_are_drawn_on_buckets_every_split_shares():
    from report.plots import shared_boundaries

    train = Column("fare", "number", 10, 0.0, quantiles=[(0.0, 4.0, 5.0), (4.0, 12.0, 4.0), (12.0, 700.0, 1.0)])
    eval_ = Column("fare", "number", 5, 0.0, quantiles=[(1.0, 5.0, 3.0), (5.0, 9.0, 2.0)])
    # The train split's interior bounds (4 and 12), cut in equal widths: 700 stays out of them.
    assert shared_boundaries({"train": train, "eval": eval_}, bins=4) == [4.0, 6.0, 8.0, 10.0, 12.0]


def test_the_training_section_says_what_the_schedule_decided():
    report = _report()
    report.curves = {"auc": {"train": [(0, 0.8), (1, 0.85)], "validation": [(0, 0.82), (1, 0.81)]}}
    record = dict(strategy="MirroredStrategy", reason="r", replicas=1, workers=1, global_batch=256, epochs=4)
    report.training = {**record, "steps_per_epoch": 100, "last_epoch": 2, "stopped_early_at_epoch": 2}
    report.training.update(best_epoch=0, best_val_auc=0.91234, final_learning_rate=0.00025)
    page = render(report)
    assert "Schedule: stopped early after epoch 3; ended with epoch 1&#x27;s weights (validation AUC 0.9123)" in page
    assert "final learning rate 0.00025" in page
    report.training.update(stopped_early_at_epoch=None, best_epoch=2)
    page = render(report)
    assert "stopped early" not in page and "ended with epoch" not in page
    assert "4 epoch(s) of 100 steps.</p>" in page


def _trained_by(chosen, **record) -> Report:
    """A report whose Trainer ran the budget ``chosen`` (batch 256), ``record`` added to its
    training record."""
    report = _report()
    report.curves = {"auc": {"train": [(0, 0.8), (1, 0.85)], "validation": [(0, 0.82), (1, 0.81)]}}
    report.training = dict(
        strategy="MirroredStrategy", reason="r", replicas=1, workers=1, global_batch=256, epochs=chosen.epochs
    )
    report.training.update(steps_per_epoch=chosen.steps_per_epoch, budget=chosen.to_record(), **record)
    return report


def test_the_training_section_says_why_it_trained_that_long():
    from models import budget

    chosen = budget.from_data(12_345, 256)
    page = render(_trained_by(chosen))
    assert f"{chosen.epochs} epoch(s) of {chosen.steps_per_epoch} steps: until the validation metric" in page
    assert "12,345 training rows" in page


def _problem(name: str):
    from models import problem as problem_lib
    from pipeline.config import REPO_ROOT

    return problem_lib.load(str(REPO_ROOT / "data" / name))


def _evaluated(problem, metrics: dict[str, float]) -> Report:
    report = _report(blessed=True)
    report.problem = problem
    report.slices = [SliceMetrics("Overall", metrics)]
    return report


def test_a_multi_class_page_shows_the_classes_matrix_and_speaks_of_accuracy():
    problem = _problem("penguins")
    classes = list(problem.label.classes)
    report = _evaluated(problem, {"accuracy": 0.9, "example_count": 60.0})
    counts = [[20.0, 2.0, 0.0], [3.0, 15.0, 0.0], [0.0, 1.0, 19.0]]
    report.plots = {"classes": ClassConfusion(classes, classes, counts)}
    report.thresholds = ["accuracy at least 0.9"]
    report.curves = {
        name: {"train": [(0, 0.5), (1, 0.6)], "validation": [(0, 0.55), (1, 0.6)]}
        for name in ("loss", "accuracy", "lr")
    }
    report.training = dict(
        strategy="MirroredStrategy", reason="r", replicas=1, workers=1, global_batch=64, epochs=2, steps_per_epoch=5
    )
    report.training.update(task="multiclass", monitored="val_accuracy", best_epoch=0, last_epoch=1)
    report.training["best_val_accuracy"] = 0.95
    page = render(report)
    assert "AUC" not in page and 'data-plot="roc"' not in page and 'data-plot="calibration"' not in page
    assert 'data-plot="class_confusion"' in page
    assert "It is blessed on its accuracy over the whole eval split" in page
    assert f"Confusion matrix between the classes of {problem.label.name}" in page
    assert "<li>accuracy at least 0.9</li>" in page
    # Gentoo: 19 of the 19 predicted Gentoo, 19 of the 20 that are.
    third = classes[2]
    assert f"{third}: precision 1.000 (19 of the 19 predicted {third}), recall 0.950 (19 of the 20 that are)" in page
    assert "ended with epoch 1&#x27;s weights (validation accuracy 0.9500)" in page
    assert "The schedule watched the validation accuracy of" in page
    assert 'data-plot="training:accuracy"' in page and 'data-plot="training:loss"' in page
    assert 'data-plot="training:lr"' not in page


def test_a_multi_class_page_without_its_matrix_says_so():
    report = _evaluated(_problem("penguins"), {"accuracy": 0.9})
    page = render(report)
    assert "Not drawn: the evaluation holds no multi-class confusion matrix" in page


def test_a_regression_page_shows_residuals_and_their_summary():
    problem = _problem("penguin-body-mass")
    report = _evaluated(problem, {"rmse": 1.0, "example_count": 4.0})
    report.thresholds = ["RMSE at most 450"]
    actual, predicted = [3000.0, 3500.0, 4000.0, 5000.0], [3100.0, 3400.0, 4100.0, 4800.0]
    report.residuals = Residuals(problem.label.name, actual, predicted, rows_read=4, capped=True, model_dir="/m")
    page = render(report)
    assert "AUC" not in page and 'data-plot="roc"' not in page
    assert 'data-plot="predicted_against_actual"' in page and 'data-plot="residuals"' in page
    assert "It is blessed on its RMSE" in page and "<li>RMSE at most 450</li>" in page
    assert "On the first 4 examples of the eval split" in page
    # Actual minus predicted: -100, 100, -100, 200.
    assert f"<span data-residual='mean'>{report.residuals.mean:.4g}</span>" in page
    assert report.residuals.mean == 25.0 and report.residuals.residuals == [-100.0, 100.0, -100.0, 200.0]
    assert f"<span data-residual='rmse'>{report.residuals.rmse:.4g}</span>" in page


def test_residuals_that_could_not_be_read_say_why():
    report = _evaluated(_problem("penguin-body-mass"), {"rmse": 1.0})
    report.unavailable["residuals"] = "the run has no serving model <here>"
    page = render(report)
    assert "<h3>Residuals</h3><p class='bad'>Not drawn: the run has no serving model &lt;here&gt;</p>" in page
    assert 'data-plot="residuals"' not in page


def test_without_a_problem_the_task_comes_from_the_training_record():
    report = _report(blessed=True)
    report.slices = [SliceMetrics("Overall", {"rmse": 1.0})]
    report.training = {"task": "regression"}
    assert "Residuals" in render(report) and "AUC" not in render(report)


def test_residuals_that_are_not_numbers_are_left_out_of_the_plots_and_said():
    import base64

    problem = _problem("penguin-body-mass")
    report = _evaluated(problem, {"rmse": 1.0})
    nan = float("nan")
    report.residuals = Residuals(problem.label.name, [1.0, 2.0, 3.0], [1.5, nan, 2.0], 3, False, "/m")
    page = render(report)
    assert "1 of them have an actual or predicted value that is not a finite number" in page
    svg = page.split('data-plot="predicted_against_actual" src="data:image/svg+xml;base64,')[1].split('"')[0]
    assert base64.b64decode(svg).decode().count("class='point'") == 2
    report.residuals = Residuals(problem.label.name, [nan], [1.0], 1, False, "/m")
    assert "Not drawn: no example to draw." in render(report)


def test_the_history_shows_the_metric_over_runs_and_the_champion_after_each():
    from report.history import Entry
    from tests.support.problems import TAXI

    runs = [
        Entry("r1", "t", "blessed", "auc", 0.91, span=1, window="1", pushed=True, drift="no baseline"),
        Entry("r2", "t", "failed: DriftGate", "auc", None, span=2, window="1-2", drift="breached: the run stopped"),
        Entry("r3", "t", "not blessed", "auc", 0.90, span=3, window="1-3", drift="within"),
        Entry("r4", "t", "blessed", "auc", 0.93, span=4, window="1-4", pushed=True, drift="within"),
    ]
    report = _report()
    report.problem, report.history = TAXI, runs
    page = render(report)
    assert "id='history'" in page and 'data-plot="history"' in page
    rows = page.split("id='history'")[1].split("<tr>")[2:]
    assert [row.split("<td>")[1].split("<")[0] for row in rows] == ["r1", "r2", "r3", "r4"]
    assert ["this run" in rows[0], "kept" in rows[1], "kept" in rows[2], "this run" in rows[3]] == [True] * 4
    assert "blessed, pushed" in rows[3] and "failed: DriftGate" in rows[1]
    # The threshold line is the evaluation's own when it has one (a --blessing-threshold), not the spec's.
    image = page.split('data-plot="history" src="')[1].split('"')[0]
    report.bounds = {TAXI.blessing.metric: {"at least": TAXI.blessing.threshold + 0.05}}
    assert render(report).split('data-plot="history" src="')[1].split('"')[0] != image


def test_no_history_no_section():
    assert "id='history'" not in render(_report())


# The run's components in the order the pipeline runs them (pipeline/pipeline.py).
NODES = (
    "CsvExampleGen",
    "StatisticsGen",
    "ImportSchemaGen",
    "ExampleValidator",
    "AnomalyGate",
    "Champion",
    "DriftGate",
    "Transform",
    "Trainer",
    "Evaluator",
    "Pusher",
)


def _ran(until: str | None = None, failed: bool = False, **summary_fields) -> Report:
    """A run of every component (up to ``until``, which ``failed`` or completed)."""
    nodes = NODES if until is None else NODES[: NODES.index(until) + 1]
    components = [
        ComponentRun(node, "FAILED" if failed and node == until else "complete", 1.0, 100.0 + i, 101.0 + i)
        for i, node in enumerate(nodes)
    ]
    return Report(RunSummary(run_id="r", components=components, **summary_fields))


def _facts(page: str) -> dict[str, tuple[str, str]]:
    """The verdict's rows: key -> (class, HTML)."""
    import re

    verdict = page.split("<section id='verdict'>")[1].split("</section>")[0]
    rows = re.findall(r"<tr data-fact='([^']+)'><th>.*?</th><td class='([^']*)'>(.*?)</td></tr>", verdict)
    return {key: (kind, text) for key, kind, text in rows}


def _headline(page: str) -> str:
    return page.split("<section id='verdict'><p class='verdict ")[1].split("</p>")[0]


def test_the_verdict_comes_first_with_the_metric_against_threshold_and_champion():
    from tests.support.problems import TAXI

    metric, value, champion = TAXI.blessing.metric, 0.9412, 0.9390
    floor, allowed = TAXI.blessing.threshold, TAXI.blessing.max_regression
    drift = {"baseline": "/b", "serving": None, "accepted": False, "drift": []}
    drift["drift"].append(dict(split="eval", feature="c", measure="JS", value=0.01, threshold=0.05, breached=False))
    report = _ran(metrics={metric: value}, blessed=True, had_baseline=True, pushed_to="/serving/<7>", drift=drift)
    report.problem, report.anomalies = TAXI, []
    report.baseline = {metric: {"baseline": champion, "change": value - champion}}
    report.bounds = {metric: {"at least": floor, "change": allowed}}
    report.slices = [SliceMetrics("Overall", {metric: value})]
    page = render(report, {"train_steps": 400})
    body = page.split("<body>")[1]
    assert body.index("<section") == body.index("<section id='verdict'>")  # the first section
    assert body.index("id='verdict'") < body.index("id='run'") < body.index("id='configuration'")
    assert _headline(page) == "good'>BLESSED"
    facts = _facts(page)
    assert facts["metric"][0] == "good" and f"{value:.4f}</b>, required at least {floor:g}: met" in facts["metric"][1]
    words = describe_metric(metric)
    shown = f"champion's {words} {champion:.4f}, this model <span data-change>{value - champion:+.4f}</span>"
    assert facts["champion"][1].startswith(shown)
    assert f"(allowed to be worse by {allowed:.4g})" in facts["champion"][1]
    assert facts["pushed"] == ("good", "<code>/serving/&lt;7&gt;</code>")
    assert facts["validator"] == ("good", "no anomaly: the data meets its contract")
    assert facts["anomaly-gate"] == ("good", "passed (complete)")
    assert facts["drift-gate"][0] == "good" and facts["drift-gate"][1].startswith("within the contract against")
    assert "look" not in facts


def test_a_model_under_its_floor_is_not_blessed_and_the_verdict_says_where_to_look():
    from tests.support.problems import TAXI

    metric, floor = TAXI.blessing.metric, 0.95
    failure = f"{metric} 0.9000, under its floor {floor:g}"
    report = _ran(metrics={metric: 0.9}, blessed=False, validation_failures=[failure])
    report.problem, report.bounds = TAXI, {metric: {"at least": floor}}
    report.anomalies = ["[train] column 'c': unexpected values", "[eval] column 'c': unexpected values"]
    report.slices = [SliceMetrics("Overall", {metric: 0.9})]
    page = render(report)
    assert _headline(page) == f"bad'>NOT blessed: {failure}"
    facts = _facts(page)
    assert facts["metric"][0] == "bad" and facts["metric"][1].endswith(f"required at least {floor:g}: missed")
    assert facts["champion"][1] == "none yet: the first model is judged against the threshold alone"
    assert facts["pushed"] == ("", "nothing pushed in this run (the model was not blessed)")
    assert facts["validator"] == ("bad", "2 anomalies (see <a href='#anomalies'>the data's anomalies</a>)")
    assert facts["drift-gate"] == ("good", "passed (complete)")
    assert facts["look"][1] == "why it was not blessed: <a href='#evaluation'>Evaluation</a>"


def test_an_error_metric_is_judged_against_its_ceiling():
    problem = _problem("penguin-body-mass")
    metric, ceiling = problem.blessing.metric, problem.blessing.threshold
    for value, outcome in ((ceiling * 0.9, "met"), (ceiling * 1.1, "missed")):
        report = _ran(metrics={metric: value}, blessed=outcome == "met")
        report.problem = problem  # no evaluation bounds: the problem's own ceiling
        assert _facts(render(report))["metric"][1].endswith(f"required at most {ceiling:g}: {outcome}")


def test_without_a_problem_the_one_bounded_metric_is_the_blessing_metric():
    report = _ran(metrics={"rmse": 3.0, "mae": 2.0}, blessed=True)
    report.bounds = {"rmse": {"at most": 4.0}}
    assert _facts(render(report))["metric"] == ("good", "RMSE <b data-value='3.0'>3.0000</b>, required at most 4: met")


def test_a_failed_run_names_the_component_its_section_the_error_and_the_log():
    from tests.support.problems import TAXI

    report = _ran("Trainer", failed=True)
    report.problem, report.anomalies = TAXI, []
    report.failure, report.failure_log = "KeyError: 'x' (models/model.py, line 3, in f)", "/logs/failure-<1>.txt"
    page = render(report)
    assert _headline(page) == "bad'>The run FAILED at Trainer"
    facts = _facts(page)
    # No training section: the run stopped before the Trainer had anything to show.
    assert "id='training'" not in page
    assert facts["look"][1].startswith("Trainer: <a href='#run'>The run</a>; the error: <code>KeyError: &#x27;x&#x27;")
    assert facts["look"][1].endswith("its whole log: <code>/logs/failure-&lt;1&gt;.txt</code>")
    assert f"{describe_metric(TAXI.blessing.metric)}: not evaluated in this run" in facts["metric"][1]
    report.curves = {"loss": {"train": [(0, 1.0)], "validation": [(0, 1.1)]}}
    assert _facts(render(report))["look"][1].startswith("Trainer: <a href='#training'>Training</a>")


def test_a_gate_that_stopped_the_run_points_to_its_part_of_the_data_section():
    for gate, anchor in (("AnomalyGate", "anomalies"), ("DriftGate", "drift")):
        report = _ran(gate, failed=True)
        report.columns = {"train": [Column("c", "number", 10, 0.0)]}
        page = render(report)
        facts = _facts(page)
        key = {"AnomalyGate": "anomaly-gate", "DriftGate": "drift-gate"}[gate]
        assert facts[key][0] == "bad" and "stopped the run" in facts[key][1] and f"href='#{anchor}'" in facts[key][1]
        assert f"id='{anchor}'" in page and facts["look"][1].startswith(f"{gate}: <a href='#{anchor}'>")
        assert facts["pushed"] == ("", "nothing pushed in this run")
    assert facts["drift-gate"][1].startswith("stopped the run")
    report = _ran("ExampleValidator")
    assert _facts(render(report))["drift-gate"] == ("", "did not run")


def test_a_failure_after_the_evaluator_still_says_the_verdict():
    report = _ran("Pusher", failed=True, blessed=True)
    assert _headline(render(report)) == "bad'>The run FAILED at Pusher; BLESSED"


def test_the_configuration_is_a_table_of_settings_nested_settings_indented_under_their_key():
    import re

    from pipeline.config import PipelineConfig
    from report.write import settings

    config = settings(PipelineConfig())
    config["pools"] = [{"kind": "chief", "replicas": 1}, {"kind": "worker", "replicas": 3}]
    page = render(_report(), config)
    table = page.split("<table id='settings'>")[1].split("</table>")[0]
    assert "{" not in table and "(" not in table.replace("padding-left", "") and "[" not in table  # no repr
    rows = re.findall(r"<tr (?:class='group' )?data-setting='([^']+)' data-depth='(\d)'><td[^>]*>([^<]*)</td>", table)
    depth = {path: int(level) for path, level, _ in rows}

    def leaves(value, path):
        if isinstance(value, dict) and value:
            for key, entry in value.items():
                yield from leaves(entry, f"{path}.{key}")
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            for index, entry in enumerate(value, 1):
                yield from leaves(entry, f"{path}.{index}")
        else:
            yield path, value

    shown = {path for path, _, _ in rows}
    for key, value in config.items():
        for path, _ in leaves(value, key):
            assert path in shown and depth[path] == path.count("."), path
    blessing = PipelineConfig().problem.blessing
    assert (
        "data-setting='problem.blessing.threshold' data-depth='2'><td style='padding-left: 3.7em'>threshold</td>"
        f"<td><code>{blessing.threshold}</code>" in table
    )
    assert "<tr class='group' data-setting='pools.2' data-depth='1'>" in table
    assert "data-setting='pools.2.replicas' data-depth='2'><td style='padding-left: 3.7em'>replicas</td>" in table
    # Crosses: a list of lists, each entry a row of its own.
    first_cross = ", ".join(PipelineConfig().problem.features.crosses[0])
    assert (
        "data-setting='problem.features.crosses.1' data-depth='3'" in table and f"<code>{first_cross}</code>" in table
    )
    assert (
        "data-setting='blessing_threshold' data-depth='0'><td style='padding-left: 0.7em'>blessing_threshold</td>"
        in table
    )
    assert "<td>extra_beam_args</td>" not in table and "<code>not set</code>" in table and "<code>false</code>" in table


def test_columns_renamed_from_their_header_are_shown_by_both_names():
    from tests.support.problems import binary_problem

    problem, features = binary_problem(["Fare ($)", "Payment Type", "Big Tip?"], categorical=("Payment Type",))
    fare, payment, label = features.values()
    report = _report(drift={"baseline": "/b", "serving": None, "accepted": False, "drift": []})
    report.problem = problem
    report.columns = {"train": [Column(fare, "number", 10, 0.0, quantiles=[(0.0, 5.0, 5.0)])]}
    report.slices = [SliceMetrics("Overall", {"auc": 0.7}), SliceMetrics(f"{payment} = Cash", {"auc": 0.8})]
    report.boundaries, report.vocabularies = {fare: [1.0, 2.0]}, {"vocabulary": 3}
    page = render(report)
    assert page.count(f"<td>Fare ($) ({fare})</td>") == 2  # the data's columns, the bucket boundaries
    assert f"<figcaption>Fare ($) ({fare}): train</figcaption>" in page
    assert f"<td>Payment Type ({payment}) = Cash</td>" in page and f"data-slice='{payment} = Cash'" in page
    assert f"from the CSV&#x27;s Big Tip? ({label})" in page


def test_the_training_section_of_trees_tells_the_forest_not_epochs():
    report = _report()  # no curves: the trees write no TensorBoard logs
    report.training = dict(
        family="trees", trees=294, features=15, trained_seconds=12.5, reason="YDF trains on this process's CPU threads"
    )
    report.training["training_logs"] = {"loss": 0.25, "accuracy": 0.9}
    page = render(report)
    assert "Gradient-boosted trees (YDF): 294 trees over 15 features, grown in 12.5 s" in page
    assert "held out for early stopping: loss 0.2500" in page and "epoch" not in page.split("id='training'")[1][:400]


def test_what_the_model_looks_at_lists_columns_by_drop_and_the_worst_slices():
    from report.importance import ColumnImportance, Importance, Slice

    report = _report()
    report.importance = Importance(
        metric="auc",
        higher_is_better=True,
        baseline=0.9312,
        columns=[ColumnImportance("payment_type", 0.31, 0.004), ColumnImportance("fare", 0.0, 0.0)],
        slices=[Slice("company", "missing", 66, 0.8812)],
        rows=2000,
        repeats=3,
        model_dir="/m/1",
        seconds=2.0,
    )
    page = render(report)
    section = page[page.index("<section id='importance'>") :]
    assert "on 2000 examples of the eval split" in section and "0.9312" in section and "3 times" in section
    assert section.index("data-column='payment_type'") < section.index("data-column='fare'")
    assert "+0.31" in section and "<td>missing</td><td class='num'>66</td><td class='num'>0.8812</td>" in section


def test_importance_that_could_not_be_measured_says_why():
    report = _report()
    report.unavailable["importance"] = "the run has no serving model"
    assert "Not measured: the run has no serving model" in render(report)
    assert "id='importance'" not in render(_report())  # nothing to say: no section


def test_the_training_section_says_how_much_of_the_data_the_model_saw_and_the_flag_for_more():
    from models import budget

    capped = budget.from_data(10_000_000, 256)
    page = render(_trained_by(capped, last_epoch=1))
    seen = 2 * capped.steps_per_epoch * 256
    assert f"The model saw {seen:,} of the 10,000,000 training rows" in page
    assert "--hparam max_rows_seen=10000000 would show it every row once" in page


def test_the_training_section_says_how_the_family_was_chosen():
    from models.choice import Choice, Trial
    from models.problem import ModelFamily

    trials = (Trial(ModelFamily.NETWORK, 0.81, 20.0), Trial(ModelFamily.TREES, 0.84, 4.0))
    chosen = Choice(ModelFamily.TREES, "auc", "", trials, 800, 200)
    report = _report()
    report.training = dict(family="trees", trees=40, features=15, trained_seconds=1.5, reason="YDF", choice=None)
    assert "Family:" not in render(report)
    report.training["choice"] = chosen.to_record()
    said = chosen.describe()
    assert f"Family: {said[0].upper()}{said[1:]}." in render(report)
