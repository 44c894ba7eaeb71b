"""bench/datasets.py's probes: chosen by name only, their added columns seeded, and what the
scaffold makes of those columns (the default data sets are tests/bench/test_quality.py's)."""

from __future__ import annotations

import pandas as pd
import pytest

from authoring import scaffold
from bench import datasets


def test_probes_are_chosen_by_name_never_by_default():
    assert not set(datasets.PROBES) & set(datasets.DATASETS)
    assert [d.name for d in datasets.chosen(None)] == list(datasets.DATASETS)
    assert [d.name for d in datasets.chosen("credit-probe, credit")] == ["credit-probe", "credit"]
    with pytest.raises(ValueError, match="known: .*credit-probe"):
        datasets.chosen("credit-probes")


def test_the_noise_columns_are_seeded_and_carry_no_row_of_the_data():
    data = pd.DataFrame({"a": range(300), "label": ["x", "y", "z"] * 100})
    noisy = datasets.with_noise_columns(data)
    assert list(noisy.columns) == ["customer_id", "branch", "opened", "notes", "a", "label"]
    pd.testing.assert_frame_equal(noisy, datasets.with_noise_columns(data))
    assert not noisy.equals(datasets.with_noise_columns(data, seed=1))
    pd.testing.assert_frame_equal(noisy[["a", "label"]], data)
    assert noisy["customer_id"].is_unique and set(noisy["branch"]) == {"main"}
    assert pd.to_datetime(noisy["opened"], format="%Y-%m-%d").between(*datasets.PROBE_DATES).all()
    assert 0.3 < noisy["notes"].isna().mean() < 0.5


@pytest.mark.usefixtures("loopback_only")
def test_the_scaffold_leaves_out_the_id_and_constant_and_reads_the_date_and_notes(tmp_path):
    probe = datasets.PROBES["credit-probe"]
    csv_path = tmp_path / "credit-probe.csv"
    data = probe.write_csv(str(csv_path))
    assert len(data) == probe.rows == datasets.PROBES["credit"].rows
    plan = scaffold.plan(str(csv_path), probe.label, task=probe.task, name=probe.name)
    kinds = {c.name: (c.kind, c.date_format, c.min_count) for c in plan.columns}
    assert kinds["customer_id"][0] == kinds["branch"][0] == "unused"
    assert kinds["opened"] == ("date", "%Y-%m-%d", 0)
    assert kinds["notes"] == ("categorical", "", scaffold.VOCAB_MIN_COUNT)
