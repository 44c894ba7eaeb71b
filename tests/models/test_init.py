"""models/__init__.py is the one place that sets the environment TensorFlow reads at its first
import; every entry point gets it by importing a project module before TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import importlib, os, sys
importlib.import_module(sys.argv[1])
print(os.environ.get("TF_USE_LEGACY_KERAS"), os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
import tensorflow as tf
print(tf.keras.__name__.split(".")[0])
"""


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")}
    return {**env, "PYTHONPATH": str(REPO), **extra}


@pytest.mark.parametrize("module", ["local_runner", "kubeflow_runner", "bench.__main__", "components", "pipeline"])
def test_each_entry_point_gets_keras_2_from_an_unset_environment(module):
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module], cwd=REPO, env=_clean_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "2", "tf_keras"]


def test_a_user_setting_for_keras_3_is_refused_with_the_fix():
    result = subprocess.run(
        [sys.executable, "-c", "import models"],
        cwd=REPO,
        env=_clean_env(TF_USE_LEGACY_KERAS="0"),
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "TF_USE_LEGACY_KERAS='0'" in result.stderr and "Unset it or set it to 1" in result.stderr
