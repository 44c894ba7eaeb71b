"""The shipped problems other than taxi (data/penguins: multi-class; data/penguin-body-mass:
regression), each end to end: a local run with its own contract and default settings is
blessed and pushed, as good as references computed here on the run's own split; the pushed
model serves the spec's outputs; its model evaluated by the project's batched path scores as
by TFMA's defaults; and the compiled job carries the problem's names, never the taxi
problem's. Each problem's compiled job is rehearsed to a served model in
tests/rehearsal/test_two_problems.py, both into one store."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import kubeflow_runner
import local_runner
from bench import reference
from bench.reference import labels as _labels
from bench.reference import score as _score
from bench.reference import split as _split
from bench.reference import value as _value
from models import signatures
from models.preprocessing import PROBLEM_KEY
from models.problem import Problem, Task
from report.run_summary import summarize_run
from tests.support import cloud
from tests.support.evaluations import assert_same_metrics, assert_same_validation, evaluate_both_ways, stored_artifact
from tests.support.problems import SHIPPED, SHIPPED_DIRS, TAXI
from tests.support.runs import EXECUTED_COMPONENTS

PROBLEMS = sorted(name for name in SHIPPED if SHIPPED[name] is not TAXI)


# --- a local run, and its examples ----------------------------------------------------------


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory):
    """``local_runner.py --problem data/<name>`` with the problem's contract and default
    settings (no run report: the rehearsals below write one), once per problem: name ->
    (its configuration, its summary)."""
    runs = {}

    def run(name: str):
        if name not in runs:
            output_root = str(tmp_path_factory.mktemp(name))
            argv = ["--problem", str(SHIPPED_DIRS[name]), "--output-root", output_root, "--no-report"]
            assert local_runner.main(argv) == 0
            config = local_runner.config_from_args(local_runner.parse_args(argv))
            runs[name] = config, summarize_run(local_runner.metadata_config(config), config.pipeline_name)
        return runs[name]

    return run


def _without(example, columns: tuple[str, ...]) -> bytes:
    """A tf.Example as a client sends it: without the columns only the label comes from."""
    import tensorflow as tf

    request = tf.train.Example()
    request.CopyFrom(example)
    for key in columns:
        if key in request.features.feature:
            del request.features.feature[key]
    return request.SerializeToString()


def _text(value) -> str:
    """A cell as it reads in a CSV file (a float32 read back as the same float32)."""
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_a_local_run_with_the_problems_defaults_is_blessed_and_pushed(local_runs, name):
    problem = SHIPPED[name]
    config, summary = local_runs(name)
    assert config.schema_path == problem.contract_path and config.blessing == problem.blessing
    assert {c.node_id: c.state for c in summary.components} == dict.fromkeys(EXECUTED_COMPONENTS, "complete")
    assert summary.blessed and not summary.had_baseline and summary.validation_failures == []
    assert summary.pushed_to.startswith(os.path.join(config.output_root, "serving_model", problem.name))
    assert os.path.exists(os.path.join(summary.pushed_to, "saved_model.pb"))
    value = summary.metrics[problem.blessing.metric]
    assert value >= problem.blessing.threshold if problem.higher_is_better else value <= problem.blessing.threshold


# The tolerances against scikit-learn, from the runs made when this test was written (the
# references are the same in every run: the split is by hash, the models deterministic):
# - species: 140 eval rows, one miss is 0.007 of accuracy. The trivial answer scores 0.40,
#   both scikit-learn models 0.9857 (two misses); our model scored 0.9929 (one miss) in each
#   of 14 runs (local and rehearsed). 0.05 under the reference (seven misses more) is far
#   outside that noise and still fails a model that learnt clearly less than a logistic
#   regression does.
# - body mass: 139 eval rows; the trivial answer is off by 830 g, ridge by 291 g, boosted
#   trees by 313 g (320 g with one-hot categories, before bench/reference.py's native ones), so
#   the reference is 291 g. Our model (unseeded training) scored 304 to 338 g over 19 runs,
#   1.04 to 1.16 times the reference: 1.25 times (364 g) leaves room for that spread, and
#   fails a model that gave back a seventh of what the reference gains over the trivial answer.
ACCURACY_BELOW_REFERENCE = 0.05
RMSE_OVER_REFERENCE = 1.25
# "Clearly better than the trivial answer": at most half its errors (1 - accuracy), half its RMSE.
TRIVIAL_ERROR_SHARE = 0.5


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_the_local_runs_model_beats_the_trivial_answer_and_nears_scikit_learn_on_its_own_split(local_runs, name):
    problem = SHIPPED[name]
    _, summary = local_runs(name)
    examples_uri = summary.outputs["CsvExampleGen.examples"]
    train, eval_ = _split(examples_uri, "train"), _split(examples_uri, "eval")
    # The Evaluator judged the model on exactly these rows.
    assert summary.metrics["example_count"] == len(eval_)
    # The trivial answer, and the better of a linear model and boosted trees (bench/reference.py).
    references = reference.references(problem, train, eval_, with_linear=True)
    ours = summary.metrics[problem.blessing.metric]
    seen = f"{problem.blessing.metric}: ours {ours:.4f}, references {references}"
    print(seen)
    if problem.higher_is_better:
        assert 1 - ours <= TRIVIAL_ERROR_SHARE * (1 - references[reference.TRIVIAL]), seen
        assert ours >= references[reference.BEST] - ACCURACY_BELOW_REFERENCE, seen
    else:
        assert ours <= TRIVIAL_ERROR_SHARE * references[reference.TRIVIAL], seen
        assert ours <= RMSE_OVER_REFERENCE * references[reference.BEST], seen


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_the_pushed_model_serves_the_specs_outputs_without_the_label(local_runs, name):
    import tensorflow as tf

    problem = SHIPPED[name]
    _, summary = local_runs(name)
    eval_ = _split(summary.outputs["CsvExampleGen.examples"], "eval")
    rows = len(eval_)
    model = tf.saved_model.load(summary.pushed_to)

    # serving_default: serialized tf.Examples that lack the label's column.
    requests = tf.constant([_without(e, problem.label_only_columns) for e in eval_])
    served = {k: v.numpy() for k, v in model.signatures[signatures.SERVING_SIGNATURE](examples=requests).items()}
    if problem.task == Task.MULTICLASS:
        assert set(served) == {signatures.PROBABILITIES_KEY, problem.label.name}
        probabilities = served[signatures.PROBABILITIES_KEY]
        assert probabilities.shape == (rows, len(problem.label.classes))
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
        assert ((probabilities >= 0) & (probabilities <= 1)).all()
        names = [v.decode() for v in served[problem.label.name].reshape(-1)]
        assert names == [problem.label.classes[i] for i in probabilities.argmax(axis=1)]
        predicted = names
    else:
        assert set(served) == {problem.label.name}
        values = served[problem.label.name]
        assert values.shape[0] == rows and values.size == rows and np.isfinite(values).all()
        predicted = values.reshape(-1)
    # What it serves is what the Evaluator judged (the same model, the same rows).
    metric = problem.blessing.metric
    assert _score(problem, _labels(eval_, problem), predicted) == pytest.approx(summary.metrics[metric], rel=1e-4)

    # serving_raw: each column by name as CSV text; the label's column is not one of them.
    raw = model.signatures[signatures.RAW_SIGNATURE]
    _, inputs = raw.structured_input_signature
    assert not set(problem.label_only_columns) & set(inputs), sorted(inputs)
    assert set(problem.features.inputs) <= set(inputs)
    columns = {key: tf.constant([_text(_value(e, key)) for e in eval_]) for key in inputs}
    answered = {k: v.numpy() for k, v in raw(**columns).items()}
    assert set(answered) == set(served)
    for key, value in served.items():
        if value.dtype.kind in "SO":
            assert answered[key].tolist() == value.tolist(), key
        else:
            np.testing.assert_allclose(answered[key], value, rtol=1e-5, atol=1e-5, err_msg=key)


@pytest.fixture(scope="module")
def local_evaluations(local_runs, tmp_path_factory):
    """Each local run's model evaluated on its eval split both ways, the project's batched
    path and TFMA's defaults, each without and with a baseline (tests/support/evaluations.py),
    once per problem: name -> (name, with a baseline) -> the Evaluator's outputs. The batched
    evaluation without a baseline is the run's own Evaluator's (its first: no champion yet)."""
    evaluations = {}

    def evaluate(name: str) -> dict:
        if name not in evaluations:
            config, summary = local_runs(name)
            store = local_runner.metadata_config(config)
            examples, model, evaluation, blessing = (
                [stored_artifact(store, summary.outputs[key])]
                for key in ("CsvExampleGen.examples", "Trainer.model", "Evaluator.evaluation", "Evaluator.blessing")
            )
            assert not summary.had_baseline  # the run's evaluation is one without a baseline
            run = {("batched", False): {"evaluation": evaluation, "blessing": blessing}}
            root = str(tmp_path_factory.mktemp(f"{name}-evaluations"))
            evaluations[name] = evaluate_both_ways(config, examples, model, root, done=run)
        return evaluations[name]

    return evaluate


@pytest.mark.slow
@pytest.mark.parametrize("with_baseline", [False, True])
@pytest.mark.parametrize("name", PROBLEMS)
def test_multi_class_and_regression_metrics_equal_tfmas_default_computation(local_evaluations, name, with_baseline):
    """The Evaluator's batched extractors and metrics (models/evaluation.py) on a multi-class
    and a regression model, in the run and with a baseline: the same metrics, plots,
    validation and blessing as TFMA's per-example defaults (the binary problem's:
    tests/models/test_evaluation.py)."""
    problem = SHIPPED[name]
    evaluations = local_evaluations(name)
    keys = assert_same_metrics(evaluations, with_baseline)
    assert len({key[0] for key in keys}) > 1  # the overall slice and the spec's
    expected = {"accuracy", "plot"} if problem.task == Task.MULTICLASS else {"rmse", "mae", "mean_label"}
    assert {key[1] for key in keys} >= expected | {"example_count"}
    assert_same_validation(evaluations, with_baseline)


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_every_task_trains_on_its_streamed_splits_through_the_whole_pipeline(local_runs, name):
    """No split in memory (``in_memory_max_mb=0``, as a split past the limit, or a feature
    that is not dense, takes): the Trainer streams both splits, and the model is evaluated.
    Multi-class and regression here; the binary task (taxi) streams through the same
    ``run_fn`` in tests/models/test_trainer.py, in this process and on two replicas. The
    whole pipeline runs again on the local run's output root with the cache on: what precedes
    the Trainer, the same data and settings, is that run's; the Trainer and what follows run."""
    problem = SHIPPED[name]
    config, _ = local_runs(name)
    logs = Path(config.output_root) / "logs" / problem.name
    earlier = set(logs.glob("run-*.log"))
    argv = ["--problem", str(SHIPPED_DIRS[name]), "--output-root", config.output_root, "--no-report"]
    argv += ["--hparam", "in_memory_max_mb=0", "--train-steps", "60", "--epochs", "2", "--enable-cache"]
    assert local_runner.main(argv) == 0
    config = local_runner.config_from_args(local_runner.parse_args(argv))
    summary = summarize_run(local_runner.metadata_config(config), config.pipeline_name)
    states = {c.node_id: c.state for c in summary.components}
    assert states["Trainer"] == states["Evaluator"] == "complete"
    assert states["Transform"] == "cached", states  # the local run's: this run's is the Trainer's input
    assert np.isfinite(summary.metrics[problem.blessing.metric])
    (log,) = set(logs.glob("run-*.log")) - earlier
    assert log.read_text().count("Streaming 1 file(s)") == 2 and "into memory" not in log.read_text()


# --- the compiled job, offline ------------------------------------------------------------


def _taxi_names() -> set[str]:
    return {*TAXI.raw_columns, TAXI.label.name, TAXI.name, *TAXI.slices}


@pytest.mark.usefixtures("loopback_only")
@pytest.mark.parametrize("name", PROBLEMS)
def test_a_compiled_job_carries_its_problem_and_nothing_of_taxis(name, tmp_path):
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    problem = SHIPPED[name]
    output = tmp_path / "job.json"
    argv = [*cloud.CLOUD_ARGS, "--problem", str(SHIPPED_DIRS[name]), "--output-file", str(output)]
    assert kubeflow_runner.main(argv) == 0
    text = output.read_text()
    alternatives = "|".join(map(re.escape, sorted(_taxi_names())))
    taxi = sorted(set(re.findall(rf"(?<![A-Za-z0-9_])(?:{alternatives})(?![A-Za-z0-9_])", text)))
    assert taxi == [], f"the {problem.name} job names the taxi problem's {taxi}"

    job = json.loads(text)
    assert job["displayName"] == job["pipelineSpec"]["pipelineInfo"]["name"] == problem.name
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]

    def parameter(task: str, key: str) -> str:
        return tasks[task]["inputs"]["parameters"][key]["runtimeValue"]["constant"]

    assert Problem.from_json(parameter("AnomalyGate", "problem")) == problem
    for task in ("Transform", "Trainer"):
        assert Problem.from_json(json.loads(parameter(task, "custom_config"))[PROBLEM_KEY]) == problem
    eval_config = json_format.Parse(parameter("Evaluator", "eval_config"), tfma.EvalConfig())
    assert [k for spec in eval_config.slicing_specs for k in spec.feature_keys] == list(problem.slices)
    (gated,) = [m for spec in eval_config.metrics_specs for m in spec.metrics if m.per_slice_thresholds]
    assert json.loads(gated.config)["name"] == problem.blessing.metric
    bounds = gated.per_slice_thresholds[0].threshold.value_threshold
    bound = bounds.lower_bound if problem.higher_is_better else bounds.upper_bound
    assert bound.value == pytest.approx(problem.blessing.threshold)
