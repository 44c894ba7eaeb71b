"""What the code and the docs point a reader to exists: every docs/<name>.md named anywhere,
the section a reference names in quotes after it ("docs/spans.md, 'Measured'"), and every
relative markdown link with its anchor."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TEXT_FILES = (".py", ".md", ".toml", ".yaml", ".pbtxt", ".txt", "Makefile", "Dockerfile", "run")
DOC = re.compile(r"docs/([a-z0-9-]+\.md)")
# A section named in quotes after the doc: docs/<name>.md, "Section" (or ("Section"), or 'Section')
SECTION = re.compile(r"docs/([a-z0-9-]+\.md)(?:,\s*|\s*\(|\s+)[\"'“]([A-Z][^\"'”\n]{2,80})[\"'”]")
LINK = re.compile(r"\]\(([^)\s]+\.md)(#[^)\s]*)?\)")


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / name for name in listed.split() if name.endswith(TEXT_FILES) and (REPO / name).is_file()]


def headings(doc: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in doc.read_text().splitlines() if line.startswith("#")]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


FILES = tracked_files()


def test_the_check_reads_the_code_and_the_docs():
    names = {path.relative_to(REPO).as_posix() for path in FILES}
    assert {"README.md", "pipeline/pipeline.py", "docs/pipeline.md"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_doc_a_file_names_exists_with_the_section_it_names(path):
    text = path.read_text()
    missing = sorted({name for name in DOC.findall(text) if not (REPO / "docs" / name).is_file()})
    assert not missing
    wrong = [
        (name, section)
        for name, section in SECTION.findall(text)
        if not any(section.lower() in h.lower() for h in headings(REPO / "docs" / name))
    ]
    assert not wrong


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix == ".md"], ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_markdown_link_resolves(path):
    broken = []
    for target, fragment in LINK.findall(path.read_text()):
        if "://" in target:
            continue
        doc = (path.parent / target).resolve()
        if not doc.is_file():
            broken.append(target)
        elif fragment and fragment[1:] not in {anchor(h) for h in headings(doc)}:
            broken.append(target + fragment)
    assert not broken
