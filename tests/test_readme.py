"""Every command the README shows works as written: make targets exist, the files it copies
exist, and each Python command's flags parse with the command's own parser (the runners'
also make their configuration, which checks every value before anything runs)."""

from __future__ import annotations

import argparse
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
# Placeholders the README writes for the reader's own values.
PLACEHOLDERS = {"data/<name>": "data/penguins"}
EXTERNAL_TOOLS = ("gcloud", "gsutil")


def substituted(text: str, variables: dict[str, str]) -> str:
    """``text`` with each ``$NAME`` of ``variables`` replaced by its value."""
    return re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), m.group(0)), text)


def code_lines(text: str) -> list[str]:
    """Each command of the README's indented code blocks: continuations joined, comments cut,
    shell variables set earlier in the same block substituted."""
    commands, variables, pending = [], {}, ""
    for line in text.splitlines():
        if not line.startswith("    "):
            variables, pending = {}, ""
            continue
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        command = re.sub(r"\s+#.*$", "", line).strip()
        if re.fullmatch(r"(?:[A-Z_]+=\S+\s*)+", command):
            for name, value in re.findall(r"([A-Z_]+)=(\S+)", command):
                variables[name] = substituted(value, variables)
            continue
        if command.split(" ", 1)[0] not in ("make", ".venv/bin/python", "python", *EXTERNAL_TOOLS):
            continue
        command = substituted(command, variables)
        for placeholder, value in PLACEHOLDERS.items():
            command = command.replace(placeholder, value)
        commands.append(command)
    return commands


def inline_commands(text: str) -> list[str]:
    """Commands written inline, in backticks: `python -m ...`, `python local_runner.py ...`."""
    found = re.findall(r"`((?:\.venv/bin/)?python (?:-m \w[\w.]*|\w+\.py)[^`]*)`", text)
    return [c.replace(placeholder, value) for c in found for placeholder, value in PLACEHOLDERS.items()]


def expanded(command: str) -> list[str]:
    """``a|b|c`` as the three commands it stands for."""
    words = shlex.split(command)
    for i, word in enumerate(words):
        if "|" in word and not word.startswith("-") and "=" not in word:
            return [shlex.join([*words[:i], choice, *words[i + 1 :]]) for choice in word.split("|")]
    return [command]


COMMANDS = sorted({c for line in code_lines(README) + inline_commands(README) for c in expanded(line)})


def test_the_readme_shows_commands():
    assert any(c.startswith("make run") for c in COMMANDS)
    assert any("kubeflow_runner.py" in c and "--submit" in c for c in COMMANDS)
    assert any("-m runs.release promote" in c for c in COMMANDS)


class Parsed(Exception):
    def __init__(self, namespace: argparse.Namespace) -> None:
        super().__init__("parsed")
        self.namespace = namespace


@pytest.fixture
def stop_after_parsing(monkeypatch):
    """The command's own parser parses its arguments (unknown flags and bad values exit 2),
    then the command stops."""
    parse_args, parse_known_args = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    inside = []

    def parsed(self, *args, **kwargs):
        inside.append(True)
        try:
            namespace = parse_args(self, *args, **kwargs)
        finally:
            inside.pop()
        raise Parsed(namespace)

    def known(self, *args, **kwargs):
        result = parse_known_args(self, *args, **kwargs)
        if inside:
            return result
        raise Parsed(result[0])

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parsed)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", known)


def run_python(words: list[str], monkeypatch) -> argparse.Namespace:
    """``python -m module args`` or ``python file.py args``, stopped once it has parsed its flags."""
    monkeypatch.chdir(REPO)
    if words[0] == "-m":
        target, args = words[1], words[2:]
        monkeypatch.setattr(sys, "argv", [target, *args])
        run = lambda: runpy.run_module(target, run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        target, args = words[0], words[1:]
        monkeypatch.setattr(sys, "argv", [target, *args])
        run = lambda: runpy.run_path(str(REPO / target), run_name="__main__")  # noqa: E731
    with pytest.raises(Parsed) as parsed:
        run()
    return parsed.value.namespace


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), flags=re.M))


@pytest.mark.parametrize("command", COMMANDS)
def test_a_readme_command_works_as_written(command, stop_after_parsing, monkeypatch):
    words = shlex.split(command)
    if words[0] == "make":
        assert words[1] in makefile_targets()
        for setting in words[2:]:
            name, _, value = setting.partition("=")
            if name == "RUN_ARGS":
                import local_runner

                local_runner.config_from_args(run_python(["local_runner.py", *shlex.split(value)], monkeypatch))
        return
    if words[0] in EXTERNAL_TOOLS:
        local_files = [w for w in words[1:] if not w.startswith(("-", "gs://", "_")) and "/" in w]
        assert all((REPO / w).exists() for w in local_files)
        return
    assert words[0] in (".venv/bin/python", "python")
    if "--help" in words:
        with pytest.raises(SystemExit) as exited:
            run_python(words[1:], monkeypatch)
        assert exited.value.code == 0
        return
    namespace = run_python(words[1:], monkeypatch)
    if words[1] == "local_runner.py":
        import local_runner

        local_runner.config_from_args(namespace)
    elif words[1] == "kubeflow_runner.py":
        import kubeflow_runner

        kubeflow_runner.validate(namespace)
        kubeflow_runner.config_from_args(namespace)
