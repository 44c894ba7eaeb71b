"""TFX's own taxi template, run on the benchmark's data in the same session, so the
pipeline's figures have a baseline measured under the same conditions.

The template is taken exactly as ``tfx template copy --model=taxi`` writes it, with the
components its steps tell a user to uncomment enabled, and run as its users run it: in this
environment minus the variables this project sets for itself (``PROJECT_ENVIRONMENT``), so
with TensorFlow 2.16's default Keras, under which it is also faster than under Keras 2.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path
from typing import Any

from bench.measure import component_states, components_in, run_measured

TEMPLATE_PIPELINE_NAME = "taxi-template"
# Set by models/__init__.py for this project's own processes (Keras 2, quieter C++ logs):
# not for the template, which a user runs without them.
PROJECT_ENVIRONMENT = ("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")
# `tfx template copy` ships these components commented out ("TODO(step 5/6): Uncomment here").
_COMMENTED_APPEND = re.compile(r"^(\s*)# (components\.append\()", re.M)


def prepare_template(destination: Path, data_dir: Path) -> Path:
    """TFX's taxi template exactly as ``tfx template copy --model=taxi`` writes it, with
    every ``components.append(...)`` it ships commented out enabled (as a user following
    its steps does; 1000 train steps is its own default) and its data/ replaced by ``data_dir``.
    """
    if destination.exists():
        shutil.rmtree(destination)
    _copy_template(destination)
    pipeline_file = destination / "pipeline" / "pipeline.py"
    source = pipeline_file.read_text()
    enabled, count = _COMMENTED_APPEND.subn(r"\1\2", source)
    if count == 0:
        raise RuntimeError(f"{pipeline_file}: no commented-out components.append(...) found; the template changed")
    pipeline_file.write_text(enabled)
    shutil.rmtree(destination / "data")
    (destination / "data").symlink_to(data_dir.resolve(), target_is_directory=True)
    return destination


def _copy_template(destination: Path) -> None:
    """What ``tfx template copy --model=taxi --pipeline_name=... --destination_path=...`` does:
    its command's handler, called in this process. The command line would start an interpreter
    that imports TFX and TensorFlow all over again (seconds of CPU) only to copy files."""
    from tfx.tools.cli import labels
    from tfx.tools.cli.handler import template_handler

    template_handler.copy_template(
        {labels.MODEL: "taxi", labels.PIPELINE_NAME: TEMPLATE_PIPELINE_NAME, labels.DESTINATION_PATH: str(destination)}
    )


def template_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (this process's by default) without ``PROJECT_ENVIRONMENT``."""
    environ = dict(os.environ if environ is None else environ)
    return {key: value for key, value in environ.items() if key not in PROJECT_ENVIRONMENT}


def benchmark_template(data_dir: Path, run_dir: Path) -> dict[str, Any]:
    """One fresh run of the template on ``data_dir``: wall time, memory, seconds per component."""
    destination = prepare_template(run_dir / "template", data_dir)
    print(f"  TFX taxi template -> {destination}", flush=True)
    measured = run_measured(["local_runner.py"], destination, run_dir / "template.log", env=template_environment())
    metadata = destination / "tfx_metadata" / TEMPLATE_PIPELINE_NAME / "metadata.db"
    with contextlib.chdir(destination):  # the template records artifact URIs relative to where it ran
        components = components_in(str(metadata), TEMPLATE_PIPELINE_NAME)
    print(
        f"    {measured['wall_s']:.1f} s, peak RSS {measured['peak_rss_mb']:.0f} MB, PSS "
        f"{measured['peak_pss_mb']:.0f} MB",
        flush=True,
    )
    return {
        "wall_s": measured["wall_s"],
        "peak_rss_mb": measured["peak_rss_mb"],
        "peak_pss_mb": measured["peak_pss_mb"],
        "max_process_rss_mb": measured["max_process_rss_mb"],
        "component_s": {c.node_id: c.seconds for c in components},
        "component_states": component_states(components),
    }
