"""The shipped problems (data/<name>/problem.toml), for tests of the machinery on each."""

from __future__ import annotations

from pathlib import Path

from models import problem as problem_lib
from models.preprocessing import PROBLEM_KEY
from pipeline.config import REPO_ROOT

SHIPPED_DIRS = {name: Path(REPO_ROOT) / "data" / name for name in ("taxi", "penguins", "penguin-body-mass")}
SHIPPED = {name: problem_lib.load(str(path)) for name, path in SHIPPED_DIRS.items()}
TAXI = SHIPPED["taxi"]


def with_problem(custom_config: dict | None = None, problem: problem_lib.Problem = TAXI) -> dict:
    """A component's custom_config with the problem spec the pipeline adds to it."""
    return {**(custom_config or {}), PROBLEM_KEY: problem.to_json()}


def spreadsheet_headers(names: list[str]) -> list[str]:
    """Each name as a spreadsheet or BI export might head its column, every one needing a
    feature name of its own: words capitalised and spaced, and in turn a unit, a leading
    year, a non-ASCII word or a leading '#'."""
    headers = []
    for index, name in enumerate(names):
        words = " ".join(word.capitalize() for word in name.split("_"))
        headers.append([f"{words} ($)", f"{2020 + index} {words}", f"{words} Größe", f"#{words}"][index % 4])
    return headers


def as_spreadsheet_export(source: Path, target: Path) -> dict[str, str]:
    """Writes ``source`` (a CSV) to ``target`` under ``spreadsheet_headers``; returns each
    original name's new header."""
    lines = source.read_text(encoding="utf-8").splitlines()
    names = lines[0].split(",")
    headers = spreadsheet_headers(names)
    target.write_text("\n".join([",".join(headers), *lines[1:]]) + "\n", encoding="utf-8")
    return dict(zip(names, headers, strict=True))


def binary_problem(headers: list[str], categorical: tuple[str, ...] = ()) -> tuple[problem_lib.Problem, dict[str, str]]:
    """A binary problem on a CSV with these headers: the last is the label ("yes" positive),
    the ``categorical`` ones are categories (and slices), the others numbers; each header
    mapped to its feature name. Returns it and each header's feature name."""
    features = problem_lib.feature_names(headers)
    *inputs, label = headers
    problem = problem_lib.Problem.from_dict(
        {
            "name": "from-headers",
            "task": "binary",
            "columns": {features[h]: h for h in headers if features[h] != h},
            "label": {"column": features[label], "positive": "yes"},
            "features": {
                "numeric": [features[h] for h in inputs if h not in categorical],
                "categorical": [features[h] for h in categorical],
            },
            "evaluation": {"metric": "auc", "threshold": 0.6, "slices": [features[h] for h in categorical]},
        }
    )
    return problem, features
