"""Every replacement of a third-party library's internals this project makes: one list,
one way in, one switch.

Each speedup takes away a cost a library pays for nothing in this project's runs (each
module says which, why, and what it measured). None changes what a run computes: with
all of them off, every library runs as shipped and a run's outputs are the same (tested).
So when a library misbehaves, turning them off rules them out at once:

    python local_runner.py --no-speedups        # or: PIPELINE_SPEEDUPS=0 in the environment

The switch is the environment variable ``PIPELINE_SPEEDUPS``, so the processes a run
starts (the Beam pool's workers, the CSV encoders) inherit it. Off, it also turns off what
the local runner does around the libraries without replacing anything of theirs: the Beam
worker pool (Beam's own multi-process DirectRunner runs instead), freezing the imports'
objects out of garbage collections, and what the fast ExampleGen keeps beside the examples
for the components after it: its statistics (TFX's StatisticsGen decodes the examples and
computes them itself) and decoded columns (Transform decodes the examples).

Every entry names what it replaces, the version of the library it was written against, and
the shape of each replaced object as written (a function's parameters, a value's type).
:func:`install` checks that shape before replacing anything and stops, naming the speedup,
if an upgrade changed it: a replacement written for another shape would misbehave quietly.
A test holds every entry to the installed versions, so an upgrade reviews each of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import types
from collections.abc import Iterator
from typing import Any

ENV_VAR = "PIPELINE_SPEEDUPS"
OFF_VALUES = frozenset({"0", "off", "false", "no"})


class Stage(enum.Enum):
    """When a process installs a speedup."""

    # A local process, before its heavy imports (TensorFlow, Beam, TFX).
    START = "start"
    # A local process, before it makes or reads its first Beam pickle.
    PICKLES = "pickles"
    # A local process, once its heavy imports are done.
    IMPORTED = "imported"
    # Every process that builds, trains or exports the model (Vertex containers included).
    MODEL = "model"
    # For the length of one Transform execution (Vertex containers included).
    TRANSFORM = "transform"
    # Chosen as the local Beam runner (``runtime.beam_args``) rather than installed.
    BEAM_RUNNER = "beam-runner"


@dataclasses.dataclass(frozen=True)
class Target:
    """One replaced object, ``module:attribute.path``, and its shape as written (``shape_of``)."""

    path: str
    shape: str
    # False where checking would itself cost what the speedup saves (importing the library
    # early): then the test suite checks it, as it checks every target.
    checked_at_install: bool = True


@dataclasses.dataclass(frozen=True)
class Speedup:
    name: str
    # The module (under runtime.speedups unless dotted) and its function that installs it
    # (for Stage.TRANSFORM, a context manager active for a block).
    module: str
    stage: Stage
    library: str
    written_against: str
    replaces: tuple[Target, ...]
    buys: str
    function: str = "install"

    @property
    def module_path(self) -> str:
        return self.module if "." in self.module else f"{__name__}.{self.module}"


SPEEDUPS: tuple[Speedup, ...] = (
    Speedup(
        name="deferred-kubernetes-import",
        module="deferred_imports",
        stage=Stage.START,
        library="tfx",
        written_against="1.16.0",
        # Python's import system is not replaced: a finder goes first on sys.meta_path for
        # this one module. Checking it at install would import TFX before the imports whose
        # cost the deferral takes away.
        replaces=(
            Target(
                "tfx.components.infra_validator.model_server_runners:kubernetes_runner",
                "module",
                checked_at_install=False,
            ),
        ),
        buys="TFX's InfraValidator imports the whole Kubernetes client at start-up; loaded only if used",
    ),
    Speedup(
        name="pickle-codec",
        module="pickle_codec",
        stage=Stage.PICKLES,
        library="apache-beam",
        written_against="2.61.0",
        replaces=(
            Target("apache_beam.internal.dill_pickler:bz2", "module bz2"),
            Target("apache_beam.internal.cloudpickle_pickler:bz2", "module bz2"),
        ),
        buys="Beam's pickles in zlib level 1 instead of bz2 level 9 where they never leave this machine",
    ),
    Speedup(
        name="dofn-signatures",
        module="signatures",
        stage=Stage.IMPORTED,
        library="apache-beam",
        written_against="2.61.0",
        replaces=(Target("apache_beam.transforms.core:get_signature", "(func)"),),
        buys="each function's signature computed once instead of about 125,000 lookups per run",
    ),
    Speedup(
        name="option-views",
        module="option_views",
        stage=Stage.IMPORTED,
        library="apache-beam",
        written_against="2.61.0",
        replaces=(Target("apache_beam.options.pipeline_options:PipelineOptions.view_as", "(self, cls)"),),
        buys="each options view built once instead of an argparse parser per transform applied",
    ),
    Speedup(
        name="dill-trace-switch",
        module="overheads",
        function="install_trace_switch",
        stage=Stage.IMPORTED,
        library="dill",
        written_against="0.3.1.1",
        replaces=(Target("dill.dill:_trace", "(boolean)"),),
        buys="dill's logger level set only when it changes, not twice per Beam pickle",
    ),
    Speedup(
        name="in-process-state-cache",
        module="overheads",
        function="install_without_state_cache",
        stage=Stage.IMPORTED,
        library="apache-beam",
        written_against="2.61.0",
        replaces=(Target("apache_beam.runners.portability.fn_api_runner.worker_handlers:STATE_CACHE_SIZE_MB", "int"),),
        buys="the in-process worker's side-input cache off: weighing each value walked every module",
    ),
    Speedup(
        name="beam-pool",
        module="runtime.beam_pool",
        stage=Stage.BEAM_RUNNER,
        library="apache-beam",
        written_against="2.61.0",
        replaces=(
            Target(
                "apache_beam.runners.portability.fn_api_runner:FnApiRunner.run_pipeline", "(self, pipeline, options)"
            ),
            Target("apache_beam.runners.portability.fn_api_runner:FnApiRunner._default_environment", "member"),
        ),
        buys="Beam's worker processes started once per run, their imports done once, for every component",
    ),
    Speedup(
        name="transform-inspection-trace",
        module="transform_traces",
        function="one_inspection_trace",
        stage=Stage.TRANSFORM,
        library="tensorflow-transform",
        written_against="1.16.0",
        replaces=(
            Target(
                "tensorflow_transform.impl_helper:trace_preprocessing_function",
                "(preprocessing_fn, input_specs, use_tf_compat_v1, base_temp_dir=)",
            ),
            Target(
                "tensorflow_transform.schema_inference:get_traced_metadata_fn",
                "(preprocessing_fn, structured_inputs, tf_graph_context, evaluate_schema_overrides)",
            ),
        ),
        buys="preprocessing_fn traced once for TFX's four inspections, and not again for the preliminary schema",
    ),
    Speedup(
        name="transform-reads-kept-columns",
        module="transform_columns",
        function="read_decoded_columns",
        stage=Stage.TRANSFORM,
        library="tfx",
        written_against="1.16.0",
        replaces=(
            Target("tfx.components.transform.executor:TransformProcessor._CreateTFXIO", "(self, dataset, schema)"),
            # Overridden in a subclass of the TFXIO TFX makes (tfx 1.16 pins tfx-bsl 1.16).
            Target("tfx_bsl.tfxio.tf_example_record:TFExampleRecord.BeamSource", "(self, batch_size=)"),
            Target("tfx_bsl.tfxio.tf_example_record:TFExampleRecord._ProjectImpl", "(self, tensor_names)"),
        ),
        buys="Transform reads the columns ExampleGen kept instead of decoding every tf.Example again",
    ),
    Speedup(
        name="autograph-skips-tf-keras",
        module="autograph",
        function="keep_autograph_out_of_tf_keras",
        stage=Stage.MODEL,
        library="tensorflow",
        written_against="2.16.2",
        replaces=(
            Target("tensorflow.python.autograph.core.config:CONVERSION_RULES", "tuple"),
            Target("tensorflow.python.autograph.core.config:DoNotConvert", "(module_prefix)"),
        ),
        buys="AutoGraph leaves Keras 2's own code alone, as TensorFlow does for the keras package",
    ),
)


class SpeedupOutOfDate(RuntimeError):
    """A replaced object no longer has the shape its speedup was written for."""


def enabled() -> bool:
    """False when ``PIPELINE_SPEEDUPS`` is 0/off/false/no: every library runs as shipped."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in OFF_VALUES


def switch_off() -> None:
    """Turns every speedup off in this process from now on, and in the processes it starts."""
    os.environ[ENV_VAR] = "0"


def by_name(name: str) -> Speedup:
    for speedup in SPEEDUPS:
        if speedup.name == name:
            return speedup
    raise KeyError(f"no speedup named {name!r}; known: {[s.name for s in SPEEDUPS]}")


def shape_of(value: Any) -> str:
    """A comparable shape: a function's parameters (names, which have defaults, stars), a
    module's name, a class's constructor parameters, else the value's type."""
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if callable(value):
        try:
            signature = inspect.signature(value)
        except (TypeError, ValueError):
            return type(value).__name__
        stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
        names = [
            stars.get(p.kind, "") + p.name + ("=" if p.default is not inspect.Parameter.empty else "")
            for p in signature.parameters.values()
        ]
        return f"({', '.join(names)})"
    return type(value).__name__


def _resolve(path: str) -> tuple[Any, bool]:
    """(the object at ``module:attribute.path``, True) or (None, False) if it is not there;
    the last attribute may be a member its class sets on instances in ``__init__``."""
    module_name, _, attributes = path.partition(":")
    value: Any = importlib.import_module(module_name)
    parts = attributes.split(".")
    for index, part in enumerate(parts):
        if not hasattr(value, part):
            if index == len(parts) - 1 and isinstance(value, type):
                return value, _sets_on_instances(value, part)
            return None, False
        value = getattr(value, part)
    return value, True


def _sets_on_instances(cls: type, attribute: str) -> bool:
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return False
    return f"self.{attribute} =" in source


def current_shape(target: Target) -> str | None:
    """The installed library's shape of ``target``; None when it is gone. A target of shape
    ``module`` is a module of the library (found, not imported)."""
    if target.shape == "module":
        return "module" if importlib.util.find_spec(target.path.replace(":", ".")) else None
    value, found = _resolve(target.path)
    if not found:
        return None
    if getattr(value, "__module__", "").startswith(f"{__name__}."):
        # Replaced already in this process: the library's own was checked before it was.
        return target.shape
    return "member" if target.shape == "member" else shape_of(value)


def _installed_version(library: str) -> str:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def check(speedup: Speedup, every_target: bool = False) -> None:
    """Raises ``SpeedupOutOfDate``, naming the speedup, what changed and what to do, when an
    object it replaces is gone or has another shape than the one it was written for.
    ``every_target``: also those not ``checked_at_install``."""
    for target in speedup.replaces:
        if not (target.checked_at_install or every_target):
            continue
        found = current_shape(target)
        if found == target.shape:
            continue
        installed = _installed_version(speedup.library)
        now = "is gone" if found is None else f"is now {found}"
        raise SpeedupOutOfDate(
            f"speedup {speedup.name!r} (runtime/speedups, {speedup.module}) replaces {target.path}, written "
            f"against {speedup.library} {speedup.written_against} where it was {target.shape}; with "
            f"{speedup.library} {installed} it {now}. Update the speedup for this version (and its entry in "
            f"runtime/speedups/__init__.py), or run without speedups: --no-speedups or {ENV_VAR}=0."
        )


def _checked(stage: Stage) -> Iterator[tuple[str, Any]]:
    """(name, the function that installs it) of every speedup of ``stage``, each checked just
    before it is handed out; nothing when the switch is off."""
    if not enabled():
        return
    for speedup in SPEEDUPS:
        if speedup.stage is stage:
            check(speedup)
            yield speedup.name, getattr(importlib.import_module(speedup.module_path), speedup.function)


def install(stage: Stage, **kwargs: Any) -> list[str]:
    """Installs, in this process, every speedup of ``stage`` (each its module's function,
    given ``kwargs``), each checked first; none when the switch is off. The names installed."""
    installed = []
    for name, function in _checked(stage):
        function(**kwargs)
        installed.append(name)
    return installed


@contextlib.contextmanager
def active(stage: Stage) -> Iterator[list[str]]:
    """Within this block, every speedup of ``stage`` (each a context manager), each checked
    first; none when the switch is off. Yields the names."""
    with contextlib.ExitStack() as stack:
        names = []
        for name, function in _checked(stage):
            stack.enter_context(function())
            names.append(name)
        yield names


def describe() -> str:
    """Every speedup, one paragraph each: what it buys, what it replaces, the version it was
    written against beside the installed one, and whether the switch is on."""
    state = "on" if enabled() else f"off ({ENV_VAR}=0): every library runs as shipped"
    lines = [f"Speedups ({state}); each replaces a library's internals (runtime/speedups/__init__.py):"]
    for speedup in SPEEDUPS:
        installed = _installed_version(speedup.library)
        lines.append(f"- {speedup.name} ({speedup.stage.value}): {speedup.buys}")
        lines.append(f"    {speedup.library} {speedup.written_against} (installed: {installed}); replaces:")
        lines.extend(f"      {target.path} {target.shape}" for target in speedup.replaces)
    return "\n".join(lines)
