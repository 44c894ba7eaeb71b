"""Where a failed run's exception was raised in the user's code: the one line a person
needs first (file, line, function), which the exception's own message rarely says and
TFX's and TensorFlow's frames bury.

The user's code is any module of the project outside its machinery (``MACHINERY``:
``components``, ``pipeline``, ``launch``, ``report``, ``authoring``, ``runs``, ``runtime``,
the runners) and outside the installed packages: today ``models/``, whatever else a user adds.
"""

from __future__ import annotations

import datetime
import os
import traceback
from pathlib import Path

from pipeline.config import REPO_ROOT

MACHINERY = (
    *("components", "pipeline", "launch", "report", "authoring", "runs", "runtime"),
    *("local_runner.py", "kubeflow_runner.py", ".venv", ".tools"),
)


def _chain(error: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or during, innermost last."""
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return chain


# Frames Python 3.11 gives a comprehension of its own: named by the function around it.
COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def _in_project(filename: str, root: Path) -> Path | None:
    """``filename`` relative to the project's root, or None when it lies outside it."""
    try:
        return Path(os.path.realpath(filename)).relative_to(root)
    except ValueError:
        return None


def _is_users(frame: traceback.FrameSummary, root: Path) -> bool:
    relative = _in_project(frame.filename, root)
    return relative is not None and bool(relative.parts) and relative.parts[0] not in MACHINERY


def user_frame(error: BaseException, root: Path = REPO_ROOT) -> traceback.FrameSummary | None:
    """The innermost frame of user code in ``error``'s traceback (or of an exception it was
    raised from), or None when the user's code is not on it. A comprehension's frame keeps
    its line and takes the name of the function it is in."""
    for link in reversed(_chain(error)):
        frames = traceback.extract_tb(link.__traceback__)
        for index in range(len(frames) - 1, -1, -1):
            frame = frames[index]
            if not _is_users(frame, root):
                continue
            outer = index
            while frames[outer].name in COMPREHENSIONS and outer > 0 and frames[outer - 1].filename == frame.filename:
                outer -= 1
            return traceback.FrameSummary(frame.filename, frame.lineno, frames[outer].name, line=frame.line)
    return None


def describe(error: BaseException, root: Path = REPO_ROOT) -> str:
    """``KeyError: 'amount_xf'``, and where the user's code raised it when it did:
    ``KeyError: 'amount_xf' (models/model.py, line 95, in build_keras_model)``."""
    said = f"{type(error).__name__}: {error}"
    frame = user_frame(error, root)
    if frame is None:
        return said
    return f"{said} ({_in_project(frame.filename, root)}, line {frame.lineno}, in {frame.name})"


def write_traceback(error: BaseException, directory: str) -> str:
    """Writes ``error``'s whole traceback (the chain of exceptions included) to a new file in
    ``directory``, so it is kept whatever the console showed; returns the file's path."""
    os.makedirs(directory, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = os.path.join(directory, f"failure-{stamp}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(describe(error) + "\n\n" + "".join(traceback.format_exception(error)))
    return path
