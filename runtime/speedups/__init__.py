"""Every place this project replaces or reaches into a third-party library's internals: one
list, each entry checked against the installed library, and one switch
(``PipelineConfig.speedups``, each component's ``speedups`` parameter; ``PIPELINE_SPEEDUPS``
for what a process installs in itself). Off, every library runs as shipped (docs/speedups.md).
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
# The execution parameter of the project's components that says whether they run with
# their speedups (1, the default) or as the library ships them (0).
PARAMETER = "speedups"


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
    # Chosen by a component's ``speedups`` execution parameter (``PipelineConfig.speedups``),
    # checked by the component when it takes the path; nothing is replaced.
    COMPONENT = "component"


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


# The inputs TFMA's combiners keep for ``metric_util.to_label_prediction_example_weight``.
_INPUTS = ("_eval_config", "_aggregation_type", "_class_weights", "_example_weighted")


def _members(combiner: str, shape: str, members: tuple[str, ...]) -> tuple[Target, ...]:
    """A library class (its constructor's shape) and the members of its instances read."""
    return (Target(combiner, shape), *(Target(f"{combiner}.{member}", "member") for member in members))


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
            # Read, not replaced: how tf.Transform's metadata_fn finds the schema overrides.
            Target("tensorflow_transform.schema_inference:_TF_METADATA_TENSOR_COLLECTION", "str"),
            Target("tensorflow_transform.schema_inference:_get_tensor_value_to_key_map", "(features_dict)"),
            Target("tensorflow_transform.graph_context:TFGraphContext._evaluated_replacements", "member"),
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
    Speedup(
        name="fast-csv-example-gen",
        module="components.csv_example_gen",
        function="Executor",
        stage=Stage.COMPONENT,
        library="tfx",
        written_against="1.16.0",
        # What the project's CSV encoder (components/csv_encoding.py) does as these do, and
        # what its executor reads of TFX's base executor.
        replaces=(
            Target(
                "tfx.components.example_gen.base_example_gen_executor:_PartitionFn",
                "(record, num_partitions, buckets, split_config)",
            ),
            Target("tfx_bsl.coders.csv_decoder:_InferValueType", "(value)"),
            Target("tfx.components.example_gen.write_split:DEFAULT_FILE_NAME", "str"),
            Target(
                "tfx.dsl.components.base.base_executor:BaseExecutor._log_startup",
                "(self, inputs, outputs, exec_properties)",
            ),
            Target("tfx.dsl.components.base.base_beam_executor:BaseBeamExecutor._beam_pipeline_args", "member"),
        ),
        buys="CSV encoded with Arrow and numpy in worker processes instead of row by row in Beam",
    ),
    Speedup(
        name="statistics-with-the-examples",
        module="components.statistics_gen",
        function="Executor",
        stage=Stage.COMPONENT,
        library="tensorflow-data-validation",
        written_against="1.16.1",
        # TFDV's generators and proto makers fed by ExampleGen's workers
        # (components/csv_statistics.py); TFX's names StatisticsGen's copy writes.
        replaces=(
            Target("tensorflow_data_validation.statistics.stats_impl:get_generators", "(options, in_memory=)"),
            Target(
                "tensorflow_data_validation.statistics.generators.top_k_uniques_sketch_stats_generator:"
                "TopKUniquesSketchStatsGenerator",
                "(name=, schema=, example_weight_map=, num_top_values=, num_rank_histogram_buckets=, "
                "frequency_threshold=, weighted_frequency_threshold=, num_misragries_buckets=, num_kmv_buckets=, "
                "store_output_in_custom_stats=, length_counter_sampling_rate=)",
            ),
            Target(
                "tensorflow_data_validation.utils.top_k_uniques_stats_util:make_dataset_feature_stats_proto_topk_single",
                "(feature_path_tuple, value_count_list, is_weighted_stats, num_top_values, frequency_threshold, "
                "num_rank_histogram_buckets)",
            ),
            Target(
                "tensorflow_data_validation.utils.top_k_uniques_stats_util:"
                "make_dataset_feature_stats_proto_unique_single",
                "(feature_path_tuple, num_uniques)",
            ),
            Target(
                "tensorflow_data_validation.utils.top_k_uniques_stats_util:FeatureValueCount",
                "(feature_value, count)",
            ),
            Target("tfx_bsl.statistics.merge_util:merge_dataset_feature_statistics", "(stats_protos)"),
            Target("tfx.components.statistics_gen.executor:DEFAULT_FILE_NAME", "str"),
            Target("tfx.components.statistics_gen.executor:STATS_DASHBOARD_LINK", "str"),
            Target("tfx.components.statistics_gen.executor:SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME", "str"),
        ),
        buys="StatisticsGen copies the statistics ExampleGen computed instead of decoding every example again",
    ),
    Speedup(
        name="batched-tfma-metrics",
        module="models.evaluation",
        function="custom_extractors",
        stage=Stage.COMPONENT,
        library="tensorflow-model-analysis",
        written_against="0.47.1",
        # TFMA's per-example combiners, whose private attributes the batched ones read
        # (models/batched_combiners.py, models/batched_metrics.py), and the stages and
        # helpers the batched slicing stands in for (models/evaluation.py).
        replaces=(
            *_members(
                "tensorflow_model_analysis.metrics.calibration_histogram:_CalibrationHistogramCombiner",
                "(key, eval_config, aggregation_type, class_weights, example_weighted, num_buckets, left, right, "
                "prediction_based_bucketing, fractional_labels)",
                ("_key", "_num_buckets", "_left", "_range", "_prediction_based_bucketing", "_fractional_labels")
                + _INPUTS,
            ),
            *_members(
                "tensorflow_model_analysis.metrics.binary_confusion_matrices:_BinaryConfusionMatrixCombiner",
                "(key, eval_config, thresholds, extract_label_prediction_and_weight, example_id_key, "
                "example_ids_count, aggregation_type, class_weights, example_weighted, enable_fractional_labels)",
                ("_key", "_binary_confusion_matrices", "_example_id_key", "_enable_fractional_labels") + _INPUTS,
            ),
            *_members(
                "tensorflow_model_analysis.metrics.example_count:_ExampleCountCombiner",
                "(model_name, output_name, keys, example_weighted)",
                ("_keys", "_model_name", "_output_name", "_example_weighted"),
            ),
            *_members(
                "tensorflow_model_analysis.metrics.tf_metric_wrapper:_CompilableMetricsCombiner",
                "(metric_configs, loss_configs, custom_objects, eval_config, model_name, sub_key, aggregation_type, "
                "class_weights, example_weighted, desired_batch_size=)",
                ("_model_name", "_output_names", "_sub_key", "_metrics") + _INPUTS,
            ),
            *(
                target
                for combiner in ("_MeanAbsoluteErrorCombiner", "_MeanSquaredErrorCombiner")
                for target in _members(
                    f"tensorflow_model_analysis.metrics.mean_regression_error:{combiner}",
                    "(eval_config, model_name, output_name, metric_key, aggregation_type, class_weights, "
                    "example_weighted)",
                    ("_metric_key",) + _INPUTS,
                )
            ),
            *_members(
                "tensorflow_model_analysis.metrics.calibration:_WeightedLabelsPredictionsExamplesCombiner",
                "(key, eval_config, aggregation_type, class_weights, example_weighted)",
                ("_key",) + _INPUTS,
            ),
            *_members(
                "tensorflow_model_analysis.metrics.multi_class_confusion_matrix_metrics:"
                "_MultiClassConfusionMatrixCombiner",
                "(key, eval_config, example_weighted, thresholds, extract_label_prediction_and_weight)",
                ("_key", "_thresholds", "_extract_label_prediction_and_weight", "_eval_config", "_example_weighted"),
            ),
            Target(
                "tensorflow_model_analysis.contrib.aggregates.binary_confusion_matrices:_ThresholdEntry",
                "(matrix, tp_examples, tn_examples, fp_examples, fn_examples)",
            ),
            Target(
                "tensorflow_model_analysis.contrib.aggregates.binary_confusion_matrices:"
                "BinaryConfusionMatrices._merge_entry",
                "(self, accumulator, threshold, entry)",
            ),
            Target(
                "tensorflow_model_analysis.contrib.aggregates.binary_confusion_matrices:"
                "BinaryConfusionMatrices._thresholds",
                "member",
            ),
            Target("tensorflow_model_analysis.metrics.binary_confusion_matrices:_EPSILON", "float"),
            # HistogramMatrices reads the closure of the computation this function makes.
            Target(
                "tensorflow_model_analysis.metrics.binary_confusion_matrices:binary_confusion_matrices",
                "(num_thresholds=, thresholds=, name=, eval_config=, model_name=, output_name=, sub_key=, "
                "aggregation_type=, class_weights=, example_weighted=, use_histogram=, "
                "extract_label_prediction_and_weight=, preprocessors=, examples_name=, example_id_key=, "
                "example_ids_count=, fractional_labels=)",
            ),
            Target(
                "tensorflow_model_analysis.metrics.metric_util:to_label_prediction_example_weight",
                "(inputs, eval_config=, model_name=, output_name=, sub_key=, aggregation_type=, class_weights=, "
                "example_weighted=, fractional_labels=, flatten=, squeeze=, allow_none=, "
                "require_single_example_weight=)",
            ),
            Target("tensorflow_model_analysis.extractors.unbatch_extractor:UNBATCH_EXTRACTOR_STAGE_NAME", "str"),
            Target("tensorflow_model_analysis.extractors.slice_key_extractor:SLICE_KEY_EXTRACTOR_STAGE_NAME", "str"),
            Target(
                "tensorflow_model_analysis.utils.util:split_extracts", "(extracts, keep_batch_dim=, expand_zero_dims=)"
            ),
            Target(
                "tensorflow_model_analysis.slicer.slicer_lib:get_slices_for_features_dicts",
                "(features_dicts, default_features_dict, slice_spec)",
            ),
        ),
        buys="the Evaluator's metrics computed a batch at a time instead of one Python dict per example",
    ),
    Speedup(
        name="rolling-window-spans",
        module="components.spans",
        function="list_spans",
        stage=Stage.COMPONENT,
        library="tfx",
        written_against="1.16.0",
        # Not switched off: reading a window of spans is a feature, done with TFX's driver
        # code, which nothing replaces.
        replaces=(
            Target(
                "tfx.components.example_gen.utils:_create_matching_glob_and_regex",
                "(uri, split, is_match_span, is_match_date, is_match_version, range_config)",
            ),
            Target(
                "tfx.components.example_gen.utils:_find_matched_span_version_from_path",
                "(file_path, split_regex_pattern, is_match_span, is_match_date, is_match_version)",
            ),
        ),
        buys="the spans of a rolling window found with TFX's own glob and regex for the pattern",
    ),
)


class SpeedupOutOfDate(RuntimeError):
    """A replaced object no longer has the shape its speedup was written for."""


def enabled() -> bool:
    """False when ``PIPELINE_SPEEDUPS`` is 0/off/false/no: every library runs as shipped."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in OFF_VALUES


def component_on(exec_properties: dict[str, Any]) -> bool:
    """Whether a component runs with its speedups: its ``speedups`` execution parameter
    (absent: on, the components' default) and this process's switch both say so."""
    return bool(exec_properties.get(PARAMETER, 1)) and enabled()


def checked_component(exec_properties: dict[str, Any], *names: str) -> bool:
    """``component_on``, and then the entries ``names`` checked against the installed
    libraries (``SpeedupOutOfDate`` when one changed)."""
    if not component_on(exec_properties):
        return False
    for name in names:
        check(by_name(name))
    return True


def with_parameter(spec: Any, spec_class: type, on: bool) -> Any:
    """A TFX component's ``spec`` as ``spec_class`` (a subclass of its class whose
    PARAMETERS add ``PARAMETER``), the ``speedups`` parameter set to ``on``."""
    return spec_class(**spec.exec_properties, **spec.inputs, **spec.outputs, **{PARAMETER: int(on)})


def switch_off() -> None:
    """Turns every speedup off in this process from now on, and in the processes it starts."""
    os.environ[ENV_VAR] = "0"


def follow(custom_config: dict[str, Any] | None) -> None:
    """User code run by a component (the Trainer's ``run_fn``, the Tuner's ``tuner_fn``) whose
    ``custom_config`` says the speedups are off: the switch goes off in this process and the
    processes it starts, and what building the model installed (AutoGraph's rule) is undone."""
    if (custom_config or {}).get(PARAMETER, 1):
        return
    from runtime.speedups import autograph

    switch_off()
    autograph.let_autograph_convert_tf_keras()


def switch_on() -> None:
    """Turns the speedups on in this process from now on, and in the processes it starts."""
    os.environ[ENV_VAR] = "1"


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


def _checked(stage: Stage, on: bool = True) -> Iterator[tuple[str, Any]]:
    """(name, the function that installs it) of every speedup of ``stage``, each checked just
    before it is handed out; nothing when ``on`` is False or the switch is off."""
    if not (on and enabled()):
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
def active(stage: Stage, on: bool = True) -> Iterator[list[str]]:
    """Within this block, every speedup of ``stage`` (each a context manager), each checked
    first; none when ``on`` (a component's parameter) is False or the switch is off. Yields
    the names."""
    with contextlib.ExitStack() as stack:
        names = []
        for name, function in _checked(stage, on):
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
