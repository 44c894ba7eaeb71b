"""Two problems rehearsed into one store, interleaved: each pipeline finds its own champion.

The rehearsal's store answers a compiled query without ``in_context`` across every pipeline
it holds (the widest reading of Vertex's scope, ``ArtifactStore.query``), so the compiled
latest-blessed-model resolver must find the pipeline's own blessing by itself: its query
asks for the blessing's ``pipeline_root`` (``pipeline.compiler``). The penguins' species
are rehearsed, then the penguins' body mass (the store's newest blessing is the species':
the body mass must get none), then the species again (the body mass's blessing is now the
newest: the species must get its own first one, and compare with it). The first two with
each problem's own settings; all small: the rehearsals' own cost is most of the time.
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
from pipeline.rehearsal.runner import RECORD_FILE
from pipeline.run_summary import RunSummary, read_evaluation
from tests.support.problems import SHIPPED, SHIPPED_DIRS
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv
from tests.support.runs import EXECUTED_COMPONENTS, SMALL_RUN

BLESSING_RESOLVER = "latest_blessed_model_resolver-model-blessing-resolver"
MODEL_RESOLVER = "latest_blessed_model_resolver-model-resolver"
OTHER, PENGUINS = SHIPPED["penguin-body-mass"].name, SHIPPED["penguins"].name
IGNORED = "Baseline ignored"
FIRST_RUN = "(first blessed model: no baseline to compare against)"


def _argv(root, problem_dir, data_dir, *extra, as_shipped: bool = False) -> list[str]:
    """One problem's rehearsal: ``as_shipped``, with the problem's own settings and threshold,
    its report and the served-model check; otherwise small and quick."""
    settings = [] if as_shipped else ["--serving-python", str(root / "no-serving-python"), *SMALL_RUN]
    return rehearsal_argv(
        root, data_dir, *settings, "--enable-cache", *extra,
        problem_dir=problem_dir, job_file=f"{problem_dir.name}.json",
    )  # fmt: skip


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
    """Species, body mass, species again, into one rehearsal root, each with its problem's
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
        (SHIPPED_DIRS["penguins"], spans, in_spans, True),
        (SHIPPED_DIRS["penguin-body-mass"], SHIPPED_DIRS["penguin-body-mass"], [], True),
        (SHIPPED_DIRS["penguins"], spans, in_spans, False),
    ]
    codes, printed, records, span = [], [], [], 0
    for problem_dir, data_dir, extra, as_shipped in runs:
        if data_dir == spans:
            span += 1
            _arrive(SHIPPED_DIRS["penguins"], spans, number=span)
        before, out = _record_paths(root), io.StringIO()
        with contextlib.redirect_stdout(out):
            codes.append(kubeflow_runner.main(_argv(root, problem_dir, data_dir, *extra, as_shipped=as_shipped)))
        printed.append(out.getvalue())
        (path,) = _record_paths(root) - before
        with open(path) as f:
            records.append(json.load(f))
    return root, codes, printed, records


def _id(artifact: dict) -> int:
    """The store's id of an artifact: the newer, the higher."""
    return int(artifact["name"].rsplit("/", 1)[1])


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
    assert [r["pipeline"] for r in records] == [PENGUINS, OTHER, PENGUINS]
    for record in records:
        uri = _tasks(record)["Trainer"]["outputs"]["model"][0]["uri"]
        assert uri.startswith(f"{BUCKET}/out/pipelines/{record['pipeline']}/")


@pytest.mark.slow
def test_the_second_pipeline_gets_no_champion_though_the_store_holds_a_newer_blessing(rehearsals):
    root, _, printed, records = rehearsals
    species, other = _tasks(records[0]), _tasks(records[1])
    species_blessing = species["Evaluator"]["outputs"]["blessing"][0]
    # Not vacuous: the species' blessed model is live in the same store, and an unscoped
    # query for any blessing returns it (the store's own test shows that).
    assert species_blessing["metadata"]["blessed"] == 1.0 and species["Evaluator"]["state"] == "SUCCEEDED"
    assert other[BLESSING_RESOLVER]["outputs"]["model_blessing"] == []
    assert other[MODEL_RESOLVER]["outputs"]["model"] == []
    assert other["Evaluator"]["inputs"].get("baseline_model", []) == []
    assert other["Trainer"]["inputs"].get("base_model", []) == []
    assert IGNORED not in _log(root, records[1], "Evaluator") + _log(root, records[1], "DriftGate")
    assert "ignored_baseline" not in _metadata(other["Evaluator"], "blessing")
    (verdict,) = [line for line in printed[1].splitlines() if line.startswith("Model: ")]
    assert verdict.endswith(FIRST_RUN), verdict


@pytest.mark.slow
def test_the_first_pipeline_finds_its_own_champion_behind_the_other_pipelines_newer_one(rehearsals):
    root, _, printed, records = rehearsals
    first, other, second = _tasks(records[0]), _tasks(records[1]), _tasks(records[2])
    own_model, own_blessing = first["Trainer"]["outputs"]["model"][0], first["Evaluator"]["outputs"]["blessing"][0]
    other_blessing = other["Evaluator"]["outputs"]["blessing"][0]
    assert other_blessing["metadata"]["blessed"] == 1.0 and _id(other_blessing) > _id(own_blessing)
    assert second[BLESSING_RESOLVER]["outputs"]["model_blessing"][0]["name"] == own_blessing["name"]
    assert second["Evaluator"]["inputs"]["baseline_model"] == [own_model["name"]]
    assert second["Evaluator"]["inputs"]["model"] != [own_model["name"]]  # trained again
    assert _compared_with_a_baseline(local_uri(root, second["Evaluator"]["outputs"]["evaluation"][0]["uri"]))
    assert "ignored_baseline" not in _metadata(second["Evaluator"], "blessing")
    report = json.loads(_metadata(second["DriftGate"], "drift_report")["drift_report"])
    assert report["baseline"] == own_blessing["uri"] and report["drift"]  # the contract's columns, measured
    assert "ignored_baseline" not in report
    assert IGNORED not in _log(root, records[2], "Evaluator") + _log(root, records[2], "DriftGate")
    # Each pipeline's blessings carry its own root, which the compiled query asked for.
    for record, blessing in ((records[0], own_blessing), (records[1], other_blessing)):
        assert blessing["metadata"]["pipeline_root"] == f"{BUCKET}/out/pipelines/{record['pipeline']}"


@pytest.mark.slow
def test_spans_arriving_between_rehearsals_are_ingested_newest_first_with_a_window(rehearsals):
    _, _, printed, records = rehearsals
    first, second = _tasks(records[0]), _tasks(records[2])
    # The compiled ExampleGen driver resolved the newest span; the executor read the window.
    assert [_metadata(run["CsvExampleGen"], "examples")["span_window"] for run in (first, second)] == ["1", "1-2"]
    assert "Data: span 2; the Trainer learnt from spans 1-2" in printed[2]
    assert "History: the last 2 of 2 run(s)" in printed[2]


@pytest.mark.slow
def test_the_trainer_warm_starts_from_its_own_champion(rehearsals):
    _, _, printed, records = rehearsals
    own_model = _tasks(records[0])["Trainer"]["outputs"]["model"][0]
    assert _tasks(records[2])["Trainer"]["inputs"]["base_model"] == [own_model["name"]]
    (line,) = [line for line in printed[2].splitlines() if line.startswith("Training: ")]
    assert line.startswith("Training: warm-started") and own_model["uri"] in line, line


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1])
def test_each_problems_compiled_job_rehearses_to_a_blessed_pushed_served_model(rehearsals, index):
    """The first rehearsal of each problem, with its own settings and threshold."""
    root, codes, printed, records = rehearsals
    record, out = records[index], printed[index]
    problem = SHIPPED["penguins" if index == 0 else "penguin-body-mass"]
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
