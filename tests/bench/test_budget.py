"""The budget benchmark's bookkeeping (its runs are whole pipelines: run by hand)."""

from __future__ import annotations

import json

from bench import budget


def test_the_fixed_setting_passes_its_steps_and_the_budget_passes_none():
    assert budget.settings(400) == {"budget": [], "400 steps": ["--train-steps", "400"]}


def test_caps_on_rows_seen_replace_the_fixed_setting():
    assert budget.settings(400, [1_000_000, 3_000_000]) == {
        "at most 1,000,000 rows seen": ["--hparam", "max_rows_seen=1000000"],
        "at most 3,000,000 rows seen": ["--hparam", "max_rows_seen=3000000"],
    }


def test_the_steps_run_come_from_the_trainers_record(tmp_path):
    run = tmp_path / "pipelines" / "p" / "Trainer" / "model_run" / "7"
    run.mkdir(parents=True)
    record = {"last_epoch": 5, "steps_per_epoch": 40, "global_batch": 64, "epochs": 10, "budget": {"max_steps": 400}}
    (run / "training.json").write_text(json.dumps(record))
    assert budget.trained_steps(tmp_path) == {
        "epochs_run": 6,
        "steps_run": 240,
        "rows_seen": 240 * 64,
        "max_steps": 400,
    }
    # A fixed step count has no budget: its cap is epochs x steps.
    record.pop("budget")
    (run / "training.json").write_text(json.dumps(record))
    assert budget.trained_steps(tmp_path)["max_steps"] == 400


def test_the_table_has_a_row_per_size_and_setting_with_medians():
    runs = {
        "budget": [
            {
                "wall_s": 10.0,
                "trainer_s": 4.0,
                "auc": 0.95,
                "epochs_run": 6,
                "steps_run": 240,
                "rows_seen": 15_360,
                "max_steps": 400,
            }
        ],
        "400 steps": [
            {"wall_s": w, "trainer_s": 5.0, "auc": a, "epochs_run": 4, "steps_run": 400, "max_steps": 400}
            for w, a in ((11.0, 0.94), (13.0, 0.92), (12.0, 0.93))
        ],
    }
    results = {
        "machine": {"date_utc": "d", "cpus": 2, "ram_gb": 24, "tensorflow": "2.16.2", "tfx": "1.16.0"},
        "settings": {"repeats": 3},
        "sizes": [{"size": 1, "rows": 15_002, "settings": runs}],
    }
    table = budget.markdown(results)
    assert "| 15,002 | budget | 0.9500 | 0.9500-0.9500 | 4.0 | 10.0 | 240 (400) | 15,360 |" in table
    # Runs recorded without the rows they saw show none.
    assert "| 15,002 | 400 steps | 0.9300 | 0.9200-0.9400 | 5.0 | 12.0 | 400 (400) | - |" in table
