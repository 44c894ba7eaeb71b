"""Choosing a problem's model family by its eval metric (authoring/choose_model.py)."""

from __future__ import annotations

import shutil

import pytest

from authoring import choose_model
from authoring.choose_model import Trial
from models.problem import PROBLEM_FILE, ModelFamily, load
from tests.support.problems import SHIPPED, SHIPPED_DIRS


@pytest.fixture
def species_dir(tmp_path):
    folder = tmp_path / "penguins"
    shutil.copytree(SHIPPED_DIRS["penguins"], folder)
    return folder


def test_the_family_is_written_as_a_model_table_replacing_an_earlier_one(species_dir):
    original = (species_dir / PROBLEM_FILE).read_text()
    choose_model.write_family(str(species_dir), ModelFamily.TREES, "first reason\nsecond line")
    choose_model.write_family(str(species_dir), ModelFamily.NETWORK, "why now")
    text = (species_dir / PROBLEM_FILE).read_text()
    assert text.startswith(original.rstrip("\n"))  # the rest of the spec as it was
    assert text.count("[model]") == 1 and "first reason" not in text and "# why now\n[model]" in text
    assert load(str(species_dir)).model == ModelFamily.NETWORK
    choose_model.write_family(str(species_dir), ModelFamily.TREES, "again")
    assert load(str(species_dir)).model == ModelFamily.TREES
    assert (species_dir / PROBLEM_FILE).read_text().count("[model]") == 1


@pytest.mark.parametrize(
    ("problem", "network", "trees", "chosen"),
    [
        ("penguins", 0.97, 0.98, ModelFamily.TREES),  # accuracy: higher wins
        ("penguins", 0.98, 0.98, ModelFamily.NETWORK),  # a tie keeps the network
        ("penguin-body-mass", 300.0, 310.0, ModelFamily.NETWORK),  # RMSE: lower wins
        ("penguin-body-mass", 300.0, None, ModelFamily.NETWORK),  # a run without a figure loses
        ("penguin-body-mass", None, 310.0, ModelFamily.TREES),
    ],
)
def test_the_better_figure_for_the_blessing_metric_wins(problem, network, trees, chosen):
    trials = [Trial(ModelFamily.NETWORK, network, 1.0, "n.log"), Trial(ModelFamily.TREES, trees, 1.0, "t.log")]
    assert choose_model.better(SHIPPED[problem], trials).family == chosen


def test_without_any_figure_nothing_is_chosen_and_the_logs_are_named():
    trials = [Trial(ModelFamily.NETWORK, None, 1.0, "n.log"), Trial(ModelFamily.TREES, None, 1.0, "t.log")]
    with pytest.raises(RuntimeError, match="n.log, t.log"):
        choose_model.better(SHIPPED["penguins"], trials)


@pytest.mark.slow
def test_both_families_run_on_the_problems_data_and_the_better_is_written(species_dir, tmp_path, capsys):
    before = sorted(p.name for p in species_dir.iterdir())
    assert choose_model.main(["--problem", str(species_dir), "--output-root", str(tmp_path / "trials")]) == 0
    spec = load(str(species_dir))
    text = (species_dir / PROBLEM_FILE).read_text()
    figures = {
        family: float(text.split(f"{family.value} ", 1)[1].split(" ", 1)[0])
        for family in (ModelFamily.NETWORK, ModelFamily.TREES)
    }
    # Each family's run measured its accuracy; the written family is the better one's.
    best = max(figures.values())
    assert spec.model == (ModelFamily.NETWORK if figures[ModelFamily.NETWORK] == best else ModelFamily.TREES)
    assert f'[model] family = "{spec.model.value}"' in capsys.readouterr().out
    # The trials read the problem's folder and wrote elsewhere; their runs are removed.
    assert sorted(p.name for p in species_dir.iterdir()) == before
    assert not (tmp_path / "trials" / "runs").exists()
