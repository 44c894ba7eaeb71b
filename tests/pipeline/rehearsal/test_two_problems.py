"""Two problems rehearsed into one store: each pipeline's baseline is its own.

Compiled for Vertex, the latest-blessed-model resolver queries by artifact type and state
only, so in a project holding two pipelines it may return the other pipeline's blessed
model. The rehearsal's store scopes a query to the pipeline (``ArtifactStore.query``), which
would hide that; here its queries search every pipeline of the store instead, the worst
case the compiled filter allows. The penguins' body mass problem is rehearsed, then the
penguins' species (the resolver hands it the body-mass model: the Evaluator and DriftGate
must ignore it), then the species again (its own first model is the baseline: the check
does not throw away what it should keep). Both are small: the rehearsals' own cost is most
of the time.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import shutil

import pytest

import kubeflow_runner
from pipeline.rehearsal import filters
from pipeline.rehearsal.runner import RECORD_FILE
from pipeline.rehearsal.store import ArtifactStore
from pipeline.run_summary import RunSummary, read_evaluation
from tests.support.problems import SHIPPED, SHIPPED_DIRS
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv
from tests.support.runs import EXECUTED_COMPONENTS, SMALL_RUN

BLESSING_RESOLVER = "latest_blessed_model_resolver-model-blessing-resolver"
MODEL_RESOLVER = "latest_blessed_model_resolver-model-resolver"
OTHER, PENGUINS = SHIPPED["penguin-body-mass"].name, SHIPPED["penguins"].name
IGNORED = "Baseline ignored"


def _argv(root, problem_dir, data_dir, *extra, as_shipped: bool = False) -> list[str]:
    """One problem's rehearsal: ``as_shipped``, with the problem's own settings and threshold,
    its report and the served-model check; otherwise small and quick."""
    settings = [] if as_shipped else ["--serving-python", str(root / "no-serving-python"), *SMALL_RUN]
    return rehearsal_argv(
        root, data_dir, *settings, "--enable-cache", *extra,
        problem_dir=problem_dir, job_file=f"{problem_dir.name}.json",
    )  # fmt: skip


def _across_pipelines(original):
    """``ArtifactStore.query`` over every pipeline in the store, newest first (the compiled
    filter's own scope), unless the filter names a context."""

    def query(self, pipeline, query, limit):
        if query.context:
            return original(self, pipeline, query, limit)
        found = [
            a for name in (OTHER, PENGUINS) for a in original(self, name, filters.Query(query.clauses, name), limit)
        ]
        return sorted(found, key=lambda a: a["id"], reverse=True)[:limit]

    return query


def _record_paths(root) -> set[str]:
    return set(glob.glob(str(root / "logs" / "*" / RECORD_FILE)))


def _tasks(record: dict) -> dict[str, dict]:
    return {t["name"]: t for t in record["tasks"]}


def _log(root, record: dict, task: str) -> str:
    with open(root / "logs" / record["job_id"] / f"{task}.log") as f:
        return f.read()


SPAN_PATTERN = "span-{SPAN}/*.csv"


def _arrive(problem_dir, spans, number: int) -> None:
    """Span ``number`` of the problem's rows lands under ``spans`` (every other pair of rows,
    so each span is a sample of the same data: the file lists penguins in pairs), beside the
    problem's contract."""
    (source,) = glob.glob(str(problem_dir / "*.csv"))
    with open(source) as f:
        header, *rows = f.read().splitlines()
    folder = spans / f"span-{number}"
    folder.mkdir(parents=True)
    (folder / "data.csv").write_text(
        "\n".join([header, *(row for i, row in enumerate(rows) if i // 2 % 2 == number - 1)]) + "\n"
    )
    shutil.copy(problem_dir / "schema.pbtxt", spans / "schema.pbtxt")


@pytest.fixture(scope="module")
def rehearsals(rehearsal_image, tmp_path_factory):
    """Body mass, species, species again, into one rehearsal root, each with its problem's
    contract, the first two with the problem's own settings; the species' data arrives as
    spans, span 1 before the first species run and span 2 before the second. Each one's exit
    code, printed summary and record, in order."""
    root = tmp_path_factory.mktemp("two_problems")
    spans = root / "penguin-spans"
    # Spans of about 170 rows: the contract's drift thresholds are set for the whole data, and
    # span against span at this size measures sampling noise above them (docs/pipeline.md).
    in_spans = ["--data-pattern", SPAN_PATTERN, "--accept-drift"]
    runs = [
        # The first two as shipped: each problem's compiled job to a blessed, pushed, served model.
        (SHIPPED_DIRS["penguin-body-mass"], SHIPPED_DIRS["penguin-body-mass"], [], True),
        (SHIPPED_DIRS["penguins"], spans, in_spans, True),
        (SHIPPED_DIRS["penguins"], spans, in_spans, False),
    ]
    codes, printed, records = [], [], []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ArtifactStore, "query", _across_pipelines(ArtifactStore.query))
        for index, (problem_dir, data_dir, extra, as_shipped) in enumerate(runs):
            if data_dir == spans:
                _arrive(SHIPPED_DIRS["penguins"], spans, number=index)
            before, out = _record_paths(root), io.StringIO()
            with contextlib.redirect_stdout(out):
                codes.append(kubeflow_runner.main(_argv(root, problem_dir, data_dir, *extra, as_shipped=as_shipped)))
            printed.append(out.getvalue())
            (path,) = _record_paths(root) - before
            with open(path) as f:
                records.append(json.load(f))
    return root, codes, printed, records


def _metadata(task: dict, key: str) -> dict:
    return task["outputs"][key][0]["metadata"]


def _compared_with_a_baseline(evaluation_uri: str) -> bool:
    import tensorflow_model_analysis as tfma

    return any(
        kv.key.is_diff or kv.key.model_name == "baseline"
        for record in tfma.load_metrics(evaluation_uri)
        for kv in record.metric_keys_and_values
    )


@pytest.mark.slow
def test_each_rehearsal_passed_each_in_its_own_pipeline(rehearsals):
    root, codes, _, records = rehearsals
    assert codes == [0, 0, 0]
    assert [r["pipeline"] for r in records] == [OTHER, PENGUINS, PENGUINS]
    for record in records:
        uri = _tasks(record)["Trainer"]["outputs"]["model"][0]["uri"]
        assert uri.startswith(f"{BUCKET}/out/pipelines/{record['pipeline']}/")


@pytest.mark.slow
def test_the_second_pipeline_was_handed_the_first_ones_model_and_did_not_use_it(rehearsals):
    root, _, _, records = rehearsals
    other, penguins = _tasks(records[0]), _tasks(records[1])
    other_model, other_blessing = other["Trainer"]["outputs"]["model"][0], other["Evaluator"]["outputs"]["blessing"][0]
    assert other_blessing["metadata"]["blessed"] == 1.0
    # Not vacuous: the resolver did return the other pipeline's blessing and model.
    assert penguins[BLESSING_RESOLVER]["outputs"]["model_blessing"][0]["name"] == other_blessing["name"]
    assert penguins[MODEL_RESOLVER]["outputs"]["model"][0]["name"] == other_model["name"]
    assert penguins["Evaluator"]["inputs"]["baseline_model"] == [other_model["name"]]
    # The Evaluator evaluated the penguin model alone and says which baseline it ignored.
    evaluator_log = _log(root, records[1], "Evaluator")
    assert evaluator_log.count(IGNORED) == 1 and other_model["uri"] in evaluator_log
    assert not _compared_with_a_baseline(local_uri(root, penguins["Evaluator"]["outputs"]["evaluation"][0]["uri"]))
    assert _metadata(penguins["Evaluator"], "evaluation")["ignored_baseline"] == other_model["uri"]
    assert _metadata(penguins["Evaluator"], "blessing")["ignored_baseline"] == other_model["uri"]
    # DriftGate measured nothing against the other pipeline's statistics, and says so.
    assert penguins["DriftGate"]["inputs"]["baseline"] == [other_blessing["name"]]
    report = json.loads(_metadata(penguins["DriftGate"], "drift_report")["drift_report"])
    assert report["baseline"] is None and report["drift"] == []
    assert report["ignored_baseline"] == other_blessing["uri"]
    gate_log = _log(root, records[1], "DriftGate")
    assert gate_log.count(IGNORED) == 1 and other_blessing["uri"] in gate_log


@pytest.mark.slow
def test_a_second_rehearsal_of_the_same_problem_compares_with_its_own_first_model(rehearsals):
    root, _, _, records = rehearsals
    first, second = _tasks(records[1]), _tasks(records[2])
    own_model, own_blessing = first["Trainer"]["outputs"]["model"][0], first["Evaluator"]["outputs"]["blessing"][0]
    assert own_blessing["metadata"]["blessed"] == 1.0
    assert second["Evaluator"]["inputs"]["baseline_model"] == [own_model["name"]]
    assert second["Evaluator"]["inputs"]["model"] != [own_model["name"]]  # trained again
    assert _compared_with_a_baseline(local_uri(root, second["Evaluator"]["outputs"]["evaluation"][0]["uri"]))
    assert "ignored_baseline" not in _metadata(second["Evaluator"], "blessing")
    report = json.loads(_metadata(second["DriftGate"], "drift_report")["drift_report"])
    assert report["baseline"] == own_blessing["uri"] and report["drift"]  # the contract's columns, measured
    assert "ignored_baseline" not in report
    assert IGNORED not in _log(root, records[2], "Evaluator") + _log(root, records[2], "DriftGate")


@pytest.mark.slow
def test_the_summary_claims_no_comparison_with_the_ignored_model(rehearsals):
    _, _, printed, _ = rehearsals
    (verdict,) = [line for line in printed[1].splitlines() if line.startswith("Model: ")]
    assert "last blessed model" not in verdict and "another pipeline's model was ignored" in verdict, verdict


@pytest.mark.slow
def test_spans_arriving_between_rehearsals_are_ingested_newest_first_with_a_window(rehearsals):
    _, _, printed, records = rehearsals
    first, second = _tasks(records[1]), _tasks(records[2])
    # The compiled ExampleGen driver resolved the newest span; the executor read the window.
    assert [_metadata(run["CsvExampleGen"], "examples")["span_window"] for run in (first, second)] == ["1", "1-2"]
    assert "Data: span 2; the Trainer learnt from spans 1-2" in printed[2]
    assert "History: the last 2 of 2 run(s)" in printed[2]


@pytest.mark.slow
def test_the_trainer_warm_starts_from_its_own_champion_never_another_pipelines(rehearsals):
    _, _, printed, records = rehearsals
    other_model = _tasks(records[0])["Trainer"]["outputs"]["model"][0]
    first, second = _tasks(records[1]), _tasks(records[2])
    # Handed the other pipeline's model as its base (the unscoped query), and not using it.
    assert first["Trainer"]["inputs"]["base_model"] == [other_model["name"]]
    assert "Training: trained from scratch (the latest blessed model" in printed[1]
    assert "is another pipeline's" in printed[1]
    own_model = first["Trainer"]["outputs"]["model"][0]
    assert second["Trainer"]["inputs"]["base_model"] == [own_model["name"]]
    (line,) = [line for line in printed[2].splitlines() if line.startswith("Training: ")]
    assert line.startswith("Training: warm-started") and own_model["uri"] in line, line


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1])
def test_each_problems_compiled_job_rehearses_to_a_blessed_pushed_served_model(rehearsals, index):
    """The first rehearsal of each problem, with its own settings and threshold."""
    root, codes, printed, records = rehearsals
    record, out = records[index], printed[index]
    problem = SHIPPED["penguin-body-mass" if index == 0 else "penguins"]
    tasks = _tasks(record)
    states = {name: task["state"] for name, task in tasks.items()}
    assert {n for n, t in tasks.items() if t["kind"] == "container"} == set(EXECUTED_COMPONENTS), states
    assert set(states.values()) == {"SUCCEEDED"}, states
    # The job's data root holds the problem's contract: imported from there.
    assert f"Data contract: {BUCKET}/data/schema.pbtxt" in out
    out_root = f"{BUCKET}/out"
    examples = tasks["CsvExampleGen"]["outputs"]["examples"][0]["uri"]
    assert examples.startswith(f"{out_root}/pipelines/{problem.name}/rehearsal/{record['job_id']}/")
    # Blessed on the problem's own metric and threshold, on every eval row, and pushed.
    assert _metadata(tasks["Evaluator"], "blessing")["blessed"] == 1.0
    evaluated = RunSummary(run_id="", components=[])
    read_evaluation(evaluated, local_uri(root, tasks["Evaluator"]["outputs"]["evaluation"][0]["uri"]))
    value = evaluated.metrics[problem.blessing.metric]
    assert value >= problem.blessing.threshold if problem.higher_is_better else value <= problem.blessing.threshold
    assert evaluated.metrics["example_count"] == _rows(local_uri(root, examples), "eval")
    assert evaluated.validation_failures == []
    pushed = _metadata(tasks["Pusher"], "pushed_model")
    assert pushed["pushed"] == 1.0
    assert pushed["pushed_destination"].startswith(f"{out_root}/serving_model/{problem.name}/")
    assert os.path.exists(os.path.join(local_uri(root, pushed["pushed_destination"]), "saved_model.pb"))
    assert "Model: BLESSED" in out and f"Pushed to: {pushed['pushed_destination']}" in out
    assert glob.glob(str(root / "report" / problem.name / record["job_id"] / "index.html")), out
    # Last, the pushed model answering a Vertex request in TensorFlow 2.15 (make test installs it).
    if os.path.exists(kubeflow_runner.DEFAULT_SERVING_PYTHON):
        assert "Served model: answered" in out
    else:
        assert "Served model: NOT rehearsed" in out
    assert codes[index] == 0


def _rows(examples_uri: str, split: str) -> int:
    """ExampleGen's rows of one split (gzipped TFRecords)."""
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*.gz")))
    assert files, f"no Split-{split} under {examples_uri}"
    return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))
