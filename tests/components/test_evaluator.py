"""The Evaluator that never evaluates a model against itself, nor the same model on the
same data twice: the same verdict and candidate metrics, one model evaluated, an earlier
identical evaluation copied; a different baseline still compared, unless it is another
pipeline's (not under this pipeline's root): then ignored, in one logged line, and recorded."""

from __future__ import annotations

import filecmp
import json
import os
import shutil

import pytest
import tensorflow_model_analysis as tfma
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.types import standard_artifacts

from components.drift import STATISTICS_DIR, read_statistics_dir
from components.drift_gate import IGNORED_BASELINE, PIPELINE_ROOT
from components.evaluator import (
    BASELINE,
    EXAMPLES,
    KEY_FILE,
    MODEL,
    REUSED_FROM,
    Evaluator,
    evaluation_key,
    find_previous_evaluation,
    is_self_comparison,
    own_baseline_only,
)
from pipeline.pipeline import create_pipeline
from tests.support.harness import node, run_component


def _artifact(uri: str, artifact_id: int = 0, artifact_type=standard_artifacts.Model):
    artifact = artifact_type()
    artifact.uri = uri
    if artifact_id:
        artifact.id = artifact_id
    return artifact


def _model(uri: str, artifact_id: int = 0):
    return _artifact(uri, artifact_id)


def _examples(uri: str, artifact_id: int = 0):
    return _artifact(uri, artifact_id, standard_artifacts.Examples)


def test_self_comparison_is_the_same_artifact_only():
    assert is_self_comparison({MODEL: [_model("/m/1", 7)], BASELINE: [_model("/m/1", 7)]})
    assert is_self_comparison({MODEL: [_model("/m/1")], BASELINE: [_model("/m/1")]})  # not yet in MLMD
    assert not is_self_comparison({MODEL: [_model("/m/2", 8)], BASELINE: [_model("/m/1", 7)]})
    assert not is_self_comparison({MODEL: [_model("/m/1")], BASELINE: []})
    assert not is_self_comparison({MODEL: [_model("/m/1")]})


def test_the_pipeline_uses_it(small_config):
    evaluator = node(create_pipeline(small_config), "Evaluator")
    assert isinstance(evaluator, Evaluator)
    assert evaluator.exec_properties[PIPELINE_ROOT] == small_config.pipeline_root


def _scoped_evaluator(config, pipeline_root: str):
    """The pipeline's Evaluator (a fresh one), its own baselines being those under ``pipeline_root``."""
    evaluator = node(create_pipeline(config), "Evaluator")
    evaluator.exec_properties[PIPELINE_ROOT] = pipeline_root
    return evaluator


def _metric_keys(evaluation) -> list:
    return [kv.key for record in tfma.load_metrics(evaluation[0].uri) for kv in record.metric_keys_and_values]


def _values(evaluation, model_name: str = "") -> dict[str, float]:
    return {
        kv.key.name: kv.value.double_value.value
        for record in tfma.load_metrics(evaluation[0].uri)
        for kv in record.metric_keys_and_values
        if kv.key.model_name == model_name and not kv.key.is_diff
    }


@pytest.fixture(scope="module")
def against_itself(pipe, root, examples, trainer):
    model = trainer["model"]
    return run_component(
        node(pipe, "Evaluator"),
        {"examples": examples, "model": model, "baseline_model": model},
        os.path.join(root, "against_itself"),
    )


@pytest.fixture(scope="module")
def against_a_copy(small_config, root, examples, trainer):
    """The same model under another URI: a genuine baseline as far as the Evaluator knows,
    and this pipeline's (the harness writes every output under ``root``)."""
    copy = _model(os.path.join(root, "baseline_copy"))
    shutil.copytree(trainer["model"][0].uri, copy.uri)
    return run_component(
        _scoped_evaluator(small_config, root),
        {"examples": examples, "model": trainer["model"], "baseline_model": [copy]},
        os.path.join(root, "against_copy"),
    )


def test_a_model_against_itself_is_evaluated_once_with_the_same_verdict(against_itself, evaluator):
    assert against_itself["blessing"][0].get_int_custom_property("blessed") == 1
    keys = _metric_keys(against_itself["evaluation"])
    assert not any(key.is_diff for key in keys)  # one model: no baseline comparison ran
    # The candidate's metrics are the ones the Evaluator computes without a baseline.
    assert _values(against_itself["evaluation"]) == _values(evaluator["evaluation"])
    assert tfma.load_validation_result(against_itself["evaluation"][0].uri).validation_ok


def test_the_blessing_keeps_the_statistics_of_the_data_for_the_next_drift_check(evaluator, statistics):
    kept = os.path.join(evaluator["blessing"][0].uri, STATISTICS_DIR)
    assert sorted(os.listdir(kept)) == sorted(os.listdir(statistics[0].uri))
    assert read_statistics_dir(kept) == read_statistics_dir(statistics[0].uri)


def test_a_different_baseline_is_still_compared(against_a_copy, evaluator, root):
    keys = _metric_keys(against_a_copy["evaluation"])
    assert any(key.is_diff and key.name == "auc" for key in keys)  # candidate minus baseline
    assert against_a_copy["blessing"][0].get_int_custom_property("blessed") == 1
    # Stamped with the pipeline's root, which the compiled resolver's query asks for.
    assert against_a_copy["blessing"][0].get_string_custom_property(PIPELINE_ROOT) == root
    assert _values(against_a_copy["evaluation"], "candidate")["auc"] == _values(evaluator["evaluation"])["auc"]


def test_the_evaluation_key_changes_with_every_input_it_depends_on():
    props = {"eval_config": '{"model_specs": []}', "module_path": "models.evaluation"}
    inputs = {MODEL: [_model("/m/1", 7)], EXAMPLES: [_examples("/e/1", 3)]}
    key = evaluation_key(inputs, props)
    assert evaluation_key(dict(inputs), dict(props)) == key
    assert evaluation_key({**inputs, MODEL: [_model("/m/2", 8)]}, props) != key
    assert evaluation_key({**inputs, EXAMPLES: [_examples("/e/2", 4)]}, props) != key
    assert evaluation_key({**inputs, BASELINE: [_model("/m/0", 6)]}, props) != key
    assert evaluation_key(inputs, {**props, "eval_config": '{"model_specs": [{}]}'}) != key
    assert evaluation_key(inputs, {**props, "module_path": "models.problem"}) != key  # other code


def test_an_unknown_evaluator_module_is_named():
    with pytest.raises(ValueError, match="no_such_module"):
        evaluation_key({MODEL: [_model("/m/1")]}, {"module_path": "no_such_module"})


def test_only_a_finished_sibling_with_the_same_key_is_found(tmp_path):
    parent = tmp_path / "Evaluator" / "evaluation"
    for execution, content in (
        ("1", json.dumps({"key": "other", "validated": True})),
        ("2", "not json"),
        ("4", json.dumps({"key": "abc", "validated": True})),
    ):
        (parent / execution).mkdir(parents=True)
        (parent / execution / KEY_FILE).write_text(content)
    (parent / "3").mkdir()  # failed or unfinished: no key file
    assert find_previous_evaluation(str(parent / "5"), "abc") == (str(parent / "4"), {"key": "abc", "validated": True})
    assert find_previous_evaluation(str(parent / "4"), "abc") is None  # never itself
    assert find_previous_evaluation(str(parent / "5"), "missing") is None
    assert find_previous_evaluation(str(tmp_path / "elsewhere" / "1"), "abc") is None


@pytest.fixture(scope="module")
def first_evaluation(pipe, root, examples, trainer):
    """A first run's Evaluator: no blessed model yet, so no baseline."""
    return run_component(
        node(pipe, "Evaluator"),
        {"examples": examples, "model": trainer["model"]},
        os.path.join(root, "rerun"),
        execution="1",
    )


def test_a_rerun_on_the_same_model_reuses_the_first_evaluation(
    pipe, root, examples, trainer, first_evaluation, statistics, monkeypatch
):
    def no_tfma(*args, **kwargs):
        raise AssertionError("TFMA ran although an identical evaluation exists")

    monkeypatch.setattr(tfx_evaluator.tfma, "ExtractEvaluateAndWriteResults", no_tfma)
    model = trainer["model"]
    # The cached rerun: the model is now also the last blessed one.
    second = run_component(
        node(pipe, "Evaluator"),
        {"examples": examples, "model": model, "baseline_model": model, "statistics": statistics},
        os.path.join(root, "rerun"),
        execution="2",
    )
    first_uri, second_uri = first_evaluation["evaluation"][0].uri, second["evaluation"][0].uri
    assert second["evaluation"][0].get_string_custom_property(REUSED_FROM) == first_uri
    assert not filecmp.dircmp(first_uri, second_uri).diff_files
    assert sorted(os.listdir(first_uri)) == sorted(os.listdir(second_uri))
    assert _values(second["evaluation"]) == _values(first_evaluation["evaluation"])
    first_blessing, blessing = first_evaluation["blessing"][0], second["blessing"][0]
    assert blessing.get_int_custom_property("blessed") == first_blessing.get_int_custom_property("blessed") == 1
    # The statistics are kept on this path too (the first run was given none).
    assert sorted(os.listdir(first_blessing.uri)) == ["BLESSED"]
    assert sorted(os.listdir(blessing.uri)) == ["BLESSED", STATISTICS_DIR]
    assert blessing.get_string_custom_property("current_model") == model[0].uri


def test_a_rerun_on_other_examples_evaluates_again(pipe, root, trainer, examples, first_evaluation):
    copy = _examples(os.path.join(root, "examples_copy"))
    copy.split_names = examples[0].split_names
    shutil.copytree(examples[0].uri, copy.uri)
    third = run_component(
        node(pipe, "Evaluator"),
        {"examples": [copy], "model": trainer["model"]},
        os.path.join(root, "rerun"),
        execution="3",
    )
    assert not third["evaluation"][0].get_string_custom_property(REUSED_FROM)
    assert os.path.exists(os.path.join(third["evaluation"][0].uri, KEY_FILE))
    assert _values(third["evaluation"]) == _values(first_evaluation["evaluation"])


def _ignored_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Baseline ignored")]


@pytest.mark.parametrize(
    ("baseline", "kept"),
    [
        ("/o/pipelines/taxi/rehearsal/job-1/Trainer_5/model", True),
        ("/o/pipelines/taxi/Trainer/model/5", True),
        ("/o/pipelines/taxi-2/rehearsal/job-1/Trainer_5/model", False),  # a name that starts like ours
        ("/o/pipelines/penguin-species/Trainer/model/5", False),
    ],
)
def test_only_a_baseline_under_the_pipeline_root_is_kept(baseline, kept, caplog):
    inputs = {MODEL: [_model("/o/pipelines/taxi/Trainer/model/9", 9)], BASELINE: [_model(baseline, 5)]}
    caplog.set_level("INFO")
    found, ignored = own_baseline_only(inputs, {PIPELINE_ROOT: "/o/pipelines/taxi"})
    if kept:
        assert found == inputs and ignored is None and _ignored_lines(caplog) == []
    else:
        assert found == {MODEL: inputs[MODEL]} and ignored == baseline
        (line,) = _ignored_lines(caplog)
        assert f"model {baseline} is not under this pipeline's root /o/pipelines/taxi" in line
        assert "without a baseline, as on a first run" in line


def test_without_a_root_or_a_baseline_nothing_is_dropped():
    inputs = {MODEL: [_model("/m/9", 9)], BASELINE: [_model("/elsewhere/5", 5)]}
    assert own_baseline_only(inputs, {}) == (inputs, None)
    assert own_baseline_only({MODEL: inputs[MODEL]}, {PIPELINE_ROOT: "/o"}) == ({MODEL: inputs[MODEL]}, None)
    assert own_baseline_only({**inputs, BASELINE: []}, {PIPELINE_ROOT: "/o"})[1] is None


def test_another_pipelines_model_is_not_compared_with_and_the_outputs_say_so(
    small_config, root, examples, trainer, evaluator, tmp_path, caplog
):
    own_root, other = tmp_path / "pipelines" / "taxi", tmp_path / "pipelines" / "taxi-2"
    foreign = _model(str(other / "rehearsal" / "job-1" / "Trainer_5" / "model"), 5)
    shutil.copytree(trainer["model"][0].uri, foreign.uri)
    caplog.set_level("INFO")
    outputs = run_component(
        _scoped_evaluator(small_config, str(own_root)),
        {"examples": examples, "model": trainer["model"], "baseline_model": [foreign]},
        str(own_root / "Evaluator"),
    )
    (line,) = _ignored_lines(caplog)
    assert foreign.uri in line and str(own_root) in line
    assert not any(key.is_diff or key.model_name == "baseline" for key in _metric_keys(outputs["evaluation"]))
    # Evaluated as a first run is: the candidate's metrics and verdict without a baseline.
    assert _values(outputs["evaluation"]) == _values(evaluator["evaluation"])
    evaluation, blessing = outputs["evaluation"][0], outputs["blessing"][0]
    assert blessing.get_int_custom_property("blessed") == 1
    assert evaluation.get_string_custom_property(IGNORED_BASELINE) == foreign.uri
    assert blessing.get_string_custom_property(IGNORED_BASELINE) == foreign.uri


def test_an_evaluation_in_another_runs_directory_is_found_through_the_pipelines_index(tmp_path):
    """Vertex and Kubeflow give each run's outputs a directory of their own."""
    from components.evaluator import index_path

    root = tmp_path / "root"
    earlier = root / "run-1" / "Evaluator" / "evaluation"
    earlier.mkdir(parents=True)
    (earlier / KEY_FILE).write_text(json.dumps({"key": "abc", "validated": True}))
    later = str(root / "run-2" / "Evaluator" / "evaluation")
    assert find_previous_evaluation(later, "abc", str(root)) is None  # not indexed yet
    os.makedirs(os.path.dirname(index_path(str(root), "abc")))
    open(index_path(str(root), "abc"), "w").write(str(earlier))
    assert find_previous_evaluation(later, "abc", str(root)) == (str(earlier), {"key": "abc", "validated": True})
    (earlier / KEY_FILE).unlink()  # pruned: the index alone finds nothing
    assert find_previous_evaluation(later, "abc", str(root)) is None
