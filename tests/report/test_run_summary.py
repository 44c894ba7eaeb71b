"""The run summary: read back from an ML Metadata store laid out as TFX's orchestrators
record a run, and formatted for the terminal. (A real run's summary, evaluation included,
is checked end to end in tests/test_local_runner.py.)"""

from __future__ import annotations

import json

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd

from models.problem import Blessing
from report.run_summary import ComponentRun, RunSummary, describe_failure, format_summary, summarize_run

PIPELINE = "taxi-big-tipper"
Execution = mlmd.Execution


class _Store:
    """Writes contexts, executions and artifacts as TFX's launchers record them."""

    def __init__(self, path):
        # On disk: summarize_run opens its own connection (an in-memory store is per connection).
        self.config = mlmd.ConnectionConfig()
        self.config.sqlite.filename_uri = str(path)
        self.config.sqlite.connection_mode = mlmd.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        self.store = metadata_store.MetadataStore(self.config)
        self._types: dict[tuple[str, str], int] = {}
        self._nodes: dict[str, int] = {}

    def _type(self, kind: str, name: str) -> int:
        if (kind, name) not in self._types:
            put = {
                "context": (self.store.put_context_type, mlmd.ContextType),
                "execution": (self.store.put_execution_type, mlmd.ExecutionType),
                "artifact": (self.store.put_artifact_type, mlmd.ArtifactType),
            }[kind]
            self._types[kind, name] = put[0](put[1](name=name))
        return self._types[kind, name]

    def context(self, type_name: str, name: str, parent: int | None = None) -> int:
        (context_id,) = self.store.put_contexts([mlmd.Context(type_id=self._type("context", type_name), name=name)])
        if parent is not None:
            self.store.put_parent_contexts([mlmd.ParentContext(child_id=context_id, parent_id=parent)])
        return context_id

    def execution(
        self, run: int, node_id: str, state, outputs: dict[str, mlmd.Artifact] = (), inputs: dict[str, int] = ()
    ) -> int:
        if node_id not in self._nodes:
            self._nodes[node_id] = self.context("node", f"{PIPELINE}.{node_id}")
        execution = Execution(type_id=self._type("execution", node_id), last_known_state=state)
        events = []
        for key, artifact in dict(outputs).items():
            artifact.type_id = self._type("artifact", key)
            events.append((artifact, _event(mlmd.Event.OUTPUT, key)))
        contexts = self.store.get_contexts_by_id([run, self._nodes[node_id]])
        execution_id, artifact_ids, _ = self.store.put_execution(execution, events, contexts)
        for key, artifact_id in dict(inputs).items():
            event = _event(mlmd.Event.INPUT, key)
            event.artifact_id, event.execution_id = artifact_id, execution_id
            self.store.put_events([event])
        return artifact_ids


def _event(event_type, key: str) -> mlmd.Event:
    event = mlmd.Event(type=event_type)
    event.path.steps.add().key = key
    return event


def _artifact(uri: str, **properties) -> mlmd.Artifact:
    artifact = mlmd.Artifact(uri=uri)
    for name, value in properties.items():
        if isinstance(value, str):
            artifact.custom_properties[name].string_value = value
        else:
            artifact.custom_properties[name].int_value = int(value)
    return artifact


@pytest.fixture
def recorded(tmp_path):
    """Two runs; the later one trained, was blessed against a baseline and pushed."""
    s = _Store(tmp_path / "metadata.db")
    pipeline = s.context("pipeline", PIPELINE)
    first = s.context("pipeline_run", "run-1", parent=pipeline)
    s.execution(first, "CsvExampleGen", Execution.FAILED)
    second = s.context("pipeline_run", "run-2", parent=pipeline)
    s.execution(second, "CsvExampleGen", Execution.CACHED)
    (model,) = s.execution(second, "Trainer", Execution.COMPLETE, outputs={"model": _artifact("/out/Trainer/model/7")})
    (baseline,) = s.execution(first, "Trainer", Execution.COMPLETE, outputs={"model": _artifact("/out/m/1")})
    s.execution(
        second,
        "Evaluator",
        Execution.COMPLETE,
        outputs={"blessing": _artifact("/out/b", blessed=1, baseline_model_uri="/out/m/1", baseline_is_candidate=0)},
        inputs={"model": model, "baseline_model": baseline},
    )
    s.execution(
        second,
        "Pusher",
        Execution.COMPLETE,
        outputs={"pushed_model": _artifact("/out/p", pushed=1, pushed_destination="/serving/123")},
    )
    return s


def test_the_latest_run_is_read_with_states_verdict_and_destination(recorded):
    summary = summarize_run(recorded.config, PIPELINE)
    assert summary.run_id == "run-2"
    assert [(c.node_id, c.state) for c in summary.components] == [
        ("CsvExampleGen", "cached"),
        ("Trainer", "complete"),
        ("Evaluator", "complete"),
        ("Pusher", "complete"),
    ]
    assert summary.blessed and summary.had_baseline and not summary.baseline_is_candidate
    assert summary.baseline == "/out/m/1"
    assert summary.pushed_to == "/serving/123"


def test_an_earlier_run_by_name(recorded):
    summary = summarize_run(recorded.config, PIPELINE, run_id="run-1")
    assert [(c.node_id, c.state) for c in summary.components] == [("CsvExampleGen", "FAILED"), ("Trainer", "complete")]
    assert summary.blessed is None and summary.pushed_to is None


def test_unknown_pipelines_and_runs_are_lookup_errors(recorded, tmp_path):
    with pytest.raises(LookupError, match="No pipeline named 'other'"):
        summarize_run(recorded.config, "other")
    with pytest.raises(LookupError, match="No run 'run-9'"):
        summarize_run(recorded.config, PIPELINE, run_id="run-9")
    empty = _Store(tmp_path / "empty.db")
    empty.context("pipeline", PIPELINE)
    with pytest.raises(LookupError, match="No runs of"):
        summarize_run(empty.config, PIPELINE)


def _summary(**fields) -> RunSummary:
    components = [ComponentRun("Trainer", "complete", 12.25), ComponentRun("Evaluator", "cached", 0.5)]
    return RunSummary(run_id="run-2", components=components, **fields)


def test_the_table_lists_components_and_the_total():
    lines = format_summary(_summary()).splitlines()
    assert lines[0] == "Run run-2"
    assert lines[2].split() == ["Trainer", "complete", "12.2"]
    assert lines[3].split() == ["Evaluator", "cached", "0.5"]
    assert lines[4].split() == ["total", "12.8"]
    assert "Model: not evaluated in this run" in lines


def test_how_much_of_the_data_the_model_saw_has_its_own_line():
    said = "the model saw 1,000,192 of the 10,000,000 training rows (10%)"
    assert f"Data seen: {said}" in format_summary(_summary(data_seen=said)).splitlines()
    assert "Data seen" not in format_summary(_summary())


def test_a_blessed_model_says_against_what_and_where_it_went():
    text = format_summary(
        _summary(
            metrics={"auc": 0.94567, "example_count": 5000.0},
            blessed=True,
            had_baseline=True,
            pushed_to="/serving/1",
            tensorboard_dir="/runs/7",
        ),
        Blessing("auc", 0.9),
    )
    assert "Eval metrics: auc 0.9457, example_count 5000" in text
    assert "Model: BLESSED: AUC 0.9457 >= floor 0.9 and no worse than the champion" in text
    assert "Pushed to: /serving/1" in text and "TensorBoard: tensorboard --logdir /runs/7" in text
    first = format_summary(_summary(metrics={"auc": 0.95}, blessed=True))
    assert "(first blessed model: no baseline to compare against)" in first
    error = format_summary(_summary(metrics={"rmse": 310.5}, blessed=True), Blessing("rmse", 450.0))
    assert "Model: BLESSED: RMSE 310.5000 <= ceiling 450 (first blessed model" in error


def test_a_cached_rerun_says_the_baseline_was_the_model_itself():
    text = format_summary(
        _summary(
            metrics={"auc": 0.95},
            blessed=True,
            had_baseline=True,
            baseline_is_candidate=True,
            evaluation_reused_from="/out/Evaluator/3",
        )
    )
    assert "the champion itself, reused from the cache: its evaluation too, from /out/Evaluator/3" in text


def test_an_unblessed_model_gives_the_failed_thresholds_and_pushes_nothing():
    text = format_summary(_summary(metrics={"auc": 0.7}, blessed=False, validation_failures=["auc: 0.7 is below 0.9"]))
    assert "Model: NOT blessed: auc: 0.7 is below 0.9" in text
    assert "Pushed to: nothing pushed (the model was not blessed)" in text


def _failure(name: str, value: float, threshold: str, is_diff: bool = False):
    from google.protobuf import text_format
    from tensorflow_model_analysis.proto import config_pb2, validation_result_pb2

    failure = validation_result_pb2.ValidationFailure(message="TFMA's own words")
    failure.metric_key.name, failure.metric_key.is_diff = name, is_diff
    failure.metric_value.double_value.value = value
    text_format.Parse(threshold, failure.metric_threshold)
    assert isinstance(failure.metric_threshold, config_pb2.MetricThreshold)
    return failure


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (_failure("auc", 0.85123, "value_threshold { lower_bound { value: 0.9 } }"), "auc 0.8512, under its floor 0.9"),
        (
            _failure("mean_squared_error", 2.5, "value_threshold { upper_bound { value: 1.5 } }"),
            "mean_squared_error 2.5000, over its ceiling 1.5",
        ),
        (
            _failure(
                "auc", -0.0131, "change_threshold { direction: HIGHER_IS_BETTER absolute { value: -0.002 } }", True
            ),
            "auc change -0.0131 against the champion, under the allowed -0.002",
        ),
        (
            _failure("loss", 0.2, "change_threshold { direction: LOWER_IS_BETTER relative { value: 0.1 } }", True),
            "loss relative change +0.2000 against the champion, over the allowed +0.1",
        ),
        (_failure("auc", 0.95, ""), "auc: TFMA's own words"),
    ],
)
def test_a_failed_threshold_names_the_metric_its_value_and_the_threshold(failure, said):
    assert describe_failure(failure) == said


def _measured(feature: str, value: float, threshold: float, split: str = "train") -> dict:
    return dict(
        split=split,
        feature=feature,
        measure="L-infinity distance",
        value=value,
        threshold=threshold,
        breached=value > threshold,
    )


def test_drift_checked_within_the_contract_names_the_closest_column():
    drift = {
        "baseline": "/b/1",
        "accepted": False,
        "drift": [_measured("company", 0.01, 0.1), _measured("payment_type", 0.15, 0.2)],
    }
    text = format_summary(_summary(drift=drift))
    closest = "(closest: [train] payment_type L-infinity distance 0.1500 of 0.2)"
    assert f"Drift: within the contract against the champion's data {closest}" in text


def test_accepted_drift_is_said_with_each_breach():
    drift = {
        "baseline": "/b/1",
        "accepted": True,
        "drift": [_measured("payment_type", 0.66, 0.2, "eval"), _measured("company", 0.01, 0.1)],
    }
    text = format_summary(_summary(drift=drift))
    assert "Drift: ACCEPTED with --accept-drift: [eval] payment_type L-infinity distance 0.6600 > 0.2" in text
    assert "company" not in text


def test_drift_without_a_baseline_says_it_was_not_checked():
    text = format_summary(_summary(drift={"baseline": None, "serving": None, "accepted": False, "drift": []}))
    assert "Drift: not checked" in text
    assert "Drift" not in format_summary(_summary())


def test_skew_against_serving_data_is_said():
    drift = {
        "baseline": None,
        "serving": "/s/2",
        "accepted": False,
        "drift": [_measured("company", 0.02, 0.1, "train vs serving")],
    }
    text = format_summary(_summary(drift=drift))
    assert "Drift: within the contract against the serving data (closest: [train vs serving] company" in text


def test_a_baseline_of_another_pipeline_is_not_claimed_as_compared():
    text = format_summary(_summary(metrics={"accuracy": 0.97}, blessed=True, ignored_baseline="/out/taxi/model/7"))
    assert "another pipeline's model was ignored, /out/taxi/model/7" in text
    assert "no worse than the champion" not in text


def test_the_trainers_choice_of_family_has_its_own_line(tmp_path):
    from models.choice import Choice, Trial
    from models.problem import ModelFamily
    from models.trainer import TRAINING_RECORD
    from report.run_summary import record_output

    trials = (Trial(ModelFamily.NETWORK, 4.47, 30.0), Trial(ModelFamily.TREES, 4.30, 6.0))
    chosen = Choice(ModelFamily.TREES, "rmse", "", trials, 16_000, 4_000)
    (tmp_path / TRAINING_RECORD).write_text(json.dumps({"family": "trees", "choice": chosen.to_record()}))
    summary = _summary()
    record_output(summary, "Trainer", "model_run", str(tmp_path), {}, {})
    assert f"Family: {chosen.describe()}" in format_summary(summary).splitlines()
    (tmp_path / TRAINING_RECORD).write_text(json.dumps({"family": "trees"}))
    named = _summary()
    record_output(named, "Trainer", "model_run", str(tmp_path), {}, {})
    assert named.family is None and "Family" not in format_summary(named)
