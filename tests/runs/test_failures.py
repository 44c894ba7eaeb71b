"""runs.failures: the line a failed run ends with names where the user's code raised,
through the machinery's frames, a library's, and exceptions raised from others."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from runs import failures

USER_CODE = """
import json


def parse(text):
    return json.loads(text)["fare"]


def label(rows):
    return [parse(row) for row in rows]


def label_all(rows):
    return {i: json.loads(row)["fare"] for i, row in enumerate(rows)}
"""
MACHINERY_CODE = """
def run(user_fn, rows, wrap=False):
    try:
        return user_fn(rows)
    except Exception as err:
        if wrap:
            raise RuntimeError("the component failed") from err
        raise
"""


def _module(root: Path, relative: str, code: str):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_")[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path):
    root = tmp_path.resolve()
    return root, _module(root, "models/labels.py", USER_CODE), _module(root, "components/gate.py", MACHINERY_CODE)


def _raised(call) -> BaseException:
    try:
        call()
    except Exception as err:  # noqa: BLE001 - the test inspects it
        return err
    raise AssertionError("nothing raised")


def test_the_innermost_user_frame_is_named_past_the_librarys(project):
    root, user, machinery = project
    error = _raised(lambda: machinery.run(user.label, ['{"fare": 1}', '{"tips": 2}']))
    assert failures.describe(error, root) == "KeyError: 'fare' (models/labels.py, line 6, in parse)"


def test_a_comprehension_is_named_by_the_function_it_is_in(project):
    root, user, machinery = project
    error = _raised(lambda: machinery.run(user.label_all, ["{}"]))
    assert failures.describe(error, root) == "KeyError: 'fare' (models/labels.py, line 14, in label_all)"


def test_an_exception_raised_from_the_users_is_traced_to_it(project):
    root, user, machinery = project
    error = _raised(lambda: machinery.run(user.label, ["not json"], wrap=True))
    assert isinstance(error, RuntimeError)
    said = failures.describe(error, root)
    assert said.startswith("RuntimeError: the component failed (models/labels.py, line 6, in parse)")


def test_without_user_code_on_the_way_only_the_exception_is_said(project):
    root, _, machinery = project
    error = _raised(lambda: machinery.run(len, None))
    assert failures.user_frame(error, root) is None
    assert failures.describe(error, root) == "TypeError: object of type 'NoneType' has no len()"


def test_frames_of_installed_packages_are_not_the_users():
    """Raised inside a package installed in the project's .venv, called from this file:
    this file's frame is named, not the package's."""
    from packaging.version import Version

    error = _raised(lambda: Version("not a version"))
    frame = failures.user_frame(error)
    assert frame is not None and frame.filename == __file__ and frame.name == "<lambda>"
