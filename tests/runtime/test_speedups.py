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
    chosen = (speedups.Stage.BEAM_RUNNER, speedups.Stage.COMPONENT)
    listed = [s.name for s in speedups.SPEEDUPS if s.stage not in chosen]
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


# For each entry, a test comparing what runs with it against the library as shipped.
EQUIVALENCE_TESTS = {
    "deferred-kubernetes-import": "runtime/speedups/test_deferred_imports.py::"
    "test_tfx_starts_without_the_kubernetes_client_and_its_runner_loads_on_first_use",
    "pickle-codec": "runtime/speedups/test_pickle_codec.py::test_a_pipeline_gives_the_same_results",
    "dofn-signatures": "runtime/speedups/test_signatures.py::test_signatures_equal_beams",
    "option-views": "runtime/speedups/test_option_views.py::test_views_have_beams_values",
    "dill-trace-switch": "runtime/speedups/test_overheads.py::test_tracing_switches_dills_logger_as_dill_does",
    "in-process-state-cache": "runtime/speedups/test_overheads.py::"
    "test_side_inputs_are_read_without_the_cache_and_give_the_same_results",
    "beam-pool": "runtime/test_beam_pool.py::"
    "test_a_pipeline_on_the_pool_gives_the_direct_runners_result_in_the_pools_processes",
    "transform-inspection-trace": "runtime/speedups/test_transform_traces.py::"
    "test_the_inspections_trace_once_and_answer_as_before",
    "transform-reads-kept-columns": "runtime/speedups/test_transform_columns.py::"
    "test_the_beam_source_gives_the_rows_tfx_source_gives_without_the_records",
    "autograph-skips-tf-keras": "runtime/speedups/test_autograph.py::"
    "test_keras_internals_are_not_converted_once_the_model_module_is_imported",
    "fast-csv-example-gen": "components/test_csv_example_gen.py::test_same_rows_in_the_same_splits_as_tfx",
    "statistics-with-the-examples": "components/test_statistics_gen.py::test_the_kept_statistics_are_statistics_gen_s",
    "batched-tfma-metrics": "models/test_batched_metrics.py::"
    "test_each_batched_combiner_equals_tfmas_one_example_at_a_time",
    "rolling-window-spans": "components/test_spans.py::test_spans_are_found_as_tfx_finds_the_newest",
}


def _test_functions(path: Path) -> set[str]:
    return {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


def test_every_entry_has_a_test_comparing_it_with_the_library_as_shipped():
    assert set(EQUIVALENCE_TESTS) == set(SPEEDUP_NAMES)
    for test in EQUIVALENCE_TESTS.values():
        path, _, function = test.partition("::")
        assert function in _test_functions(REPO / "tests" / path), test


# A named tuple's public methods, which begin with an underscore.
NAMED_TUPLE_METHODS = {"_replace", "_asdict", "_fields", "_make"}


def _private_reads(path: Path) -> set[str]:
    """Private attributes (``x._name``) read on anything but ``self`` and ``cls``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.add(node.attr)
    return found - NAMED_TUPLE_METHODS


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("models/batched_combiners.py", "batched-tfma-metrics"),
        ("models/batched_metrics.py", "batched-tfma-metrics"),
        ("models/evaluation.py", "batched-tfma-metrics"),
        ("runtime/speedups/transform_traces.py", "transform-inspection-trace"),
        ("components/spans.py", "rolling-window-spans"),
    ],
)
def test_every_private_attribute_of_a_library_read_is_listed(module, name):
    """What the project reads of a library's private attributes is in its entry, so an
    upgrade that renames one stops the run with the entry's name, not with an AttributeError."""
    listed = {target.path.replace(":", ".").rsplit(".", 1)[-1] for target in speedups.by_name(name).replaces}
    assert _private_reads(REPO / module) - listed == set()


def test_a_components_parameter_and_the_process_switch_both_decide(monkeypatch):
    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    assert speedups.component_on({}) and speedups.component_on({speedups.PARAMETER: 1.0})
    assert not speedups.component_on({speedups.PARAMETER: 0})
    assert speedups.checked_component({}, "batched-tfma-metrics")
    monkeypatch.setenv(speedups.ENV_VAR, "0")
    assert not speedups.component_on({speedups.PARAMETER: 1})


def test_a_components_parameter_off_activates_nothing(monkeypatch):
    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    with speedups.active(speedups.Stage.TRANSFORM, on=False) as names:
        assert names == []


def test_a_changed_library_stops_a_component_naming_its_entry(monkeypatch):
    from tensorflow_model_analysis.metrics import example_count

    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    monkeypatch.setattr(example_count, "_ExampleCountCombiner", lambda keys: None)
    with pytest.raises(speedups.SpeedupOutOfDate, match="'batched-tfma-metrics'.*_ExampleCountCombiner"):
        speedups.checked_component({}, "batched-tfma-metrics")
