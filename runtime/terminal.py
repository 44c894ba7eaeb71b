"""What a command shows on the terminal: its own lines (``say``), each component's progress
(``report_progress``), the project's warnings and errors; every other stream (TensorFlow's C++
logs, the libraries' logging, Beam's workers) goes to a log file, redirected at the
file-descriptor level (docs/run-report.md). ``verbose`` leaves every stream as it is.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
import time
import warnings
from types import TracebackType
from typing import IO, Any

# The logger ``report_progress`` writes to: on Vertex (no Terminal) it is ordinary logging.
PROGRESS_LOGGER = "pipeline.progress"
_COMPONENT_RUNNING, _COMPONENT_FINISHED = " is running.", " is finished."
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Inside the project's folder but not its code: the environment and tools uv installs there.
_NOT_PROJECT_CODE = tuple(os.path.join(_PROJECT_ROOT, d) + os.sep for d in (".venv", ".tools", "outputs"))
LOG_FORMAT = "%(asctime)s %(levelname).1s %(name)s %(filename)s:%(lineno)d] %(message)s"

_active: Terminal | None = None


def is_project_code(path: str) -> bool:
    """True for a file of this project's own code (not a library's, not the virtualenv's)."""
    if not os.path.isabs(path):  # "<string>", "<frozen ...>": code without a file of ours
        return False
    return path.startswith(_PROJECT_ROOT + os.sep) and not path.startswith(_NOT_PROJECT_CODE)


def say(text: str = "", *, err: bool = False) -> None:
    """Writes one of the command's own lines where the person running it reads it."""
    if _active is not None:
        _active.write(text, err=err)
    else:
        print(text, file=sys.stderr if err else sys.stdout, flush=True)


def report_progress(component: str, done: int, total: int, unit: str) -> None:
    """How far ``component`` has got: ``done`` of ``total`` ``unit`` (e.g. 3 of 8 epochs)."""
    logging.getLogger(PROGRESS_LOGGER).info(
        "%s: %s %d of %d",
        component,
        unit,
        done,
        total,
        extra={"progress": (component, done, total, unit)},
    )


def active_log() -> str | None:
    """The log file the library output goes to, while a quiet Terminal is active."""
    return _active.log_path if _active is not None and not _active.verbose else None


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    """The flag every command shares: the libraries' output on the terminal too."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Show every line TensorFlow, TFX, Beam and the other libraries write (default: they go to a "
        "log file, named at the end).",
    )


def command_log(output_root: str, command: str) -> str:
    """Where a command's library output goes: ``<output_root>/logs/<command>-<time>.log``."""
    return os.path.join(os.path.abspath(output_root), "logs", f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.log")


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


class _Progress(logging.Handler):
    """Turns LocalDagRunner's component lines and ``report_progress`` into terminal lines;
    passes on the project's own warnings and errors."""

    def __init__(self, terminal: Terminal) -> None:
        super().__init__(logging.INFO)
        self.terminal = terminal
        self.running: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            progress = getattr(record, "progress", None)
            if progress is not None:
                component, done, total, unit = progress
                started = self.running.get(component)
                elapsed = f" {time.monotonic() - started:6.1f} s" if started is not None else ""
                self.terminal.status(f"{component:<30} {unit} {done}/{total} {_bar(done, total)}{elapsed}")
                return
            message = record.getMessage()
            if message.startswith("Component ") and message.endswith((_COMPONENT_RUNNING, _COMPONENT_FINISHED)):
                self._component(message)
            elif record.levelno >= logging.WARNING and is_project_code(record.pathname):
                self.terminal.write(f"{record.levelname.lower()}: {message}", err=True)
        except Exception:  # noqa: BLE001 - logging must never break the run
            self.handleError(record)

    def _component(self, message: str) -> None:
        if message.endswith(_COMPONENT_RUNNING):
            name = message[len("Component ") : -len(_COMPONENT_RUNNING)]
            self.running[name] = time.monotonic()
            self.terminal.status(f"{name:<30} running")
        else:
            name = message[len("Component ") : -len(_COMPONENT_FINISHED)]
            started = self.running.pop(name, None)
            elapsed = f" {time.monotonic() - started:6.1f} s" if started is not None else ""
            self.terminal.write(f"{name:<30} done{elapsed}")

    def fail_running(self) -> None:
        """The components still running when the run stopped: each one's failure line."""
        for name, started in self.running.items():
            self.terminal.write(f"{name:<30} FAILED {time.monotonic() - started:6.1f} s", err=True)
        self.running.clear()


class Terminal:
    """A context in which library output goes to ``log_path`` and ``say`` reaches the person.

    ``verbose``: nothing is redirected (every library line shows, as without the context)."""

    def __init__(self, log_path: str, *, verbose: bool = False) -> None:
        self.log_path = os.path.abspath(log_path)
        self.verbose = verbose
        self.out: IO[str] = sys.stdout
        self.err: IO[str] = sys.stderr
        self._progress = _Progress(self)
        self._open_status = False
        self._saved: dict[str, Any] = {}
        self._log: IO[str] | None = None
        self._to_log: logging.Handler | None = None
        self._outer: Terminal | None = None

    # -- the person's side --------------------------------------------------------------
    def write(self, text: str, *, err: bool = False) -> None:
        """One of the command's own lines (ends a status line being rewritten, first)."""
        self._end_status()
        stream = self.err if err else self.out
        stream.write(text + "\n")
        stream.flush()
        if not self.verbose and self._log is not None:
            self._log.write(text + "\n")  # the log tells the whole story, the terminal's lines too

    def status(self, text: str) -> None:
        """A progress line: rewritten in place on a terminal, a line of its own elsewhere."""
        if self.out.isatty():
            self.out.write("\r\033[K" + text)
            self.out.flush()
            self._open_status = True
        else:
            self.write(text)

    def _end_status(self) -> None:
        if self._open_status:
            self.out.write("\r\033[K")
            self.out.flush()
            self._open_status = False

    def say_log(self) -> None:
        """Says where the libraries' output went (nothing when it was shown)."""
        if not self.verbose:
            self.write(f"Library output (TensorFlow, TFX, Beam): {self.log_path}")

    def fail_running(self) -> None:
        """Says which component was running when the run failed."""
        self._progress.fail_running()

    # -- the context ---------------------------------------------------------------------
    def __enter__(self) -> Terminal:
        global _active
        self._outer, _active = _active, self
        if self._outer is not None and self._outer.verbose:
            self.verbose = True  # a command run inside a verbose one (the replay's runs) shows everything too
        if self.verbose:
            return self
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        self._log = open(self.log_path, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
        saved_fds = (os.dup(1), os.dup(2))
        if self._outer is not None:  # inside another command's Terminal: the same person reads both
            self.out, self.err = self._outer.out, self._outer.err
        else:
            self.out = _person_stream(sys.stdout, saved_fds[0])
            self.err = _person_stream(sys.stderr, saved_fds[1])
        os.dup2(self._log.fileno(), 1)
        os.dup2(self._log.fileno(), 2)
        root = logging.getLogger()
        self._saved = {
            "fds": saved_fds,
            "streams": (sys.stdout, sys.stderr),
            "showwarning": warnings.showwarning,
            "handlers": (root.handlers[:], root.level),
        }
        sys.stdout = sys.stderr = self._log
        warnings.showwarning = self._show_warning
        self._to_log = logging.StreamHandler(self._log)
        self._to_log.setFormatter(logging.Formatter(LOG_FORMAT))
        self.keep_handlers()
        return self

    def keep_handlers(self) -> None:
        """(Re)installs the context's logging handlers at INFO, after the heavy imports that
        install their own (absl's, TensorFlow's) on the root logger: the log file and the
        progress, or with ``verbose`` absl's handler, every line on the terminal as absl
        formats it."""
        from absl import logging as absl_logging

        root = logging.getLogger()
        if self.verbose:
            root.handlers = [absl_logging.get_absl_handler()]
        elif self._to_log is not None:
            root.handlers = [self._to_log, self._progress]
        else:
            return
        root.setLevel(logging.INFO)
        # absl's own verbosity (WARNING unless set) is applied again to its logger whenever
        # absl's flags are parsed, as a library does mid-run: INFO keeps the components' lines.
        absl_logging.set_verbosity(absl_logging.INFO)

    def move_log(self, log_path: str) -> None:
        """Renames the log file (the open descriptors follow it)."""
        log_path = os.path.abspath(log_path)
        if not self.verbose and self._log is not None and log_path != self.log_path:
            os.makedirs(os.path.dirname(log_path), exist_ok=True)
            os.replace(self.log_path, log_path)
        self.log_path = log_path

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        global _active
        _active = self._outer
        self._end_status()
        if self.verbose or self._log is None:
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved = self._saved
        os.dup2(saved["fds"][0], 1)
        os.dup2(saved["fds"][1], 2)
        for fd in saved["fds"]:
            os.close(fd)
        sys.stdout, sys.stderr = saved["streams"]
        warnings.showwarning = saved["showwarning"]
        root = logging.getLogger()
        root.handlers, level = saved["handlers"]
        root.setLevel(level)
        if self._outer is None:
            for stream in (self.out, self.err):
                if stream not in saved["streams"]:
                    stream.close()
        self.out, self.err = sys.stdout, sys.stderr
        self._log.close()
        self._log = self._to_log = None

    def _show_warning(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: IO[str] | None = None,
        line: str | None = None,
    ) -> None:
        """Python warnings: into the log; the project's own ones on the terminal too."""
        if self._log is not None:
            self._log.write(warnings.formatwarning(message, category, filename, lineno, line))
        if is_project_code(filename):
            self.write(f"warning: {message}", err=True)


def _person_stream(stream: IO[str], saved_fd: int) -> IO[str]:
    """Where the command's own lines go once descriptors 1 and 2 lead to the log: a new
    stream on the saved descriptor when ``stream`` wrote to 1 or 2 itself; otherwise the
    stream as it is (a test's capture, which never wrote to the descriptors)."""
    try:
        fileno = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return stream
    if fileno not in (1, 2):
        return stream
    return open(os.dup(saved_fd), "w", buffering=1, encoding=getattr(stream, "encoding", None) or "utf-8")  # noqa: SIM115
