"""The Champion component and its readers: what it hands over with and without a recorded
champion, and how DriftGate's, the Trainer's and the Evaluator's inputs resolve its pointers."""

from __future__ import annotations

import dataclasses
import os
import types

import pytest

from components import evaluator
from components.champion import CHAMPION_PROPERTY, NODE_ID, NONE_REASON
from models import trainer
from models.hparams import PIPELINE_ROOT_KEY, WARM_START_KEY
from pipeline.pipeline import create_pipeline
from runtime import champion
from tests.support.harness import node, run_component


@pytest.fixture
def champion_node(small_config):
    return node(create_pipeline(small_config), NODE_ID)


def _run(champion_node, pipeline_root: str) -> dict:
    champion_node.exec_properties["pipeline_root"] = pipeline_root
    return run_component(champion_node, {}, os.path.join(pipeline_root, "run"))


def _recorded(pipeline_root: str) -> champion.Entry:
    model, blessing = os.path.join(pipeline_root, "Trainer", "model", "7"), os.path.join(pipeline_root, "b", "9")
    os.makedirs(os.path.join(model, champion.SERVING_DIR))
    open(os.path.join(model, champion.SERVING_DIR, "saved_model.pb"), "wb").close()
    os.makedirs(blessing)
    open(os.path.join(blessing, champion.BLESSED_FILE), "w").close()
    entry = champion.Entry(model, blessing, "/serving/1", "1")
    champion.write(pipeline_root, champion.Record().pushed(entry))
    return entry


def test_without_a_champion_both_outputs_are_marked_empty_with_the_reason(champion_node, tmp_path):
    outputs = _run(champion_node, str(tmp_path))
    for key in ("model", "model_blessing"):
        (artifact,) = outputs[key]
        assert champion.resolve(artifact.uri) == (None, "no model of this pipeline has been blessed and pushed yet")
        assert artifact.get_string_custom_property(CHAMPION_PROPERTY) == ""
        assert "blessed and pushed" in artifact.get_string_custom_property(NONE_REASON)


def test_the_recorded_champion_is_what_each_reader_reads(champion_node, tmp_path):
    entry = _recorded(str(tmp_path))
    outputs = _run(champion_node, str(tmp_path))
    (model,), (blessing,) = outputs["model"], outputs["model_blessing"]
    assert champion.resolve(blessing.uri) == (entry.blessing, "")
    assert model.get_string_custom_property(CHAMPION_PROPERTY) == entry.model
    # The Trainer gets TFX's serving path inside the pointer's directory.
    fn_args = types.SimpleNamespace(
        custom_config={WARM_START_KEY: True, PIPELINE_ROOT_KEY: str(tmp_path)},
        base_model=os.path.join(model.uri, champion.SERVING_DIR),
    )
    assert trainer.base_model(fn_args) == (os.path.join(entry.model, champion.SERVING_DIR), "")
    # The Evaluator compares with the champion's own directory.
    resolved = evaluator.champion_baseline({evaluator.MODEL: [], evaluator.BASELINE: [model]})
    assert [a.uri for a in resolved[evaluator.BASELINE]] == [entry.model]


def test_a_champion_whose_files_are_gone_is_no_baseline_and_each_reader_says_so(champion_node, tmp_path):
    entry = _recorded(str(tmp_path))
    os.remove(os.path.join(entry.model, champion.SERVING_DIR, "saved_model.pb"))
    (model,) = _run(champion_node, str(tmp_path))["model"]
    fn_args = types.SimpleNamespace(
        custom_config={WARM_START_KEY: True, PIPELINE_ROOT_KEY: str(tmp_path)},
        base_model=os.path.join(model.uri, champion.SERVING_DIR),
    )
    base, why = trainer.base_model(fn_args)
    assert base is None and "its model's files are gone" in why
    assert evaluator.BASELINE not in evaluator.champion_baseline({evaluator.BASELINE: [model]})


def test_the_local_runner_never_answers_the_champion_from_its_cache(small_config):
    from tfx.dsl.compiler.compiler import Compiler

    from runs.local_run import champion_always_runs

    cached = dataclasses.replace(small_config, enable_cache=True)
    ir = champion_always_runs(Compiler().compile(create_pipeline(cached)))
    caching = {
        n.pipeline_node.node_info.id: n.pipeline_node.execution_options.caching_options.enable_cache for n in ir.nodes
    }
    assert caching.pop(NODE_ID) is False and all(caching.values())
