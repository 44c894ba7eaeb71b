"""The Evaluator that never evaluates a model against itself, nor the same model on the
same data twice: the same verdict and candidate metrics, one model evaluated, an earlier
identical evaluation copied; a different baseline still compared."""

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
    assert isinstance(node(create_pipeline(small_config), "Evaluator"), Evaluator)


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
def against_a_copy(pipe, root, examples, trainer):
    """The same model under another URI: a genuine baseline as far as the Evaluator knows."""
    copy = _model(os.path.join(root, "baseline_copy"))
    shutil.copytree(trainer["model"][0].uri, copy.uri)
    return run_component(
        node(pipe, "Evaluator"),
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


def test_a_different_baseline_is_still_compared(against_a_copy, evaluator):
    keys = _metric_keys(against_a_copy["evaluation"])
    assert any(key.is_diff and key.name == "auc" for key in keys)  # candidate minus baseline
    assert against_a_copy["blessing"][0].get_int_custom_property("blessed") == 1
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
