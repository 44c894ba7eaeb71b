"""Layers point one way: runtime <- models <- components <- pipeline <- launch <- report <-
authoring <- runs <- rehearsal <- flink_cluster <- runners (and bench).
Checked on every import statement of every module of a package, subpackages and lazy
imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUNNERS = {"local_runner", "kubeflow_runner"}
LAYERS = [
    "runtime",
    "models",
    "components",
    "pipeline",
    "launch",
    "report",
    "authoring",
    "runs",
    "rehearsal",
    "flink_cluster",
]
# What each package may not import, by top-level name: every layer above it.
FORBIDDEN = {package: {*LAYERS[index + 1 :], "bench", "tests", *RUNNERS} for index, package in enumerate(LAYERS)}


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names), wherever the import statement is."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_packages_import_only_lower_layers(package):
    wrong = {
        f"{path.relative_to(REPO)}: {name}"
        for path in (REPO / package).rglob("*.py")
        for name in imports(path)
        if name.split(".")[0] in FORBIDDEN[package]
    }
    assert not wrong


def test_only_the_compiler_imports_a_tfx_runner():
    """The pipeline definition is free of runner details; the local runner stays in local_runner.py."""
    users = {
        str(path.relative_to(REPO))
        for package in FORBIDDEN
        for path in (REPO / package).rglob("*.py")
        if any(name.startswith(("tfx.orchestration.kubeflow", "tfx.orchestration.local")) for name in imports(path))
    }
    assert users == {"pipeline/compiler.py"}


def test_the_check_sees_lazy_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from pipeline.config import PipelineConfig\n    import local_runner\n")
    assert {"pipeline.config", "local_runner"} <= imports(module)
