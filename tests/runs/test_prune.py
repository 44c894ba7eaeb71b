"""Pruning (runs/prune.py): the policy on ML Metadata stores recorded here as TFX records
runs, the command's refusals, then whole local runs pruned and run again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

import local_runner
from pipeline.config import PipelineConfig
from report.run_summary import summarize_run
from runs import prune
from runs.run_lock import hold_run_lock
from runtime import champion
from tests.support.runs import EXECUTED_COMPONENTS, SMALL_RUN

LIVE, DELETED = metadata_store_pb2.Artifact.LIVE, metadata_store_pb2.Artifact.DELETED


class RecordedRuns:
    """A pipeline's runs written into a real ML Metadata store the way TFX's launcher writes
    them: pipeline, run and node contexts, executions with INPUT and OUTPUT events, outputs
    under ``<pipeline root>/<node>/<key>/<execution id>`` (a directory with one file each),
    and the ``.system/executor_execution/<id>`` directory it leaves behind."""

    def __init__(self, output_root: Path) -> None:
        self.config = PipelineConfig(output_root=str(output_root), infer_schema=True)
        os.makedirs(os.path.dirname(self.config.metadata_path))
        connection = metadata_store_pb2.ConnectionConfig()
        connection.sqlite.filename_uri = self.config.metadata_path
        self.store = metadata_store.MetadataStore(connection)
        self.pipeline = self._context("pipeline", self.config.pipeline_name)
        self.run: metadata_store_pb2.Context | None = None
        self.runs = 0

    @property
    def root(self) -> str:
        return self.config.pipeline_root

    def _context(self, type_name: str, name: str) -> metadata_store_pb2.Context:
        type_id = self.store.put_context_type(metadata_store_pb2.ContextType(name=type_name))
        found = self.store.get_context_by_type_and_name(type_name, name)
        if found is None:
            [context_id] = self.store.put_contexts([metadata_store_pb2.Context(type_id=type_id, name=name)])
            found = self.store.get_contexts_by_id([context_id])[0]
        return found

    def new_run(self) -> None:
        self.runs += 1
        self.run = self._context("pipeline_run", f"run-{self.runs}")

    def execute(
        self,
        node: str,
        outputs: dict[str, str] | None = None,
        inputs: dict[str, list[int]] | None = None,
        cached: dict[str, list[int]] | None = None,
        properties: dict[str, dict] | None = None,
        state: int = metadata_store_pb2.Execution.COMPLETE,
        stateful_index: str | None = None,
    ) -> dict[str, int]:
        """One execution of ``node`` in the current run: new outputs (key -> TFX type name), or
        an earlier execution's (``cached``); returns the output artifacts' ids by key."""
        from tfx.types import standard_artifacts

        type_id = self.store.put_execution_type(metadata_store_pb2.ExecutionType(name=node))
        execution = metadata_store_pb2.Execution(type_id=type_id, last_known_state=state)
        if stateful_index:
            execution.custom_properties[prune.STATEFUL_INDEX].string_value = stateful_index
            os.makedirs(os.path.join(self.root, node, prune.SYSTEM_DIR, prune.STATEFUL_DIR, stateful_index))
        [execution.id] = self.store.put_executions([execution])
        if not cached:
            os.makedirs(os.path.join(self.root, node, prune.SYSTEM_DIR, prune.EXECUTOR_DIR, str(execution.id)))

        def event(kind: int, key: str) -> metadata_store_pb2.Event:
            found = metadata_store_pb2.Event(type=kind)
            found.path.steps.add().key = key
            found.path.steps.add().index = 0
            return found

        pairs = []
        for kind, by_key in ((metadata_store_pb2.Event.INPUT, inputs), (metadata_store_pb2.Event.OUTPUT, cached)):
            for key, ids in (by_key or {}).items():
                pairs += [(artifact, event(kind, key)) for artifact in self.store.get_artifacts_by_id(ids)]
        for key, type_name in (outputs or {}).items():
            artifact_type = getattr(standard_artifacts, type_name)().artifact_type
            uri = os.path.join(self.root, node, key, str(execution.id))
            os.makedirs(uri)
            Path(uri, "data").write_bytes(b"x" * 1000)
            artifact = metadata_store_pb2.Artifact(
                type_id=self.store.put_artifact_type(artifact_type), uri=uri, state=LIVE
            )
            for name, value in (properties or {}).get(key, {}).items():
                field = "int_value" if isinstance(value, int) else "string_value"
                setattr(artifact.custom_properties[name], field, value)
            pairs.append((artifact, event(metadata_store_pb2.Event.OUTPUT, key)))
        node_context = self._context("node", f"{self.config.pipeline_name}.{node}")
        _, artifact_ids, _ = self.store.put_execution(
            execution, pairs, [self.pipeline, self.run, node_context], reuse_context_if_already_exist=True
        )
        return {e.path.steps[0].key: i for (_, e), i in zip(pairs, artifact_ids, strict=True) if e.type == e.OUTPUT}

    def full_run(self, blessed: bool = True, baseline: int | None = None) -> dict[str, int]:
        """A run of the DAG's artifact-bearing part: examples, statistics, a model, its
        evaluation and blessing (against ``baseline``), and its push (pushed when blessed)."""
        self.new_run()
        out = self.execute("CsvExampleGen", {"examples": "Examples"})
        out |= self.execute("StatisticsGen", {"statistics": "ExampleStatistics"}, {"examples": [out["examples"]]})
        out |= self.execute("Trainer", {"model": "Model", "model_run": "ModelRun"}, {"examples": [out["examples"]]})
        evaluator_inputs = {"model": [out["model"]], "statistics": [out["statistics"]]}
        if baseline is not None:
            evaluator_inputs["baseline_model"] = [baseline]
        out |= self.execute(
            "Evaluator",
            {"evaluation": "ModelEvaluation", "blessing": "ModelBlessing"},
            evaluator_inputs,
            properties={"blessing": {"blessed": int(blessed), "current_model_id": out["model"]}},
        )
        destination = os.path.join(self.config.serving_model_dir, str(self.runs))
        out |= self.execute(
            "Pusher",
            {"pushed_model": "PushedModel"},
            {"model": [out["model"]], "model_blessing": [out["blessing"]]},
            properties={"pushed_model": {"pushed": int(blessed), "pushed_destination": destination}},
        )
        if blessed:  # as the Pusher records what it pushed (components/pusher.py)
            model, blessing = self.store.get_artifacts_by_id([out["model"], out["blessing"]])
            entry = champion.Entry(model.uri, blessing.uri, destination, str(self.runs))
            champion.update(self.root, lambda record: record.pushed(entry))
        return out

    def cached_run(self, earlier: dict[str, int]) -> None:
        """A run every execution of which was answered from the cache with ``earlier``'s outputs."""
        self.new_run()
        for node, keys in {
            "CsvExampleGen": ["examples"],
            "StatisticsGen": ["statistics"],
            "Trainer": ["model", "model_run"],
            "Evaluator": ["evaluation", "blessing"],
            "Pusher": ["pushed_model"],
        }.items():
            self.execute(node, cached={key: [earlier[key]] for key in keys}, state=metadata_store_pb2.Execution.CACHED)

    def state(self, artifact_id: int) -> int:
        return self.store.get_artifacts_by_id([artifact_id])[0].state

    def present(self, artifact_id: int) -> bool:
        """LIVE and its files there."""
        [artifact] = self.store.get_artifacts_by_id([artifact_id])
        return artifact.state == LIVE and os.path.exists(artifact.uri)

    def gone(self, artifact_id: int) -> bool:
        """DELETED and its files removed."""
        [artifact] = self.store.get_artifacts_by_id([artifact_id])
        return artifact.state == DELETED and not os.path.exists(artifact.uri)

    def prune(self, keep_runs: int, dry_run: bool = False) -> prune.PruneReport:
        return prune.prune(self.config.metadata_path, self.config.pipeline_name, self.root, keep_runs, dry_run)


@pytest.fixture
def recorded(tmp_path) -> RecordedRuns:
    return RecordedRuns(tmp_path / "out")


def _tree(root: str) -> list[tuple[str, int]]:
    """Every path under ``root`` with its size (0 for a directory)."""
    found = []
    for directory, dirs, files in os.walk(root):
        found += [(os.path.join(directory, d), 0) for d in dirs]
        found += [(os.path.join(directory, f), os.path.getsize(os.path.join(directory, f))) for f in files]
    return sorted(found)


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_latest_runs_stay_and_older_artifacts_are_deleted_in_files_and_state(recorded):
    first = recorded.full_run()
    second = recorded.full_run(baseline=first["model"])
    third = recorded.full_run(baseline=second["model"])
    report = recorded.prune(keep_runs=2)
    assert report.runs == 3 and report.runs_kept == ["run-3", "run-2"] and report.runs_pruned == ["run-1"]
    assert all(recorded.present(i) for i in [*second.values(), *third.values()])
    # The first run's model was pushed: it, its blessing and its push stay; the rest goes.
    pushed = ("model", "blessing", "pushed_model")
    assert all(recorded.present(first[key]) for key in pushed)
    assert all(recorded.gone(first[key]) for key in first if key not in pushed)
    assert sorted(r.artifact_id for r in report.removed) == sorted(first[k] for k in first if k not in pushed)
    assert report.bytes_freed >= 1000 * len(report.removed)
    assert report.champion_model == third["model"] and report.champion_blessings == [third["blessing"]]
    assert report.pushed == {
        run["model"]: os.path.join(recorded.config.serving_model_dir, str(n))
        for n, run in enumerate((first, second, third), 1)
    }


def test_keeping_fewer_runs_than_one_is_refused(recorded):
    recorded.full_run()
    with pytest.raises(ValueError, match="keep_runs must be at least 1"):
        recorded.prune(keep_runs=0)


def test_the_champion_is_the_latest_blessed_model_with_its_blessing_and_statistics(recorded):
    blessed = recorded.full_run()
    later = recorded.full_run(blessed=False, baseline=blessed["model"])
    latest = recorded.full_run(blessed=False, baseline=blessed["model"])
    report = recorded.prune(keep_runs=1)
    assert report.champion_model == blessed["model"] and report.champion_blessings == [blessed["blessing"]]
    # What DriftGate reads through the blessing stays with it: the statistics it was made with.
    assert all(recorded.present(blessed[key]) for key in ("model", "blessing", "statistics", "pushed_model"))
    assert all(recorded.gone(blessed[key]) for key in ("examples", "model_run", "evaluation"))
    # Neither unblessed model was pushed (pushed=0): the older one goes whole.
    assert all(recorded.gone(i) for i in later.values())
    assert all(recorded.present(i) for i in latest.values())
    assert set(report.pushed) == {blessed["model"]}


def test_a_rolled_back_champion_is_the_one_kept_and_what_it_was_blessed_with(recorded):
    """The record, not the newest blessing, names the champion: after a rollback the earlier
    champion's model, blessing and statistics stay, whatever the latest runs hold."""
    first = recorded.full_run()
    second = recorded.full_run(baseline=first["model"])
    champion.update(recorded.root, lambda record: record.rolled_back_once())
    recorded.full_run(blessed=False, baseline=first["model"])
    report = recorded.prune(keep_runs=1)
    assert report.champion_model == first["model"] and report.champion_blessings == [first["blessing"]]
    assert all(recorded.present(first[key]) for key in ("model", "blessing", "statistics"))
    assert all(recorded.present(second[key]) for key in ("model", "blessing"))  # pushed: kept for a roll forward


def test_outputs_a_kept_run_reused_from_the_cache_stay(recorded):
    first = recorded.full_run(blessed=False)
    recorded.cached_run(first)
    recorded.new_run()  # a run that stopped at its first component, its examples new
    newest = recorded.execute("CsvExampleGen", {"examples": "Examples"})
    report = recorded.prune(keep_runs=2)
    # The first run loses only what TFX left for its executions: its outputs are the second's too.
    assert report.removed == [] and report.system_dirs and report.runs_pruned == ["run-1"]
    assert all(recorded.present(i) for i in [*first.values(), *newest.values()])
    report = recorded.prune(keep_runs=1)
    assert report.runs_pruned == ["run-2", "run-1"] and all(recorded.gone(i) for i in first.values())


def test_what_tfx_leaves_for_the_older_runs_executions_goes(recorded):
    recorded.new_run()
    recorded.execute("CsvExampleGen", {"examples": "Examples"})
    # Killed mid-execution: its state RUNNING, its stateful directory and output left behind.
    killed = recorded.execute("Transform", state=metadata_store_pb2.Execution.RUNNING, stateful_index="uuid-1")
    assert killed == {}
    executions = recorded.store.get_executions_by_context(recorded.run.id)
    transform_id = max(e.id for e in executions)
    orphan = Path(recorded.root, "Transform", "transform_graph", str(transform_id))
    orphan.mkdir(parents=True)
    (orphan / "half-written").write_bytes(b"x" * 10)
    driver = Path(recorded.root, "CsvExampleGen", prune.SYSTEM_DIR, prune.DRIVER_DIR, "1000")
    driver.mkdir(parents=True)
    kept = recorded.full_run()
    report = recorded.prune(keep_runs=1)
    system = Path(recorded.root, "Transform", prune.SYSTEM_DIR)
    assert not (system / prune.STATEFUL_DIR / "uuid-1").exists() and not orphan.exists() and not driver.exists()
    assert not (system / prune.EXECUTOR_DIR / str(transform_id)).exists()
    assert {r.path for r in report.system_dirs} >= {str(orphan), str(driver)}
    # The kept run's own stay, and TFX's directories above them.
    example_gen = min(e.id for e in recorded.store.get_executions_by_context(recorded.run.id))
    assert Path(recorded.root, "CsvExampleGen", prune.SYSTEM_DIR, prune.EXECUTOR_DIR, str(example_gen)).is_dir()
    assert (system / prune.STATEFUL_DIR).is_dir() and all(recorded.present(i) for i in kept.values())
    assert not Path(recorded.root, prune.TRASH_DIR).exists()


def test_files_outside_the_pipeline_root_are_never_touched(recorded, tmp_path):
    first = recorded.full_run(blessed=False)
    [artifact] = recorded.store.get_artifacts_by_id([first["examples"]])
    outside = tmp_path / "elsewhere"
    os.rename(artifact.uri, outside)
    artifact.uri = str(outside)
    recorded.store.put_artifacts([artifact])
    recorded.full_run(blessed=False)
    report = recorded.prune(keep_runs=1)
    assert report.left_outside == [first["examples"]] and recorded.present(first["examples"])
    assert recorded.gone(first["statistics"])


def test_a_store_whose_files_were_moved_away_loses_no_files(recorded, tmp_path):
    """Its URIs name another root (an output root copied, say): the directories under this
    root are then no artifact's, but published outputs all the same, so they stay."""
    first = recorded.full_run(blessed=False)
    recorded.full_run(blessed=False)
    artifacts = recorded.store.get_artifacts()
    for artifact in artifacts:
        artifact.uri = artifact.uri.replace(recorded.root, str(tmp_path / "elsewhere"))
    recorded.store.put_artifacts(artifacts)
    report = recorded.prune(keep_runs=1)
    assert report.removed == [] and sorted(report.left_outside) == sorted(first.values())
    assert all(not r.path.startswith(os.path.join(recorded.root, "Trainer", "model")) for r in report.system_dirs)
    assert (
        Path(recorded.root, "Trainer", "model").is_dir()
        and len(os.listdir(Path(recorded.root, "Trainer", "model"))) == 2
    )


def test_a_dry_run_changes_nothing_and_says_what_a_prune_would_remove(recorded):
    first = recorded.full_run(blessed=False)
    recorded.full_run(blessed=False)
    tree, store = _tree(recorded.config.output_root), _digest(recorded.config.metadata_path)
    dry = recorded.prune(keep_runs=1, dry_run=True)
    assert _tree(recorded.config.output_root) == tree and _digest(recorded.config.metadata_path) == store
    assert all(recorded.present(i) for i in first.values())
    assert str(dry).startswith(f"Would prune {len(first)} artifact(s) of 1 older run(s)")
    done = recorded.prune(keep_runs=1)
    assert [r.path for r in done.removed] == [r.path for r in dry.removed] and done.bytes_freed == dry.bytes_freed
    assert str(done).startswith(f"Pruned {len(first)} artifact(s) of 1 older run(s), ")


def test_a_prune_finishes_what_an_interrupted_one_left(recorded):
    first = recorded.full_run(blessed=False)
    recorded.full_run(blessed=False)
    # Interrupted after the marks, before the files: the artifact DELETED, its files there;
    # and a directory moved aside but not yet deleted.
    [artifact] = recorded.store.get_artifacts_by_id([first["examples"]])
    artifact.state = DELETED
    recorded.store.put_artifacts([artifact])
    Path(recorded.root, prune.TRASH_DIR, "half").mkdir(parents=True)
    recorded.prune(keep_runs=1)
    assert recorded.gone(first["examples"]) and not Path(recorded.root, prune.TRASH_DIR).exists()
    again = recorded.prune(keep_runs=1)
    assert again.removed == [] and again.system_dirs == [] and again.runs_pruned == []


def test_the_report_reads_as_one_line():
    report = prune.PruneReport(
        "p",
        1,
        runs=3,
        runs_kept=["c"],
        runs_pruned=["b", "a"],
        removed=[prune.Removal("/x", 3 * 2**20, 4, "Examples")],
        champion_model=20,
        pushed={8: "/s/1", 20: "/s/2"},
    )
    assert str(report) == (
        "Pruned 1 artifact(s) of 2 older run(s), 3.0 MB freed; kept the latest 1 of 3 run(s), the champion "
        "(Model 20) and the pushed models (Model 8, 20)"
    )
    assert "\n" not in str(prune.PruneReport("p", 2))
    assert [prune.size_text(n) for n in (0, 1023, 1536, 5 * 2**20)] == ["0 B", "1023 B", "1.5 KB", "5.0 MB"]


def test_the_command_refuses_without_a_metadata_store_and_creates_nothing(tmp_path, capsys):
    assert prune.main(["--output-root", str(tmp_path), "--keep-runs", "1"]) == 2
    err = capsys.readouterr().err
    assert f"no ML Metadata store at {PipelineConfig(output_root=str(tmp_path)).metadata_path}" in err
    assert os.listdir(tmp_path) == []


def test_the_command_refuses_while_a_run_is_in_progress(recorded, capsys):
    first = recorded.full_run(blessed=False)
    recorded.full_run(blessed=False)
    with hold_run_lock(recorded.config):
        assert prune.main(["--output-root", recorded.config.output_root, "--keep-runs", "1"]) == 3
    err = capsys.readouterr().err
    assert "not pruning while a run of the pipeline is in progress" in err and f"process {os.getpid()}" in err
    assert all(recorded.present(i) for i in first.values())


def test_the_command_refuses_to_keep_no_run(recorded, capsys):
    recorded.full_run()
    assert prune.main(["--output-root", recorded.config.output_root, "--keep-runs", "0"]) == 2
    assert "--keep-runs must be at least 1" in capsys.readouterr().err


def test_the_command_says_what_it_removes_and_keeps(recorded, capsys):
    first = recorded.full_run()
    second = recorded.full_run(blessed=False, baseline=first["model"])
    recorded.full_run(blessed=False, baseline=first["model"])
    argv = ["--output-root", recorded.config.output_root, "--keep-runs", "1"]
    assert prune.main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    # The first run's model is the champion and was pushed; the others' were neither.
    assert "Would remove: 10 artifact(s)" in out and "Dry run: nothing was changed." in out
    assert all(recorded.present(i) for i in second.values())
    assert prune.main(argv) == 0
    out = capsys.readouterr().out
    assert f"Champion (the next run's baseline): Model {first['model']}, ModelBlessing {first['blessing']}" in out
    assert f"Pushed models (kept): Model {first['model']} -> {recorded.config.serving_model_dir}/1" in out
    assert "Removed: 10 artifact(s) (ExampleStatistics 1, Examples 2, Model 1, ModelBlessing 1, " in out
    assert "from the older run(s) run-2, run-1" in out
    assert "marked DELETED" in out and all(recorded.gone(i) for i in second.values())


# Whole local runs: three, pruned to the latest, then a cached rerun and a fresh run.


def _store(config: PipelineConfig) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(prune.connection_config(config.metadata_path, read_only=True))


def _artifacts(config: PipelineConfig) -> dict[int, metadata_store_pb2.Artifact]:
    return {a.id: a for a in _store(config).get_artifacts()}


def _executions(config: PipelineConfig, run_id: str, node: str | None = None) -> set[int]:
    """Ids of the run's executions (of ``node`` only, if given)."""
    store = _store(config)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    found = {e.id for e in store.get_executions_by_context(run.id)}
    if node is not None:
        node_context = store.get_context_by_type_and_name("node", f"{config.pipeline_name}.{node}")
        found &= {e.id for e in store.get_executions_by_context(node_context.id)}
    return found


def _executor_dirs(tree: list[tuple[str, int]]) -> set[int]:
    """Execution ids of the ``.system/executor_execution/<id>`` directories in ``tree``."""
    return {int(os.path.basename(p)) for p, _ in tree if os.path.basename(os.path.dirname(p)) == prune.EXECUTOR_DIR}


@pytest.fixture(scope="session")
def pruned_runs(sample_dir, tmp_path_factory) -> dict:
    """Three runs (the third reusing the second's outputs from the cache), a dry run, a prune
    keeping the latest run, then a cached rerun and a fresh run: what each left."""
    output_root = str(tmp_path_factory.mktemp("pruned"))
    config = PipelineConfig(output_root=output_root, infer_schema=True)
    argv = ["--data-root", str(sample_dir), "--output-root", output_root, *SMALL_RUN]
    for extra in ([], [], ["--enable-cache"]):
        assert local_runner.main([*argv, *extra]) == 0
    latest = summarize_run(local_runner.metadata_config(config), config.pipeline_name)
    before = _artifacts(config)
    tree, store, serving = _tree(output_root), _digest(config.metadata_path), _tree(config.serving_model_dir)
    dry = prune.prune(config.metadata_path, config.pipeline_name, config.pipeline_root, 1, dry_run=True)
    dry_run_unchanged = _tree(output_root) == tree and _digest(config.metadata_path) == store
    report = prune.prune_after_run(config, keep_runs=1)
    pruned = dict(
        config=config,
        latest=latest,
        before=before,
        dry=dry,
        dry_run_unchanged=dry_run_unchanged,
        tree=tree,
        report=report,
        after=_artifacts(config),
        after_tree=_tree(config.pipeline_root),
        serving_unchanged=_tree(config.serving_model_dir) == serving,
    )
    assert local_runner.main([*argv, "--enable-cache"]) == 0
    pruned["cached"] = summarize_run(local_runner.metadata_config(config), config.pipeline_name)
    assert local_runner.main(argv) == 0
    pruned["fresh"] = summarize_run(local_runner.metadata_config(config), config.pipeline_name)
    return pruned


@pytest.mark.slow
def test_pruning_real_runs_keeps_the_latest_run_the_champion_and_the_pushed_models(pruned_runs):
    config, report, before, after = (pruned_runs[k] for k in ("config", "report", "before", "after"))
    latest = pruned_runs["latest"]
    assert report.runs == 3 and report.runs_kept == [latest.run_id] and len(report.runs_pruned) == 2
    assert report.removed and report.bytes_freed > 0
    removed = {r.artifact_id for r in report.removed}
    for artifact_id, artifact in after.items():
        if artifact_id in removed:
            assert artifact.state == DELETED and not os.path.exists(artifact.uri), artifact
        else:
            assert artifact.state == before[artifact_id].state == LIVE and os.path.exists(artifact.uri), artifact
    # Everything the latest run wrote or took from the cache stays.
    assert {uri for uri in latest.outputs.values()} <= {a.uri for i, a in after.items() if i not in removed}
    assert report.champion_model not in removed and not removed & set(report.champion_blessings)
    pushed = [a for a in before.values() if a.type == "PushedModel" and a.custom_properties["pushed"].int_value]
    assert pushed and not removed & {a.id for a in pushed} and not removed & set(report.pushed)
    assert pruned_runs["serving_unchanged"]
    # Of the directories TFX leaves for each execution, only the kept run's are left.
    before_dirs, after_dirs = _executor_dirs(pruned_runs["tree"]), _executor_dirs(pruned_runs["after_tree"])
    kept = _executions(config, latest.run_id)
    assert len(before_dirs - kept) >= len(EXECUTED_COMPONENTS) and after_dirs == before_dirs & kept


@pytest.mark.slow
def test_a_dry_run_of_real_runs_changes_nothing(pruned_runs):
    dry, report = pruned_runs["dry"], pruned_runs["report"]
    assert pruned_runs["dry_run_unchanged"]
    assert [r.path for r in dry.removed] == [r.path for r in report.removed]
    assert str(dry).startswith("Would prune ") and str(report).startswith("Pruned ")


@pytest.mark.slow
def test_a_cached_rerun_after_pruning_reuses_the_kept_run(pruned_runs):
    states = {c.node_id: c.state for c in pruned_runs["cached"].components}
    # The Champion and its readers run on every run (tests/test_local_runner.py); the rest is reused.
    readers = ("Champion", "DriftGate", "Evaluator", "Pusher")
    assert all(states[node] == "cached" for node in EXECUTED_COMPONENTS if node not in readers), states
    assert pruned_runs["cached"].blessed is not None


@pytest.mark.slow
def test_the_next_run_compares_with_the_champion_kept_by_the_prune(pruned_runs):
    report, fresh = pruned_runs["report"], pruned_runs["fresh"]
    states = {c.node_id: c.state for c in fresh.components}
    assert all(states[node] == "complete" for node in EXECUTED_COMPONENTS), states
    # The record named the champion the prune kept, and both of its readers ran on its files.
    after = pruned_runs["after"]
    assert fresh.had_baseline and fresh.baseline == after[report.champion_model].uri
    assert fresh.drift["baseline"] == after[report.champion_blessings[0]].uri
