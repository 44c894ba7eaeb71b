"""The unchanged-rerun check: which runs are recorded, and every change that sends the next
run back to TFX. (A real steady run reused end to end: tests/test_local_runner.py.)"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from pipeline.config import REPO_ROOT, PipelineConfig
from report.run_summary import ComponentRun, RunSummary
from runs import unchanged


def _summary(output_root: Path, **fields) -> RunSummary:
    model = output_root / "pipelines" / "Trainer" / "model" / "7"
    model.mkdir(parents=True)
    pushed = output_root / "serving_model" / "1"
    pushed.mkdir(parents=True)
    base = dict(
        run_id="run-2",
        components=[ComponentRun("Trainer", "cached", 0.1), ComponentRun("Evaluator", "complete", 1.5, 10.0, 11.5)],
        metrics={"auc": 0.94},
        blessed=True,
        had_baseline=True,
        baseline_is_candidate=True,
        pushed_to=str(pushed),
        drift={"baseline": None, "serving": None, "accepted": False, "drift": []},
        outputs={"Trainer.model": str(model)},
    )
    return RunSummary(**{**base, **fields})


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project's code, to edit."""
    root = tmp_path / "project"
    for name in unchanged.CODE_ROOTS:
        source = REPO_ROOT / name
        if source.is_file():
            root.mkdir(exist_ok=True)
            shutil.copy(source, root / name)
        else:
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture
def steady(tmp_path, project):
    """A recorded steady run: its config, summary and project root."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "taxi.csv").write_text("fare,tips\n1.0,0.5\n")
    config = PipelineConfig(data_root=str(data), output_root=str(tmp_path / "out"), enable_cache=True)
    os.makedirs(os.path.dirname(config.metadata_path))
    Path(config.metadata_path).write_bytes(b"store as the run left it")
    summary = _summary(tmp_path / "out")
    assert unchanged.record(config, summary, report=None, project_root=project)
    return config, summary, project


def test_a_steady_run_is_reused_as_recorded(steady):
    config, summary, project = steady
    reused = unchanged.reusable_run(config, project)
    assert reused is not None and reused.summary == summary and reused.report is None


@pytest.mark.parametrize(
    "fields, steady_run",
    [
        # The first blessing: the next run evaluates against it.
        (dict(had_baseline=False, baseline_is_candidate=False), False),
        # A new model blessed over an older baseline: the next run's baseline changes.
        (dict(baseline_is_candidate=False), False),
        # Not blessed: the next run finds the same baseline again.
        (dict(blessed=False, baseline_is_candidate=False), True),
        (dict(blessed=None), False),
        (dict(components=[ComponentRun("Trainer", "FAILED", 1.0)]), False),
        (dict(components=[]), False),
    ],
)
def test_which_runs_are_steady(tmp_path, fields, steady_run):
    assert unchanged.is_steady(_summary(tmp_path, **fields)) is steady_run


def test_an_unsteady_run_drops_the_record(steady):
    config, summary, project = steady
    first_blessing = dataclasses.replace(summary, baseline_is_candidate=False, had_baseline=False)
    assert not unchanged.record(config, first_blessing, report=None, project_root=project)
    assert not os.path.exists(unchanged.record_path(config))
    assert unchanged.reusable_run(config, project) is None


def _touch_data(config, project):
    path = Path(config.data_root) / "taxi.csv"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1))
    return config


def _new_data_file(config, project):
    (Path(config.data_root) / "more.csv").write_text("fare,tips\n2.0,0.1\n")
    return config


def _write_to_store(config, project):
    with open(config.metadata_path, "ab") as store:
        store.write(b"another run")
    return config


def _edit_code(config, project):
    with open(project / "models" / "model.py", "a") as source:
        source.write("\n# edited\n")
    return config


def _move_the_champion(config, project):
    """A push or a rollback since: the champion record changed."""
    from runtime import champion

    entry = champion.Entry(f"{config.pipeline_root}/Trainer/model/9", f"{config.pipeline_root}/Evaluator/blessing/9")
    champion.update(config.pipeline_root, lambda record: record.pushed(entry))
    return config


def _remove_pushed_model(config, project):
    (pushed,) = (Path(config.output_root) / "serving_model").iterdir()
    pushed.rmdir()
    return config


@pytest.mark.parametrize(
    "change",
    [
        _touch_data,
        _new_data_file,
        _write_to_store,
        _edit_code,
        _remove_pushed_model,
        _move_the_champion,
        # A step count where the budget chose (the default), or another one.
        lambda config, project: dataclasses.replace(config, train_steps=(config.train_steps or 400) + 1),
        lambda config, project: dataclasses.replace(config, hparams=dataclasses.replace(config.hparams, dropout=0.5)),
        lambda config, project: dataclasses.replace(config, enable_cache=False),
    ],
    ids=[
        "data touched",
        "data added",
        "store written",
        "code edited",
        "output removed",
        "champion moved",
        "steps",
        "hparams",
        "no cache",
    ],
)
def test_any_change_sends_the_run_back_to_tfx(steady, change):
    config, _, project = steady
    assert unchanged.reusable_run(change(config, project), project) is None


def test_forget_drops_the_record(steady):
    config, _, project = steady
    unchanged.forget(config)
    unchanged.forget(config)  # nothing left to drop: no error
    assert unchanged.reusable_run(config, project) is None


def test_the_check_imports_no_tensorflow():
    """It exists to spare a rerun TensorFlow's import: reading the champion record's path is not a reason to pay it."""
    import subprocess
    import sys

    code = "import sys; from runs import unchanged; print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert result.stdout.strip() == "False"
