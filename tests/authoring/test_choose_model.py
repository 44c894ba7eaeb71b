"""Choosing a problem's model family once, by the Trainer's choice (authoring/choose_model.py)."""

from __future__ import annotations

import shutil

import pytest

from authoring import choose_model
from models.problem import PROBLEM_FILE, ModelFamily, load
from tests.support.problems import SHIPPED_DIRS


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


def test_the_one_run_chooses_on_a_copy_of_the_spec(species_dir, tmp_path):
    args = choose_model._runner_args(choose_model._variant(str(species_dir), str(tmp_path)), "data", "out")
    variant = args[args.index("--problem") + 1]
    assert load(variant).model == ModelFamily.CHOOSE and load(str(species_dir)).model == ModelFamily.NETWORK


def test_a_run_that_records_no_choice_is_an_error_naming_its_log(species_dir, tmp_path, monkeypatch):
    from launch import local

    monkeypatch.setattr(local, "run_in_own_process", lambda args, log: (1, 0.5))
    with pytest.raises(RuntimeError, match=r"exit code 1.*choice\.log"):
        choose_model.choose(str(species_dir), str(tmp_path / "scratch"))
    assert load(str(species_dir)).model == ModelFamily.NETWORK


@pytest.mark.slow
def test_both_families_run_on_the_problems_data_and_the_better_is_written(species_dir, tmp_path, capsys):
    before = sorted(p.name for p in species_dir.iterdir())
    assert choose_model.main(["--problem", str(species_dir), "--output-root", str(tmp_path / "trials")]) == 0
    spec = load(str(species_dir))
    text = (species_dir / PROBLEM_FILE).read_text()
    assert "validation part of the training split" in text and "not the eval split" in text
    figures = {
        family: float(text.split(f"{family.value} ", 1)[1].split(" ", 1)[0].rstrip(",;"))
        for family in (ModelFamily.NETWORK, ModelFamily.TREES)
    }
    # Each family's trial measured its accuracy; the written family is the better one's.
    best = max(figures.values())
    assert spec.model == (ModelFamily.NETWORK if figures[ModelFamily.NETWORK] == best else ModelFamily.TREES)
    assert f'[model] family = "{spec.model.value}"' in capsys.readouterr().out
    # The trials read the problem's folder and wrote elsewhere; their runs are removed.
    assert sorted(p.name for p in species_dir.iterdir()) == before
    assert not (tmp_path / "trials" / "runs").exists()
