"""The machinery never names a problem's data: no column, label or pipeline name of a shipped
problem appears in the code every problem runs (only in its own folder, its tests and the
taxi benchmark, which compares with TFX's taxi template on the taxi data)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from models.problem import DATE_PARTS, TIME_PART
from pipeline.config import REPO_ROOT
from tests.support.problems import SHIPPED

# The code every problem runs, and what builds and ships it.
MACHINERY = (
    *("models", "components", "pipeline", "launch", "report", "authoring", "runs", "runtime"),
    *("local_runner.py", "kubeflow_runner.py"),
)
BUILD_FILES = ("Makefile", "Dockerfile", "pyproject.toml")


def _files() -> list[Path]:
    found = []
    for name in MACHINERY + BUILD_FILES:
        path = Path(REPO_ROOT) / name
        found += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return found


# The machinery's own words that a problem's column may happen to share: the parts a date
# column becomes (penguins has a column "year"; the date code names the calendar's year).
OWN_WORDS = frozenset((*DATE_PARTS, TIME_PART))


def _named(problem) -> set[str]:
    return {*problem.raw_columns, problem.label.name, problem.name, *problem.label.classes} - OWN_WORDS


def _hits(names: set[str], files: list[Path]) -> list[str]:
    alternatives = "|".join(map(re.escape, sorted(names)))
    # An attribute (``when.year``) is Python's, not a column's name.
    word = re.compile(rf"(?<![A-Za-z0-9_.])({alternatives})(?![A-Za-z0-9_])")
    hits = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if match := word.search(line):
                hits.append(f"{path.name}:{number}: {match.group(1)!r} in {line.strip()!r}")
    return hits


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_no_shipped_problems_names_appear_in_the_machinery(name):
    hits = _hits(_named(SHIPPED[name]), _files())
    assert not hits, "Move these to the problem's spec (data/<problem>/problem.toml):\n" + "\n".join(hits)


def test_the_check_finds_a_name_written_in_code_and_only_as_a_whole_word(tmp_path):
    taxi = SHIPPED["taxi"]
    column = taxi.features.categorical[0]
    planted = tmp_path / "planted.py"
    planted.write_text(f'KEY = "{column}"\nOTHER = "{column}s_total_{column}x"\n')
    assert _hits(_named(taxi), [planted]) == [f"planted.py:1: {column!r} in 'KEY = \"{column}\"'"]
    assert len(_files()) > 40 and all(path.is_file() for path in _files())
