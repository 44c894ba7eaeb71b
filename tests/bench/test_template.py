"""bench/template.py: TFX's taxi template, copied with every component enabled, on our data."""

from __future__ import annotations

import os
import subprocess
import sys

from bench import template
from tests.support.sample_data import write_sample


def test_template_is_copied_with_every_component_enabled_on_our_data(tmp_path):
    data_dir = write_sample(tmp_path / "data", 50)
    destination = template.prepare_template(tmp_path / "template", data_dir)
    assert "# components.append(" not in (destination / "pipeline" / "pipeline.py").read_text()
    assert (destination / "data").resolve() == data_dir.resolve()
    # The template's own runner, with LocalDagRunner.run replaced by a listing of the DAG.
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import local_runner; from tfx import v1 as tfx; "
            "tfx.orchestration.LocalDagRunner.run = "
            "lambda self, p: print('DAG:', ','.join(c.id for c in p.components)); "
            "local_runner.run()",
        ],
        cwd=destination,
        capture_output=True,
        text=True,
        check=True,
        env=template.template_environment(),
    ).stdout
    dag = listing.split("DAG: ", 1)[1].split()[0].split(",")
    # ExampleValidator stays out: the template only appends it when a schema file is given.
    assert sorted(dag) == sorted(
        [
            "CsvExampleGen",
            "StatisticsGen",
            "SchemaGen",
            "Transform",
            "Trainer",
            "latest_blessed_model_resolver",
            "Evaluator",
            "Pusher",
        ]
    )


def test_the_template_runs_without_the_environment_this_project_sets_for_itself():
    environ = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin", "HOME": "/root"}
    assert template.template_environment(environ) == {"PATH": "/usr/bin", "HOME": "/root"}
    # This process has them (models/__init__.py), the template's does not.
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    assert "TF_USE_LEGACY_KERAS" not in template.template_environment()
