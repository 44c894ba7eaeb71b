"""Spans under a data root and the rolling window of the newest ones: the spans before the
one TFX's driver resolved, found with TFX's own matching and read by the same ExampleGen
execution, with no resolver (docs/spans.md, "Spans and the rolling window").
"""

from __future__ import annotations

import dataclasses
import os
import re

# TFX is imported where spans are listed, not here: the pipeline's configuration asks
# ``has_spans`` of every command line, some of which never load TFX or TensorFlow.
_SPAN_SPEC = re.compile(r"\{SPAN(:[^}]*)?\}|\{YYYY\}|\{MM\}|\{DD\}")


@dataclasses.dataclass(frozen=True)
class Span:
    """One span: its number (days since 1970-01-01 for date patterns), newest version, files."""

    number: int
    version: int | None
    paths: tuple[str, ...]
    # Its files' pattern under the input base, as TFX's driver fills in the span.
    pattern: str = ""


def has_spans(pattern: str) -> bool:
    """True when ``pattern`` names spans (``{SPAN}`` or ``{YYYY}{MM}{DD}``)."""
    return bool(_SPAN_SPEC.search(pattern))


def any_span(pattern: str) -> str:
    """``pattern`` as a plain glob matching every span's files (itself without span specs)."""
    return re.sub(r"\{VERSION(:[^}]*)?\}", "*", _SPAN_SPEC.sub("*", pattern))


def list_spans(input_base: str, pattern: str) -> list[Span]:
    """Every span matching ``pattern`` under ``input_base``, oldest first, each at its
    newest version (as TFX's driver picks a span's version)."""
    from tfx.components.example_gen import utils as example_gen_utils
    from tfx.dsl.io import fileio
    from tfx.proto import example_gen_pb2

    from runtime import speedups

    speedups.check(speedups.by_name("rolling-window-spans"))
    split = example_gen_pb2.Input.Split(name="any", pattern=pattern)
    is_span, is_date, is_version = example_gen_utils.verify_split_pattern_specs(split)
    if not (is_span or is_date):
        raise ValueError(f"{pattern} has no {{SPAN}} or {{YYYY}}{{MM}}{{DD}} spec: it names no spans")
    # TFX's own glob and regex for the pattern (private in TFX 1.16; the driver uses them;
    # checked with runtime/speedups' "rolling-window-spans").
    glob, regex = example_gen_utils._create_matching_glob_and_regex(  # noqa: SLF001
        input_base, split, is_span, is_date, is_version, None
    )
    versions: dict[int, int | None] = {}
    for path in fileio.glob(glob):
        _, number, _, version = example_gen_utils._find_matched_span_version_from_path(  # noqa: SLF001
            path, regex, is_span, is_date, is_version
        )
        known = versions.get(number)
        versions[number] = version if known is None or (version or 0) > known else known
    spans = []
    for number in sorted(versions):
        concrete = example_gen_utils.get_pattern_for_span_version(
            pattern, is_span, is_date, is_version, number, versions[number]
        )
        paths = tuple(sorted(fileio.glob(os.path.join(input_base, concrete))))
        spans.append(Span(number, versions[number], paths, concrete))
    return spans


def window(spans: list[Span], newest: int, size: int) -> list[Span]:
    """The ``size`` newest spans up to and including span ``newest``, oldest first. Gaps
    are skipped (a week of daily spans with a holiday is still ``size`` spans of data)."""
    if size < 1:
        raise ValueError(f"A window holds at least 1 span, got {size}")
    upto = [span for span in spans if span.number <= newest]
    if not upto or upto[-1].number != newest:
        raise ValueError(f"Span {newest} is not among the spans found ({[s.number for s in spans]})")
    return upto[-size:]


def describe(spans: list[Span]) -> str:
    """``"5"`` or ``"2-5"`` (``"2, 4-5"`` with gaps): the window as the history shows it."""
    numbers = [span.number for span in spans]
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
