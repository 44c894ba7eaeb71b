"""The page, from a report put together by hand: sections present only for what the run
produced, text escaped, the verdict and the drift said plainly."""

from __future__ import annotations

from pipeline.report.page import render
from pipeline.report.read import Column, Report, SliceMetrics
from pipeline.run_summary import ComponentRun, RunSummary


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
    assert "Configuration: not recorded" in page
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
    from pipeline.report.plots import shared_boundaries

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
