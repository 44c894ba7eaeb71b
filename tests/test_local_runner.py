"""LocalDagRunner end to end: the command line, whole runs, caching, the anomaly stop."""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import local_runner
from components.drift import read_statistics_dir
from models.problem import Blessing
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR, PipelineConfig
from report import history
from report.run_summary import format_summary, summarize_run
from runs import local_run, release
from runs.run_lock import hold_run_lock
from tests.support.runs import EXECUTED_COMPONENTS, SMALL_RUN
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS, write_sample
from tests.support.statistics import assert_same_statistics
from tests.support.terminal import library_lines

UPSTREAM_OF_EVALUATOR = [c for c in EXECUTED_COMPONENTS if c not in ("Evaluator", "Pusher")]


def _has_state(output_root: str, node_id: str, state: str) -> bool:
    try:
        return any(c.node_id == node_id and c.state == state for c in _summary(output_root).components)
    except LookupError:
        return False


def _summary(output_root: str):
    config = PipelineConfig(output_root=output_root)
    return summarize_run(local_runner.metadata_config(config), config.pipeline_name)


def test_help_explains_the_knobs():
    result = subprocess.run(
        [sys.executable, "local_runner.py", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.abspath(local_runner.__file__)),
    )
    for flag in ("--data-root", "--output-root", "--train-steps", "--epochs", "--beam-workers", "--enable-cache"):
        assert flag in result.stdout


def test_a_local_run_does_not_import_the_vertex_client(tmp_path):
    """Importing google-cloud-aiplatform (through `tfx.v1`) cost every local run seconds of
    start-up; a local pipeline is built, compiled for LocalDagRunner, without it."""
    code = (
        "import sys, local_runner\n"
        "from tfx.orchestration.local.local_dag_runner import LocalDagRunner\n"
        "LocalDagRunner.run = lambda self, pipeline: print('components', len(pipeline.components))\n"
        "local_runner.run(local_runner.config_from_args(local_runner.parse_args(['--output-root', sys.argv[1]])))\n"
        "print('imported', sorted(m for m in sys.modules if m.startswith(('tfx.v1', 'google.cloud.aiplatform'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.abspath(local_runner.__file__)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "components 11" in result.stdout
    assert "imported []" in result.stdout


def test_bad_settings_fail_before_running(capsys):
    assert local_runner.main(["--pipeline-name", "My_Pipeline"]) == 2
    assert "--pipeline-name 'My_Pipeline'" in capsys.readouterr().err


def test_beam_workers_follow_the_data_size_unless_given():
    # The embedded data (2 MB) runs in-process by default; a number given is taken as is.
    assert local_runner.config_from_args(local_runner.parse_args([])).beam_workers == 1
    assert local_runner.config_from_args(local_runner.parse_args(["--beam-workers", "3"])).beam_workers == 3


def test_transform_statistics_are_off_unless_asked():
    assert not local_runner.config_from_args(local_runner.parse_args([])).transform_statistics
    assert local_runner.config_from_args(local_runner.parse_args(["--transform-statistics"])).transform_statistics


def test_serving_data_is_optional_and_taken_as_an_absolute_path(tmp_path, monkeypatch):
    assert local_runner.config_from_args(local_runner.parse_args([])).serving_data_root is None
    monkeypatch.chdir(tmp_path)
    (tmp_path / "requests").mkdir()
    config = local_runner.config_from_args(local_runner.parse_args(["--serving-data-root", "requests"]))
    assert config.serving_data_root == str(tmp_path / "requests")


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--data-root", "no-such-dir"], "--data-root"),
        (["--serving-data-root", "no-such-dir"], "--serving-data-root"),
        (["--schema-path", "no-such.pbtxt"], "--schema-path"),
        (["--span", "-3", "--data-pattern", "span-{SPAN}/*.csv"], "--span must be 0 or more"),
        (["--epochs", "0"], "--epochs 0"),
        (["--blessing-threshold", "7"], "--blessing-threshold 7.0"),
        (["--problem", "no-such-problem"], "--problem no-such-problem"),
    ],
)
def test_settings_that_cannot_work_fail_before_running_naming_the_flag(flags, named, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert local_runner.main(["--output-root", str(tmp_path / "out"), *flags]) == 2
    assert named in capsys.readouterr().err


def test_the_run_report_is_written_unless_declined():
    assert local_runner.parse_args([]).report and not local_runner.parse_args(["--no-report"]).report


def test_negative_beam_workers_are_refused(capsys):
    assert local_runner.main(["--beam-workers", "-1"]) == 2
    assert "--beam-workers must be 0" in capsys.readouterr().err


@pytest.fixture(scope="module")
def cached_runs(sample_dir, tmp_path_factory):
    output_root = str(tmp_path_factory.mktemp("cached"))
    argv = ["--data-root", str(sample_dir), "--output-root", output_root, "--enable-cache", *SMALL_RUN]
    assert local_runner.main(argv) == 0
    first = _summary(output_root)
    assert local_runner.main(argv) == 0
    return output_root, first, _summary(output_root)


@pytest.mark.slow
def test_first_run_completes_blesses_and_pushes(cached_runs):
    _, first, _ = cached_runs
    assert {c.node_id: c.state for c in first.components} == {
        c: "complete" for c in UPSTREAM_OF_EVALUATOR + ["Evaluator", "Pusher"]
    }
    assert first.blessed and not first.had_baseline
    assert os.path.exists(os.path.join(first.pushed_to, "saved_model.pb"))
    assert glob.glob(os.path.join(first.tensorboard_dir, "**", "events.out.tfevents.*"), recursive=True)
    text = format_summary(first, Blessing("auc", 0.0))
    assert "BLESSED" in text and "first blessed model" in text and first.pushed_to in text
    assert f"auc {first.metrics['auc']:.4f}" in text


@pytest.mark.slow
def test_second_run_reuses_cached_results_and_compares_with_the_baseline(cached_runs):
    output_root, first, second = cached_runs
    assert second.run_id != first.run_id
    states = {c.node_id: c.state for c in second.components}
    assert all(states[node] == "cached" for node in UPSTREAM_OF_EVALUATOR if node not in ("Champion", "DriftGate"))
    assert states["Champion"] == "complete"  # it reads the champion record on every run
    # DriftGate's baseline is new (the first run's blessing), so it ran again, against the
    # same data: every distance of the contract's thresholds 0; Transform, which only waits
    # for it, did not (components/drift_gate.py).
    assert states["DriftGate"] == "complete" and second.drift["baseline"] and not second.drift["accepted"]
    assert second.drift["drift"] and all(d["value"] == 0.0 for d in second.drift["drift"])
    # The Evaluator's inputs changed (there is now a blessed baseline), so it ran again; the
    # baseline is the reused model itself, which the first run already evaluated on the same
    # examples with the same configuration: that evaluation is copied (components/evaluator.py).
    assert states["Evaluator"] == "complete" and second.had_baseline and second.baseline_is_candidate
    assert second.evaluation_reused_from and first.evaluation_reused_from is None
    assert second.evaluation_reused_from.startswith(os.path.join(output_root, "pipelines"))
    assert second.blessed and second.metrics == first.metrics
    assert f"its evaluation too, from {second.evaluation_reused_from}" in format_summary(second, Blessing("auc", 0.0))


@pytest.mark.slow
def test_a_rerun_with_nothing_changed_starts_no_tfx_until_something_changes(cached_runs, sample_dir, capsys):
    output_root, _, second = cached_runs
    argv = ["--data-root", str(sample_dir), "--output-root", output_root, "--enable-cache", *SMALL_RUN]
    capsys.readouterr()
    assert local_runner.main(argv) == 0
    out = capsys.readouterr().out
    assert "so TFX was not started" in out and f"Run {second.run_id}" in out and "BLESSED" in out
    assert second.pushed_to in out
    assert _summary(output_root).run_id == second.run_id  # no run recorded: nothing ran

    # Anything else writing to the store (here only its timestamp) sends the run to TFX,
    # which finds the data, Transform and the Trainer cached. The Champion reads the record
    # on every run, so the Evaluator compares again with the champion, which is the cached
    # model itself (its evaluation copied), and the Pusher finds it serving already.
    config = PipelineConfig(output_root=output_root)
    pushed_before = release.local_versions(config.serving_model_dir)
    os.utime(
        config.metadata_path,
        ns=(os.stat(config.metadata_path).st_atime_ns, os.stat(config.metadata_path).st_mtime_ns + 1),
    )
    assert local_runner.main(argv) == 0
    assert "TFX was not started" not in capsys.readouterr().out
    third = _summary(output_root)
    states = {c.node_id: c.state for c in third.components}
    assert third.run_id != second.run_id
    assert all(states[n] == "cached" for n in ("CsvExampleGen", "Transform", "Trainer")), states
    assert third.baseline_is_candidate and third.evaluation_reused_from and third.blessed
    assert third.pushed_to == second.pushed_to and release.local_versions(config.serving_model_dir) == pushed_before


@pytest.mark.slow
def test_a_contract_given_with_schema_path_stops_absurd_fares_that_once_were_pushed(tmp_path, capsys):
    """10% of fares at -1,000,000,000 used to be trained on, blessed and pushed."""
    bad = write_sample(
        tmp_path / "data",
        SAMPLE_ROWS,
        every=EMBEDDED_ROWS // SAMPLE_ROWS,
        edit=lambda row, i: {**row, "fare": "-1000000000"} if i % 10 == 0 else row,
    )
    shutil.copy(os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE), bad / CONTRACT_FILE)
    output_root = str(tmp_path / "out")
    argv = ["--data-root", str(bad), "--output-root", output_root, "--schema-path", str(bad / CONTRACT_FILE)]
    assert local_runner.main([*argv, *SMALL_RUN]) == 1
    captured = capsys.readouterr()
    assert f"Data contract: {bad / CONTRACT_FILE}" in captured.out
    assert "feature 'fare': Out-of-range values" in captured.err
    states = {c.node_id: c.state for c in _summary(output_root).components}
    assert states["ImportSchemaGen"] == "complete" and states["AnomalyGate"] == "FAILED"
    assert "Trainer" not in states and not os.path.exists(os.path.join(output_root, "serving_model"))


@pytest.mark.slow
def test_default_data_meets_the_quality_targets(full_local_run):
    """The shipped defaults on the embedded data: eval AUC >= 0.93 and accuracy >= 0.88,
    as computed by the pipeline's own Evaluator (the majority class scores 0.78)."""
    summary = full_local_run
    assert summary.metrics["auc"] >= 0.93, summary.metrics
    assert summary.metrics["binary_accuracy"] >= 0.88, summary.metrics
    assert summary.metrics["example_count"] > 4000
    assert summary.blessed and summary.pushed_to
    # Small data: several passes, the training split counted, no cap to lift.
    assert " passes over the " in summary.data_seen and "max_rows_seen" not in summary.data_seen


def test_a_second_run_on_the_same_output_root_is_refused_at_once(tmp_path, capsys):
    config = local_runner.config_from_args(local_runner.parse_args(["--output-root", str(tmp_path)]))
    with hold_run_lock(config):
        assert local_runner.main(["--output-root", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert f"process {os.getpid()} (started " in err and "is running taxi-big-tipper" in err
    assert "another --output-root" in err
    assert not os.path.exists(config.metadata_path)  # refused before touching the store


@pytest.fixture(scope="module")
def killed_and_rerun(sample_dir, tmp_path_factory):
    """SIGKILL while Transform runs, then the same command again (with caching): the output
    root, the killed run's summary, the rerun's, and the Transform outputs left then."""
    output_root = str(tmp_path_factory.mktemp("killed"))
    argv = ["--data-root", str(sample_dir), "--output-root", output_root, "--enable-cache", *SMALL_RUN]
    process = subprocess.Popen(
        [sys.executable, "local_runner.py", *argv],
        cwd=os.path.dirname(os.path.abspath(local_runner.__file__)),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    for line in process.stdout:  # the progress line a person sees as Transform starts
        if line.split() == ["Transform", "running"]:
            break
    # Killed once ML Metadata records Transform's execution as running: mid-component.
    deadline = time.monotonic() + 120
    while not _has_state(output_root, "Transform", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
    process.kill()
    assert process.wait(timeout=120) == -signal.SIGKILL
    killed = _summary(output_root)
    assert local_runner.main(argv) == 0
    transform_runs = glob.glob(os.path.join(output_root, "pipelines", "*", "Transform", "transform_graph", "*"))
    return output_root, killed, _summary(output_root), transform_runs


@pytest.mark.slow
def test_a_run_killed_in_the_middle_of_a_component_completes_when_run_again(killed_and_rerun):
    """SIGKILL while Transform runs; the same command then reuses what finished, runs
    Transform again into a new artifact (the half-written one is never read), completes."""
    _, killed, rerun, transform_runs = killed_and_rerun
    assert {c.node_id: c.state for c in killed.components}["Transform"] == "running"
    states = {c.node_id: c.state for c in rerun.components}
    assert all(states[n] == "cached" for n in ("CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "AnomalyGate"))
    assert states["Transform"] == "complete" and states["Trainer"] == "complete"
    assert rerun.blessed and rerun.pushed_to
    # One Transform output per execution: the killed one's folder was left, not reused.
    assert len(transform_runs) == 2


@pytest.mark.slow
def test_drift_from_the_blessed_run_stops_the_next_run_until_it_is_accepted(killed_and_rerun, tmp_path, capsys):
    """After the blessed rerun of the killed run (the sample, the taxi problem's contract),
    the same rows with fares and tips in cents."""
    output_root, _, first, _ = killed_and_rerun
    assert first.blessed and first.drift["baseline"] is None

    def cents(row, i):
        # Fares and tips alike (the label, their ratio, stays learnable): only drift shows it.
        return {**row, "fare": f"{float(row['fare']) * 100:.2f}", "tips": f"{float(row['tips']) * 100:.2f}"}

    in_cents = str(write_sample(tmp_path / "cents", SAMPLE_ROWS, every=EMBEDDED_ROWS // SAMPLE_ROWS, edit=cents))
    common = ["--output-root", output_root, "--enable-cache", *SMALL_RUN]
    pushed = sorted(os.listdir(os.path.dirname(first.pushed_to)))

    assert local_runner.main(["--data-root", in_cents, *common]) == 1
    err = capsys.readouterr().err
    assert "DataDriftError" in err and "[train] feature 'fare': Jensen-Shannon divergence" in err
    assert "[eval] feature 'fare': Jensen-Shannon divergence" in err
    assert "--accept-drift" in err and "payment_type" not in err
    stopped = _summary(output_root)
    states = {c.node_id: c.state for c in stopped.components}
    assert states["AnomalyGate"] == "complete" and states["DriftGate"] == "FAILED" and "Transform" not in states
    assert sorted(os.listdir(os.path.dirname(first.pushed_to))) == pushed

    assert local_runner.main(["--data-root", in_cents, *common, "--accept-drift"]) == 0
    out = capsys.readouterr().out
    assert "Drift: ACCEPTED with --accept-drift: [eval] fare Jensen-Shannon divergence" in out
    accepted = _summary(output_root)
    assert accepted.drift["accepted"] and {c.node_id: c.state for c in accepted.components}["Transform"] == "complete"


def _statistics_counts(uri: str) -> dict[str, dict[str, int]]:
    """Per split: examples, and each feature's rows with a value."""
    from components.drift import read_statistics_dir

    counts = {}
    for split, statistics in read_statistics_dir(uri).items():
        dataset = statistics.datasets[0]
        counts[split] = {"examples": dataset.num_examples}
        for feature in dataset.features:
            kind = feature.WhichOneof("stats")
            common = getattr(feature, kind).common_stats
            counts[split][".".join(feature.path.step)] = common.num_non_missing
    return counts


def _vocabularies(transform_graph_uri: str) -> dict[str, bytes]:
    assets = glob.glob(os.path.join(transform_graph_uri, "transform_fn", "assets", "*"))
    return {os.path.basename(path): open(path, "rb").read() for path in assets}


@pytest.mark.slow
def test_anomalies_stop_the_run_before_transform_and_a_fixed_rerun_on_worker_processes_computes_as_in_process(
    cached_runs, sample_dir, tmp_path_factory, capsys
):
    """The anomalous run stops at the AnomalyGate; the same command on the clean sample then
    completes on two worker processes (``--beam-workers 2``), where StatisticsGen, Transform
    and the Evaluator give what the in-process first run of ``cached_runs`` gave on that
    sample (the contract it checks is the one that run imported: the same schema)."""
    from runtime import beam_pool

    cached_root, in_process, _ = cached_runs
    # A curated schema: the one the earlier run imported (the taxi problem's contract).
    (schema_path,) = glob.glob(
        os.path.join(cached_root, "pipelines", "*", "ImportSchemaGen", "schema", "*", "schema.pbtxt")
    )

    def plant(row, i):
        return {**row, "payment_type": "Bitcoin"} if i % 10 == 0 else row

    bad_dir = write_sample(
        tmp_path_factory.mktemp("bad_e2e"), SAMPLE_ROWS, every=EMBEDDED_ROWS // SAMPLE_ROWS, edit=plant
    )
    output_root = str(tmp_path_factory.mktemp("anomalous"))
    common = ["--output-root", output_root, "--schema-path", schema_path, *SMALL_RUN]

    assert local_runner.main(["--data-root", str(bad_dir), *common]) == 1
    err = capsys.readouterr().err
    assert "feature 'payment_type'" in err and "Bitcoin" in err and "FAILED" in err
    stopped = _summary(output_root)
    states = {c.node_id: c.state for c in stopped.components}
    assert states["AnomalyGate"] == "FAILED"
    assert "Transform" not in states and "Trainer" not in states and stopped.pushed_to is None

    assert local_runner.main(["--data-root", str(sample_dir), *common, "--beam-workers", "2"]) == 0
    fixed = _summary(output_root)
    assert fixed.run_id != stopped.run_id and fixed.blessed and fixed.pushed_to
    assert all(c.state == "complete" for c in fixed.components)
    # StatisticsGen, Transform and the Evaluator ran on the run's two worker processes.
    assert beam_pool._pool is not None and beam_pool._pool.alive() and len(beam_pool._pool.processes) == 2
    assert _statistics_counts(fixed.outputs["StatisticsGen.statistics"]) == _statistics_counts(
        in_process.outputs["StatisticsGen.statistics"]
    )
    vocabularies = _vocabularies(fixed.outputs["Transform.transform_graph"])
    assert vocabularies and vocabularies == _vocabularies(in_process.outputs["Transform.transform_graph"])
    assert fixed.metrics["example_count"] == in_process.metrics["example_count"] > 0


def _transformed_schema(transform_graph_uri: str) -> str:
    with open(os.path.join(transform_graph_uri, "transformed_metadata", "schema.pbtxt")) as f:
        return f.read()


PLAIN_RUN_FLAGS = ["--no-speedups", "--no-report"]


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """``local_runner.py --no-speedups`` on the embedded data in a process of its own, as a
    person runs it: its completed process (what reached the terminal) and output root."""
    output_root = str(tmp_path_factory.mktemp("plain"))
    result = subprocess.run(
        [sys.executable, "local_runner.py", *PLAIN_RUN_FLAGS, "--output-root", output_root],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.abspath(local_runner.__file__)),
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result, output_root


@pytest.mark.slow
def test_without_the_speedups_the_pipeline_computes_the_same_outputs(full_local_run, plain_run):
    """``--no-speedups`` (every library as shipped) on the embedded data against the default
    run with them: the same rows per split, statistics, vocabularies and transformed schema,
    and metrics within training's run-to-run noise."""
    result, output_root = plain_run
    assert "Speedups off (PIPELINE_SPEEDUPS=0)" in result.stdout
    plain, sped_up = _summary(output_root), full_local_run
    assert all(c.state == "complete" for c in plain.components)
    plain_counts = _statistics_counts(plain.outputs["StatisticsGen.statistics"])
    assert plain_counts == _statistics_counts(sped_up.outputs["StatisticsGen.statistics"])
    assert plain_counts["train"]["examples"] + plain_counts["eval"]["examples"] == EMBEDDED_ROWS
    # Computed beside ExampleGen's encoding with them, by TFX's StatisticsGen without.
    plain_statistics = read_statistics_dir(plain.outputs["StatisticsGen.statistics"])
    sped_up_statistics = read_statistics_dir(sped_up.outputs["StatisticsGen.statistics"])
    assert plain_statistics.keys() == sped_up_statistics.keys() == {"train", "eval"}
    for split, statistics in plain_statistics.items():
        assert_same_statistics(sped_up_statistics[split], statistics)
    graph, sped_up_graph = plain.outputs["Transform.transform_graph"], sped_up.outputs["Transform.transform_graph"]
    assert _transformed_schema(graph) == _transformed_schema(sped_up_graph)
    assert _vocabularies(graph) and _vocabularies(graph) == _vocabularies(sped_up_graph)
    assert plain.metrics["example_count"] == sped_up.metrics["example_count"]
    # Training is not seeded: runs of the same code differ by a few thousandths of AUC.
    assert abs(plain.metrics["auc"] - sped_up.metrics["auc"]) < 0.01, (plain.metrics, sped_up.metrics)
    assert abs(plain.metrics["binary_accuracy"] - sped_up.metrics["binary_accuracy"]) < 0.015


# A progress line: a component starting, ending, or how far it has got (runtime/terminal.py).
PROGRESS_LINE = re.compile(r"^\S+ +(running|done +\d+\.\d s|epoch \d+/\d+ \[[#.]+\]( +\d+\.\d s)?)$")


@pytest.mark.slow
def test_a_runs_default_output_holds_only_the_projects_own_lines(plain_run):
    """No line of TensorFlow, absl, TFX, Beam or a Python warning reaches the terminal: every
    line is a progress line, the summary and history (as computed from the run's store), or
    one of the runner's own lines; the libraries' lines are in the log it names."""
    result, output_root = plain_run
    assert result.stderr == ""
    assert library_lines(result.stdout) == []
    config = local_runner.config_from_args(local_runner.parse_args([*PLAIN_RUN_FLAGS, "--output-root", output_root]))
    summary = _summary(output_root)
    ours = set(format_summary(summary, config.blessing, local_run.contract_line(config)).splitlines())
    ours |= set(
        history.format_recent(history.read(history.history_path(output_root, config.pipeline_name))).splitlines()
    )
    lines = result.stdout.splitlines()
    progress = [line for line in lines if PROGRESS_LINE.match(line)]
    executed = [c.node_id for c in summary.components]
    assert sorted(line.split()[0] for line in progress if line.split()[1] == "done") == sorted(executed)
    assert any(line.startswith("Trainer") and " epoch " in line for line in progress)
    log = lines[-1].removeprefix("Library output (TensorFlow, TFX, Beam): ")
    assert log != lines[-1] and log.startswith(os.path.join(output_root, local_run.LOG_DIR, config.pipeline_name))
    rest = [line for line in lines[:-1] if line not in ours and line not in progress and line]
    assert rest == [
        "Speedups off (PIPELINE_SPEEDUPS=0): every library runs as shipped.",
        f"Problem: {config.problem.name} ({config.problem.task.value}; {config.problem.label.describe()})",
    ]
    assert lines[2] == f"Data contract: {config.schema_path}"  # before the run, and again in the summary
    with open(log) as f:
        logged = f.read()
    assert "Component Trainer is running." in logged and library_lines(logged)


def test_the_speedups_flag_lists_and_switches(monkeypatch, capsys):
    from runtime import speedups

    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    assert local_runner.main(["--list-speedups"]) == 0
    listed = capsys.readouterr().out
    assert all(f"- {speedup.name} " in listed for speedup in speedups.SPEEDUPS)
    sped_up = local_runner.config_from_args(local_runner.parse_args([]))
    assert sped_up.beam_pool and sped_up.speedups
    plain = local_runner.config_from_args(local_runner.parse_args(["--no-speedups"]))
    assert not plain.beam_pool and not plain.speedups
    monkeypatch.setenv(speedups.ENV_VAR, "0")
    assert not local_runner.parse_args([]).speedups


@pytest.mark.slow
def test_an_error_in_the_users_code_ends_the_run_naming_where_it_was_raised(sample_dir, tmp_path, monkeypatch, capsys):
    """User code raising inside tf.Transform's trace of preprocessing_fn, under TFX's
    Transform and LocalDagRunner: the last line names its file, line and function, and the
    whole traceback is kept in a file, which the run report points to. (Planted in what
    preprocessing_fn calls: TFX reloads the preprocessing module itself before using it,
    which binds the planted function there too; that binding is undone afterwards, or the
    tests after this one would get it.)"""
    import inspect

    from models import preprocessing, problem

    def evaluate_expression(text, columns):
        raise KeyError("no_such_column")

    monkeypatch.setattr(problem, "evaluate_expression", evaluate_expression)
    monkeypatch.setattr(preprocessing, "evaluate_expression", preprocessing.evaluate_expression)
    argv = ["--data-root", str(sample_dir), "--output-root", str(tmp_path), *SMALL_RUN, "--report"]
    assert local_runner.main(argv) == 1
    err = capsys.readouterr().err
    _, first = inspect.getsourcelines(evaluate_expression)
    assert "The run FAILED: KeyError: 'no_such_column'" in err
    assert f"(tests/test_local_runner.py, line {first + 1}, in evaluate_expression)" in err
    assert "--verbose shows the whole traceback" in err
    (log,) = glob.glob(os.path.join(tmp_path, "logs", "taxi-big-tipper", "failure-*.txt"))
    assert f"The whole traceback: {log}" in err
    kept = open(log).read()
    assert "Traceback (most recent call last)" in kept and "preprocessing_fn" in kept and "no_such_column" in kept
    summary = _summary(str(tmp_path))
    states = {c.node_id: c.state for c in summary.components}
    assert states["Transform"] == "FAILED" and "Trainer" not in states
    # The run report's verdict names the failed component, the error and the kept traceback.
    (page,) = glob.glob(os.path.join(tmp_path, "report", "taxi-big-tipper", summary.run_id, "index.html"))
    verdict = open(page, encoding="utf-8").read().split("<section id='verdict'>")[1].split("</section>")[0]
    assert "The run FAILED at Transform" in verdict and "KeyError: &#x27;no_such_column&#x27;" in verdict
    assert f"its whole log: <code>{log}</code>" in verdict


@pytest.mark.slow
def test_a_spec_naming_a_column_the_data_lacks_stops_before_transform_saying_no_contract_was_checked(tmp_path, capsys):
    problem = tmp_path / "problem"
    shutil.copytree(DEFAULT_PROBLEM_DIR, problem)
    spec = (problem / "problem.toml").read_text()
    (problem / "problem.toml").write_text(spec.replace('numeric = ["', 'numeric = ["no_such_column", "', 1))
    argv = ["--problem", str(problem), "--output-root", str(tmp_path / "out"), "--infer-schema", *SMALL_RUN]
    assert local_runner.main(argv) == 1
    captured = capsys.readouterr()
    assert "column(s) no_such_column named in its problem.toml" in captured.err
    states = {c.node_id: c.state for c in _summary(str(tmp_path / "out")).components}
    assert states["AnomalyGate"] == "FAILED" and "Transform" not in states
    # Opting out of the contract is said, in the run's summary.
    assert "Data contract: none: the schema was inferred from the data itself" in captured.out


@pytest.mark.slow
def test_the_problems_contract_applies_to_any_data_root(tmp_path, capsys):
    """A fresh folder of taxi data (no schema.pbtxt beside it) where a tenth of the fares are
    -1e9: the taxi problem's contract stops it. (A run inferring the schema instead says
    so: the test of a spec naming a missing column, which runs with --infer-schema.)"""

    def broken_fare(row, i):
        return {**row, "fare": "-1000000000.0"} if i % 10 == 0 else row

    data = write_sample(tmp_path / "fresh", 600, every=EMBEDDED_ROWS // 600, edit=broken_fare)
    assert not (data / CONTRACT_FILE).exists()
    argv = ["--data-root", str(data), "--output-root", str(tmp_path / "out"), *SMALL_RUN]
    assert local_runner.main(argv) == 1
    captured = capsys.readouterr()
    assert "feature 'fare'" in captured.err and "Transform and training did not run" in captured.err
    assert f"Data contract: {os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE)}" in captured.out
    states = {c.node_id: c.state for c in _summary(str(tmp_path / "out")).components}
    assert states["AnomalyGate"] == "FAILED" and "Trainer" not in states


@pytest.mark.slow
def test_the_champion_record_decides_the_baseline_through_pushes_refusals_and_a_rollback(sample_dir, tmp_path, capsys):
    """Every baseline here is another run's model, never the candidate itself: a weak first
    model is pushed, a better one replaces it, a worse one is refused against it, and after
    a rollback the next run compares with the weak model that serves again."""
    from runtime import champion

    output_root = str(tmp_path / "out")
    config = PipelineConfig(output_root=output_root)
    # Cached: the runs after the first reuse its examples, statistics and Transform.
    common = ["--data-root", str(sample_dir), "--output-root", output_root, *SMALL_RUN, "--enable-cache"]

    def weak(learning_rate: str) -> list[str]:
        """One step at a rate too small to learn; each rate a Trainer of its own, not cached."""
        steps = ["--train-steps", "1", "--epochs", "1", "--hparam", "min_learning_rate=0"]
        return [*common, *steps, "--hparam", f"learning_rate={learning_rate}"]

    def run(argv) -> object:
        assert local_runner.main(argv) == 0
        summary = _summary(output_root)
        assert summary.component("Champion").state == "complete"
        return summary

    first = run(weak("1e-6"))
    assert first.blessed and not first.had_baseline and first.pushed_to
    weak_model = champion.read(config.pipeline_root).champion.model
    assert weak_model == first.outputs["Trainer.model"]

    # Long enough to learn the problem well: an untrained model's AUC is chance, drawn by its
    # random weights, and a short training's may not beat every draw.
    better = run([*common, "--train-steps", "200", "--epochs", "4"])
    assert better.baseline == weak_model != better.outputs["Trainer.model"]
    assert better.blessed and better.pushed_to and better.metrics["auc"] > first.metrics["auc"]
    assert champion.read(config.pipeline_root).champion.model == better.outputs["Trainer.model"]

    worse = run(weak("2e-6"))
    assert worse.baseline == better.outputs["Trainer.model"]
    assert worse.blessed is False and worse.pushed_to is None
    assert any("against the champion" in failure for failure in worse.validation_failures)
    assert champion.read(config.pipeline_root).champion.model == better.outputs["Trainer.model"]
    assert len(release.local_versions(config.serving_model_dir)) == 2  # the refused model was not pushed

    capsys.readouterr()
    assert release.main(["rollback", "--output-root", output_root]) == 0
    assert "warm-starts from version" in capsys.readouterr().out
    after_rollback = run(weak("3e-6"))  # what it trains does not matter: which model it compares with does
    assert after_rollback.baseline == weak_model  # the rolled-back model is not the baseline
    assert after_rollback.drift["baseline"] == first.outputs["Evaluator.blessing"]
