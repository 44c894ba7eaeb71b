"""pipeline/report/plots.py: plots kept by what they were drawn from, read back when asked again."""

from __future__ import annotations

import os

import pytest

from pipeline.report import plots

ROC = [(0.0, 0.0), (0.2, 0.7), (1.0, 1.0)]


@pytest.fixture
def drawn(monkeypatch) -> list:
    """Every figure actually rendered."""
    calls: list = []
    render = plots._png
    monkeypatch.setattr(plots, "_png", lambda figure, **kw: calls.append(figure) or render(figure, **kw))
    return calls


def test_the_same_plot_is_read_back_not_drawn_again(tmp_path, drawn):
    with plots.cache_in(str(tmp_path)):
        first = plots.roc(ROC)
        again = plots.roc(list(ROC))
    assert first == again and first.startswith("data:image/png;base64,")
    assert len(drawn) == 1
    assert len(os.listdir(tmp_path)) == 1


def test_other_data_or_another_plot_is_drawn(tmp_path, drawn):
    with plots.cache_in(str(tmp_path)):
        plots.roc(ROC)
        plots.roc([(0.0, 0.0), (0.5, 0.9), (1.0, 1.0)])
        plots.curve("auc", {"train": [(0, 0.8), (1, 0.9)]})
    assert len(drawn) == 3


def test_without_a_cache_directory_every_plot_is_drawn(drawn):
    plots.roc(ROC)
    plots.roc(ROC)
    assert len(drawn) == 2


def test_the_oldest_plots_are_dropped_beyond_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "CACHE_LIMIT", 2)
    with plots.cache_in(str(tmp_path)):
        for threshold in (0.1, 0.2, 0.3):
            plots.roc([(0.0, 0.0), (threshold, 0.5), (1.0, 1.0)])
    assert len(os.listdir(tmp_path)) == 2
