"""Two problems rehearsed into one store, interleaved: each pipeline finds its own champion.

The champion is the record under each pipeline's root (``runtime/champion.py``), read by
its Champion task: no query, so the store holding another pipeline's newer blessing must
change nothing. The penguins' species are rehearsed, then the penguins' body mass (the
store's newest blessing is the species': the body mass must get none), then the species
again (the body mass's blessing is now the newest: the species must get its own first one,
and compare with it). The first two with each problem's own settings; all small: the
rehearsals' own cost is most of the time.

Each pushes to Vertex AI (the stand-ins keep their models and endpoints from one rehearsal
to the next, as a project does): one registry model per pipeline, the species' second run a
version of the first one's model deployed as a canary, which ``python -m runs.release``
then promotes, moving the champion record with it. That run trains as a Vertex AI custom job
of two replicas (``--vertex-training multi-worker``), each in its own container, warm-started.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import kubeflow_runner
from components import registry
from rehearsal.cloud.standins import VERTEX_STATE_FILE, StandIns
from rehearsal.runner import RECORD_FILE
from report.run_summary import RunSummary, read_evaluation
from tests.support.fresh_python import REPO_ROOT
from tests.support.problems import SHIPPED, SHIPPED_DIRS
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv, training_record
from tests.support.runs import EXECUTED_COMPONENTS, SMALL_RUN

OTHER, PENGUINS = SHIPPED["penguin-body-mass"].name, SHIPPED["penguins"].name
IGNORED = "Baseline ignored"
FIRST_RUN = "(first blessed model: no baseline to compare against)"
PROJECT, REGION = "penguin-project", "us-central1"
ENDPOINTS = {PENGUINS: "species-endpoint", OTHER: "body-mass-endpoint"}
CANARY = 40
# The species' second run trains as a Vertex AI custom job (a chief and one worker) and is
# deployed as a canary.
SPECIES_AGAIN = ["--vertex-training", "multi-worker", "--training-replicas", "2", "--canary-percent", str(CANARY)]


def _pushing(pipeline: str, *extra: str) -> list[str]:
    return ["--project", PROJECT, "--region", REGION, "--endpoint-name", ENDPOINTS[pipeline], *extra]


def _argv(root, problem_dir, data_dir, *extra, as_shipped: bool = False) -> list[str]:
    """One problem's rehearsal: ``as_shipped``, with the problem's own settings and threshold,
    its report and the served-model check; otherwise small and quick."""
    settings = [] if as_shipped else SMALL_RUN
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
        (SHIPPED_DIRS["penguins"], spans, [*in_spans, *_pushing(PENGUINS)], True),
        (SHIPPED_DIRS["penguin-body-mass"], SHIPPED_DIRS["penguin-body-mass"], _pushing(OTHER), True),
        (SHIPPED_DIRS["penguins"], spans, [*in_spans, *_pushing(PENGUINS, *SPECIES_AGAIN)], False),
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


def _vertex_state(root) -> dict:
    with open(root / "cloud" / VERTEX_STATE_FILE) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def vertex_after_runs(rehearsals) -> dict:
    """What the Vertex AI stand-ins held after the three rehearsals."""
    return _vertex_state(rehearsals[0])


@pytest.fixture(scope="module")
def released(rehearsals, vertex_after_runs):
    """``python -m runs.release status``, ``promote``, ``status`` on the species' endpoint,
    against the stand-ins started again on the rehearsals' state (as a project's Vertex AI
    outlives its jobs); each command's exit code and output, then the state after them."""
    root = rehearsals[0]
    done = []
    with StandIns(
        str(root / "cloud"), str(root / "gcs"), PROJECT, serving_python=kubeflow_runner.DEFAULT_SERVING_PYTHON
    ) as stand_ins:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": REPO_ROOT, "HOME": str(root), **stand_ins.environment()}
        for command in ("status", "promote", "status"):
            argv = [sys.executable, "-m", "runs.release", command, "--problem", str(SHIPPED_DIRS["penguins"])]
            argv += ["--output-root", f"{BUCKET}/out", "--project", PROJECT, "--region", REGION]
            argv += ["--endpoint-name", ENDPOINTS[PENGUINS], "--verbose"]
            run = subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
            done.append((run.returncode, run.stdout, run.stderr[-3000:]))
        refused = [c for c in stand_ins.connections() if c.refused]
    return done, _vertex_state(root), refused


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
    for key in ("model", "model_blessing"):
        pointer = _metadata(other["Champion"], key)
        assert pointer["champion"] == "" and "blessed and pushed yet" in pointer["no_champion_because"]
    assert _metadata(other["Evaluator"], "blessing")["baseline_model_uri"] == ""
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
    assert _metadata(second["Champion"], "model_blessing")["champion"] == own_blessing["uri"]
    assert _metadata(second["Evaluator"], "blessing")["baseline_model_uri"] == own_model["uri"]
    assert second["Evaluator"]["inputs"]["model"] != [own_model["name"]]  # trained again
    assert _compared_with_a_baseline(local_uri(root, second["Evaluator"]["outputs"]["evaluation"][0]["uri"]))
    assert "ignored_baseline" not in _metadata(second["Evaluator"], "blessing")
    report = json.loads(_metadata(second["DriftGate"], "drift_report")["drift_report"])
    assert report["baseline"] == own_blessing["uri"] and report["drift"]  # the contract's columns, measured
    assert "ignored_baseline" not in report
    assert IGNORED not in _log(root, records[2], "Evaluator") + _log(root, records[2], "DriftGate")
    # Each pipeline's record lies under its own root.
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
    second = _tasks(records[2])
    assert second["Trainer"]["inputs"]["base_model"] == [second["Champion"]["outputs"]["model"][0]["name"]]
    assert _metadata(second["Champion"], "model")["champion"] == own_model["uri"]
    (line,) = [line for line in printed[2].splitlines() if line.startswith("Training: ")]
    assert line.startswith("Training: warm-started") and own_model["uri"] in line, line


@pytest.mark.slow
def test_the_second_species_run_trained_as_a_two_replica_custom_job(rehearsals):
    root, _, printed, records = rehearsals
    assert "Submitting custom job=" in _log(root, records[2], "Trainer")
    # The job ends when its primary replica succeeds; a worker still shutting down is stopped then.
    assert re.search(
        r"Vertex AI Training job tfx_\S+: SUCCEEDED, replicas workerpool0-replica-0 \(exit 0\), "
        r"workerpool1-replica-0 \((exit 0|stopped)\)\.",
        printed[2],
    ), printed[2]
    # The model came from the replicas: MultiWorkerMirroredStrategy over two workers.
    training = training_record(root, _tasks(records[2])["Trainer"])
    assert training["strategy"] == "MultiWorkerMirroredStrategy" and training["workers"] == 2


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
    # Laid out as Vertex lays it out: <pipeline root>/<project>/<job id>/<task>_<id>/<output>.
    assert examples.startswith(f"{out_root}/pipelines/{problem.name}/{PROJECT}/{record['job_id']}/")
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
    # The first version of the pipeline's own registry model, from the copy under the Pusher's output.
    assert re.fullmatch(rf"projects/{PROJECT}/locations/{REGION}/models/\d+@1", pushed["pushed_destination"])
    copy = local_uri(root, tasks["Pusher"]["outputs"]["pushed_model"][0]["uri"])
    assert os.path.exists(os.path.join(copy, "saved_model.pb"))
    assert "Model: BLESSED" in out and f"Pushed to: {pushed['pushed_destination']}" in out
    assert glob.glob(str(root / "report" / problem.name / record["job_id"] / "index.html")), out
    # Last, the pushed model answering a Vertex request in TensorFlow 2.15 (make test installs it).
    assert "Served model: answered" in out
    assert codes[index] == 0


def _rows(examples_uri: str, split: str) -> int:
    """ExampleGen's rows of one split (gzipped TFRecords)."""
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*.gz")))
    assert files, f"no Split-{split} under {examples_uri}"
    return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))


def _models_by_name(state: dict) -> dict[str, dict[str, dict]]:
    """Registry models by display name: version id -> the version's resource and evaluations."""
    found = {}
    for versions in state["models"].values():
        (name,) = {v["resource"]["display_name"] for v in versions.values()}
        found[name] = versions
    return found


def _aliases(versions: dict) -> dict[str, list[str]]:
    return {vid: sorted(v["resource"]["version_aliases"]) for vid, v in versions.items()}


def _traffic_by_version(state: dict, endpoint_name: str) -> dict[str, int]:
    (endpoint,) = [e for e in state["endpoints"].values() if e["display_name"] == endpoint_name]
    return {d["model_version_id"]: endpoint["traffic_split"].get(d["id"], 0) for d in endpoint["deployed_models"]}


@pytest.mark.slow
def test_each_pipeline_has_one_registry_model_and_the_second_push_is_its_next_version(rehearsals, vertex_after_runs):
    _, _, printed, records = rehearsals
    models = _models_by_name(vertex_after_runs)
    assert sorted(models) == sorted([PENGUINS, OTHER])
    species, other = models[PENGUINS], models[OTHER]
    assert sorted(species) == ["1", "2"] and sorted(other) == ["1"]
    assert _aliases(species) == {"1": ["champion", "default"], "2": ["candidate"]}
    assert _aliases(other) == {"1": ["champion", "default"]}
    # Labelled with the run, span and metric; the evaluation attached to each version.
    for version, record, span in (("1", records[0], "1"), ("2", records[2], "2")):
        labels = species[version]["resource"]["labels"]
        assert labels["run"] == registry.label_value(record["job_id"]) and labels["span"] == span
        assert labels["metric"] == SHIPPED["penguins"].blessing.metric and labels["metric-value"]
        (evaluation,) = species[version]["evaluations"]
        assert evaluation["metrics_schema_uri"] == registry.CLASSIFICATION_SCHEMA
        assert evaluation["metadata"]["run"] == record["job_id"]
        assert evaluation["metadata"]["tfma_metrics"][SHIPPED["penguins"].blessing.metric] > 0.9
    (evaluation,) = other["1"]["evaluations"]
    assert evaluation["metrics_schema_uri"] == registry.REGRESSION_SCHEMA
    assert evaluation["metrics"]["rootMeanSquaredError"] > 0
    # The canary serves its share beside the champion, and the summary says what changed.
    assert _traffic_by_version(vertex_after_runs, ENDPOINTS[PENGUINS]) == {"1": 100 - CANARY, "2": CANARY}
    assert _traffic_by_version(vertex_after_runs, ENDPOINTS[OTHER]) == {"1": 100}
    assert "Served model: answered" in printed[2]


@pytest.mark.slow
def test_release_shows_the_canary_then_promotes_it(released):
    done, state, refused = released
    (status_code, status, _), (code, promoted, err), (_, after, _) = done
    assert status_code == 0 and code == 0, err
    assert "version 2 [candidate], 40% of the traffic" in status
    assert "version 1 [champion, default], 60% of the traffic" in status
    assert f"{ENDPOINTS[PENGUINS]}: version 2 has 100% of the traffic" in promoted
    assert f"{ENDPOINTS[PENGUINS]}: undeployed version 1" in promoted
    # The champion record moves with the registry: the canary was its candidate until now.
    assert "champion record: the next run compares with and warm-starts from version 1 " in status
    assert "champion record: the next run compares with and warm-starts from version 2 " in promoted
    assert "version 2 [champion, default], 100% of the traffic" in after
    assert "version 1 [previous], 0% of the traffic" in after
    species = _models_by_name(state)[PENGUINS]
    assert _aliases(species) == {"1": ["previous"], "2": ["champion", "default"]}
    assert _traffic_by_version(state, ENDPOINTS[PENGUINS]) == {"2": 100}
    assert not refused
