"""The directory the suite's workers make once and share."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.workers import made_once


@dataclass
class WorkerTemp:
    """A worker's ``tmp_path_factory``, as far as ``made_once`` uses it."""

    base: Path

    def getbasetemp(self) -> Path:
        self.base.mkdir(parents=True, exist_ok=True)
        return self.base


@pytest.fixture
def workers(tmp_path, monkeypatch) -> list[WorkerTemp]:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    return [WorkerTemp(tmp_path / "gw0"), WorkerTemp(tmp_path / "gw1")]


def test_the_first_worker_makes_it_while_the_other_waits_then_takes_it(workers, tmp_path):
    made = []

    def make(path: Path) -> None:
        made.append(path)
        time.sleep(0.3)  # the other worker asks meanwhile
        (path / "output").write_text("made")

    with ThreadPoolExecutor(len(workers)) as pool:
        paths = list(pool.map(lambda worker: made_once(worker, "run", make), workers))
    assert made == [tmp_path / "run"]
    assert paths == [tmp_path / "run"] * 2
    assert (tmp_path / "run" / "output").read_text() == "made"


def test_what_a_failed_make_left_is_made_again_by_the_next_worker(workers, tmp_path):
    def failing(path: Path) -> None:
        (path / "partial").write_text("")
        raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError, match="the run failed"):
        made_once(workers[0], "run", failing)
    path = made_once(workers[1], "run", lambda path: (path / "output").write_text("made"))
    assert sorted(p.name for p in path.iterdir()) == ["output"]
