"""runtime.speedups: every entry holds for the installed libraries; a changed shape stops
the install naming the speedup; switched off, nothing of any library is replaced; and no
module outside runtime/speedups replaces a library's attribute unlisted. (The whole
pipeline with them off and on, same outputs: tests/test_local_runner.py.)"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import json
import sys
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import core

from runtime import speedups
from tests.support.fresh_python import fresh_python

REPO = Path(__file__).resolve().parents[2]
SPEEDUP_NAMES = [speedup.name for speedup in speedups.SPEEDUPS]


@pytest.mark.parametrize("name", SPEEDUP_NAMES)
def test_each_speedup_was_written_against_the_installed_library(name):
    """An upgrade of the lock file fails here until each replacement is reviewed for the
    new version and its entry says so."""
    speedup = speedups.by_name(name)
    assert importlib.metadata.version(speedup.library) == speedup.written_against


@pytest.mark.parametrize("name", SPEEDUP_NAMES)
def test_each_replaced_object_has_the_shape_it_was_written_for(name):
    speedup = speedups.by_name(name)
    speedups.check(speedup, every_target=True)
    assert all(speedups.current_shape(target) == target.shape for target in speedup.replaces)


@pytest.mark.parametrize("name", SPEEDUP_NAMES)
def test_each_speedup_names_a_function_that_installs_it(name):
    speedup = speedups.by_name(name)
    if speedup.stage is speedups.Stage.BEAM_RUNNER:
        assert importlib.import_module(speedup.module_path).PooledDirectRunner
    else:
        assert callable(getattr(importlib.import_module(speedup.module_path), speedup.function))


def test_a_changed_shape_stops_the_install_naming_the_speedup_and_the_way_out(monkeypatch):
    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    monkeypatch.setattr(core, "get_signature", lambda func, follow_wrapped: None)
    views = PipelineOptions.view_as
    with pytest.raises(speedups.SpeedupOutOfDate) as raised:
        speedups.install(speedups.Stage.IMPORTED)
    message = str(raised.value)
    assert "'dofn-signatures'" in message and "apache_beam.transforms.core:get_signature" in message
    assert "(func)" in message and "(func, follow_wrapped)" in message
    assert "--no-speedups" in message and f"{speedups.ENV_VAR}=0" in message
    # Nothing after it was installed either.
    assert PipelineOptions.view_as is views


def test_a_replaced_object_that_is_gone_is_named(monkeypatch):
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    monkeypatch.delattr(worker_handlers, "STATE_CACHE_SIZE_MB")
    with pytest.raises(speedups.SpeedupOutOfDate, match="'in-process-state-cache'.*STATE_CACHE_SIZE_MB.*is gone"):
        speedups.check(speedups.by_name("in-process-state-cache"))


def test_shapes_name_parameters_defaults_and_stars():
    def fn(a, b=1, *args, c, **kwargs):
        return a

    assert speedups.shape_of(fn) == "(a, b=, *args, c, **kwargs)"
    assert speedups.shape_of(json) == "module json"
    assert speedups.shape_of(100) == "int"


@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), ("0", False), ("off", False), ("No", False)])
def test_the_switch_reads_the_environment(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(speedups.ENV_VAR, value)
    assert speedups.enabled() is on


def test_switched_off_nothing_of_any_library_is_replaced():
    """Every stage a local run and the model install, in a new interpreter with the switch
    off: every replaced object is still the library's own."""
    outcome = json.loads(
        fresh_python(
            """
import os
os.environ["PIPELINE_SPEEDUPS"] = "0"
import gc, json, sys, dill
from apache_beam.internal import dill_pickler, cloudpickle_pickler
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import core
from apache_beam.typehints import decorators
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from tensorflow_transform import impl_helper
from runtime import speedups, start
start.before_imports()
views, trace, tracer = PipelineOptions.view_as, dill.dill._trace, impl_helper.trace_preprocessing_function
start.before_pickles(pickles_stay_here=True)
with start.heavy_imports():
    import models.model
start.after_imports()
from tensorflow.python.autograph.core import config
with speedups.active(speedups.Stage.TRANSFORM) as names:
    during = impl_helper.trace_preprocessing_function is tracer
print(json.dumps(dict(
    finders=[type(f).__name__ for f in sys.meta_path].count("_DeferringFinder"),
    codecs=[dill_pickler.bz2.__name__, cloudpickle_pickler.bz2.__name__],
    signatures=core.get_signature is decorators.get_signature,
    views=PipelineOptions.view_as is views,
    trace=dill.dill._trace is trace,
    cache=worker_handlers.STATE_CACHE_SIZE_MB,
    tf_keras_rule=any(r.matches("tf_keras") for r in config.CONVERSION_RULES if isinstance(r, config.DoNotConvert)),
    tracer=during,
    transform=names,
    frozen=gc.get_freeze_count(),
)))
"""
        ).splitlines()[-1]
    )
    assert outcome == {
        "finders": 0,
        "codecs": ["bz2", "bz2"],
        "signatures": True,
        "views": True,
        "trace": True,
        "cache": 100,
        "tf_keras_rule": False,
        "tracer": True,
        "transform": [],
        "frozen": 0,
    }


def test_on_every_stage_installs_what_the_list_says():
    outcome = json.loads(
        fresh_python(
            "import json; from runtime import speedups, start; "
            "names = speedups.install(speedups.Stage.START) + speedups.install(speedups.Stage.PICKLES, "
            "pickles_stay_here=True) + speedups.install(speedups.Stage.IMPORTED) + "
            "speedups.install(speedups.Stage.MODEL); "
            "ctx = speedups.active(speedups.Stage.TRANSFORM); names += ctx.__enter__(); "
            "print(json.dumps(names))"
        ).splitlines()[-1]
    )
    listed = [s.name for s in speedups.SPEEDUPS if s.stage is not speedups.Stage.BEAM_RUNNER]
    assert sorted(outcome) == sorted(listed)


def test_describe_lists_every_speedup_with_its_versions():
    text = speedups.describe()
    for speedup in speedups.SPEEDUPS:
        assert f"- {speedup.name} ({speedup.stage.value})" in text
        assert f"{speedup.library} {speedup.written_against} (installed: {speedup.written_against})" in text


# Packages of this project whose modules are checked for unlisted replacements.
PROJECT = ("runtime", "models", "components", "pipeline", "bench", "local_runner", "kubeflow_runner")


def _replaced_library_attributes(path: Path) -> list[str]:
    """``module.attribute = ...`` or ``setattr(module, ...)`` where ``module`` names an
    imported third-party module (not the standard library's, not the project's)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    libraries = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(alias.name, alias.asname or alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            pairs = [(node.module, alias.asname or alias.name) for alias in node.names]
        else:
            continue
        for module, bound in pairs:
            top = module.split(".")[0]
            if top not in sys.stdlib_module_names and top not in PROJECT and top != "__future__":
                libraries.add(bound)
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and node.args:
            targets = [ast.Attribute(value=node.args[0], attr="?")]
        for target in targets:
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(target, ast.Attribute) and isinstance(root, ast.Name) and root.id in libraries:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(target)}")
    return found


def test_no_module_outside_runtime_speedups_replaces_a_librarys_attribute():
    paths = [p for package in PROJECT for p in [*(REPO / package).rglob("*.py"), REPO / f"{package}.py"]]
    outside = [p for p in paths if p.exists() and "runtime/speedups" not in str(p.relative_to(REPO))]
    assert [hit for path in outside for hit in _replaced_library_attributes(path)] == []


def test_the_scan_sees_a_replacement():
    module = REPO / "runtime" / "speedups" / "signatures.py"
    assert any("core.get_signature" in hit for hit in _replaced_library_attributes(module))
