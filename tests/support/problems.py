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
