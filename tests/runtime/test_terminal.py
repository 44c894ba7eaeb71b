"""The terminal shows the command's own lines and progress; library output goes to the log."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from runtime import terminal as terminal_lib
from runtime.terminal import Terminal, is_project_code, report_progress, say

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A command in a process of its own, so that what reaches descriptors 1 and 2 is what a
# person would see: every kind of library output, then the command's own lines.
COMMAND = textwrap.dedent(
    """
    import logging, os, subprocess, sys, warnings
    sys.path.insert(0, {repo!r})
    from runtime.terminal import Terminal, report_progress, say

    with Terminal({log!r}) as terminal:
        say("the command's own line")
        os.write(2, b"E0000 00:00 cuda_fft.cc:479] Unable to register cuFFT factory\\n")
        os.write(1, b"a C library's stdout\\n")
        print("a library's print")
        print("a library's stderr print", file=sys.stderr)
        warnings.warn_explicit("a library's warning", FutureWarning, "/usr/lib/somelib/x.py", 1)
        logging.getLogger("absl").info("a library's info")
        logging.getLogger("tensorflow").error("a library's error")
        subprocess.run([sys.executable, "-c", "import sys; print('a child process'); sys.stderr.write('its stderr')"])
        logging.getLogger("absl").info("Component Trainer is running.")
        report_progress("Trainer", 1, 2, "epoch")
        report_progress("Trainer", 2, 2, "epoch")
        logging.getLogger("absl").info("Component Trainer is finished.")
        say("the command's error", err=True)
        terminal.say_log()
    print("after the context: the terminal again")
    """
)
LIBRARY_LINES = [
    "Unable to register cuFFT factory",
    "a C library's stdout",
    "a library's print",
    "a library's stderr print",
    "a library's warning",
    "a library's info",
    "a library's error",
    "a child process",
    "its stderr",
]


@pytest.fixture(scope="module")
def command(tmp_path_factory):
    log = str(tmp_path_factory.mktemp("terminal") / "logs" / "command.log")
    done = subprocess.run(
        [sys.executable, "-c", COMMAND.format(repo=REPO, log=log)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    with open(log) as f:
        return done, f.read(), log


def test_library_output_goes_to_the_log_and_not_to_the_terminal(command):
    done, log_text, _ = command
    for line in LIBRARY_LINES:
        assert line not in done.stdout + done.stderr
        assert line in log_text


def test_the_commands_own_lines_reach_the_terminal_and_the_log(command):
    done, log_text, log = command
    assert done.stdout.splitlines() == [
        "the command's own line",
        "Trainer                        running",
        *[line for line in done.stdout.splitlines() if "epoch" in line],
        done.stdout.splitlines()[4],
        f"Library output (TensorFlow, TFX, Beam): {log}",
        "after the context: the terminal again",
    ]
    assert done.stderr == "the command's error\n"
    assert "the command's own line" in log_text and "the command's error" in log_text


def test_progress_is_a_line_per_event_off_a_terminal(command):
    lines = command[0].stdout.splitlines()
    epochs = [line for line in lines if line.startswith("Trainer") and "epoch" in line]
    assert [line.split()[1:3] for line in epochs] == [["epoch", "1/2"], ["epoch", "2/2"]]
    assert "[##########..........]" in epochs[0] and "[####################]" in epochs[1]
    finished = lines[lines.index(epochs[-1]) + 1]
    assert finished.split()[:2] == ["Trainer", "done"] and finished.endswith(" s")


def test_the_projects_own_warnings_and_errors_are_shown(tmp_path, capsys):
    project_file = os.path.join(REPO, "runtime", "terminal.py")
    with Terminal(str(tmp_path / "x.log")):
        import logging
        import warnings

        warnings.warn_explicit("ours", UserWarning, project_file, 1)
        warnings.warn_explicit("theirs", UserWarning, os.path.join(REPO, ".venv", "lib", "x.py"), 1)
        logging.getLogger("pipeline").handle(
            logging.LogRecord("pipeline", logging.WARNING, project_file, 1, "our log warning", None, None)
        )
        logging.getLogger("lib").handle(
            logging.LogRecord("lib", logging.WARNING, "/usr/lib/x.py", 1, "their log warning", None, None)
        )
    err = capsys.readouterr().err
    assert "warning: ours" in err and "warning: our log warning" in err
    assert "theirs" not in err and "their log warning" not in err


def test_is_project_code_tells_ours_from_the_virtualenvs():
    assert is_project_code(os.path.join(REPO, "models", "trainer.py"))
    assert not is_project_code(os.path.join(REPO, ".venv", "lib", "python3.11", "site-packages", "tfx", "x.py"))
    assert not is_project_code("/usr/lib/python3.11/logging/__init__.py")


def test_verbose_redirects_nothing(tmp_path, capfd):
    log = tmp_path / "x.log"
    with Terminal(str(log), verbose=True) as terminal:
        os.write(2, b"chatter\n")
        say("ours")
        terminal.say_log()
    out, err = capfd.readouterr()
    assert out == "ours\n" and err == "chatter\n" and not log.exists()


def test_a_command_inside_another_speaks_to_the_same_person(tmp_path, capfd):
    with Terminal(str(tmp_path / "outer.log")):
        with Terminal(str(tmp_path / "inner.log")):
            os.write(2, b"inner chatter\n")
            say("inner line")
        say("outer line")
        assert terminal_lib._active is not None
    assert terminal_lib._active is None
    out, err = capfd.readouterr()
    assert out == "inner line\nouter line\n" and err == ""
    assert "inner chatter" in (tmp_path / "inner.log").read_text()
    assert "inner chatter" not in (tmp_path / "outer.log").read_text()


def test_the_log_can_be_renamed_while_open(tmp_path, capfd):
    with Terminal(str(tmp_path / "first.log")) as terminal:
        os.write(2, b"before\n")
        terminal.move_log(str(tmp_path / "moved" / "run.log"))
        os.write(2, b"after\n")
    assert not (tmp_path / "first.log").exists()
    assert (tmp_path / "moved" / "run.log").read_text().splitlines() == ["before", "after"]
    assert capfd.readouterr() == ("", "")


def test_progress_outside_a_terminal_is_an_ordinary_log_line(caplog):
    with caplog.at_level("INFO", logger=terminal_lib.PROGRESS_LOGGER):
        report_progress("Trainer", 3, 8, "epoch")
    assert caplog.messages == ["Trainer: epoch 3 of 8"]
