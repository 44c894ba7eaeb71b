"""Spans under a data root, found as TFX's ExampleGen driver finds them, and the window."""

from __future__ import annotations

from pathlib import Path

import pytest
from tfx.components.example_gen import input_processor
from tfx.components.example_gen import utils as example_gen_utils
from tfx.proto import example_gen_pb2

from components import spans


def _touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("a,b\n1,2\n")


def _tfx_newest(root: Path, pattern: str) -> int:
    """The span TFX's driver would ingest (its input processor, as the driver calls it)."""
    split = example_gen_pb2.Input.Split(name="single_split", pattern=pattern)
    return input_processor.FileBasedInputProcessor(str(root), [split], None).resolve_span_and_version()[0]


@pytest.mark.parametrize(
    "pattern, names",
    [
        ("span-{SPAN}/*.csv", ["span-1/a.csv", "span-2/a.csv", "span-2/b.csv", "span-10/a.csv"]),
        ("span-{SPAN:3}/*.csv", ["span-001/a.csv", "span-002/a.csv", "span-010/a.csv"]),
        ("{YYYY}-{MM}-{DD}/*.csv", ["2016-01-01/a.csv", "2016-01-02/a.csv", "2016-01-11/a.csv"]),
    ],
)
def test_spans_are_found_as_tfx_finds_the_newest(tmp_path, pattern, names):
    _touch(tmp_path, *names)
    found = spans.list_spans(str(tmp_path), pattern)
    assert found[-1].number == _tfx_newest(tmp_path, pattern)
    assert [len(span.paths) for span in found] == [
        sum(1 for n in names if n.split("/")[0] == names_dir)
        for names_dir in dict.fromkeys(n.split("/")[0] for n in names)
    ]
    assert [span.number for span in found] == sorted(span.number for span in found)


def test_a_date_span_is_days_since_1970(tmp_path):
    _touch(tmp_path, "2016-01-02/a.csv")
    assert spans.list_spans(str(tmp_path), "{YYYY}-{MM}-{DD}/*.csv")[0].number == example_gen_utils.date_to_span_number(
        2016, 1, 2
    )


def test_each_span_is_read_at_its_newest_version(tmp_path):
    _touch(tmp_path, "span-1/v-1/a.csv", "span-1/v-2/a.csv", "span-2/v-1/a.csv")
    found = spans.list_spans(str(tmp_path), "span-{SPAN}/v-{VERSION}/*.csv")
    assert [(s.number, s.version) for s in found] == [(1, 2), (2, 1)]
    assert found[0].paths == (str(tmp_path / "span-1" / "v-2" / "a.csv"),)


def test_the_window_is_the_newest_spans_up_to_the_given_one_gaps_skipped(tmp_path):
    _touch(tmp_path, *(f"span-{n}/a.csv" for n in (1, 2, 4, 5, 7)))
    found = spans.list_spans(str(tmp_path), "span-{SPAN}/*.csv")
    assert [s.number for s in spans.window(found, 5, 3)] == [2, 4, 5]
    assert [s.number for s in spans.window(found, 7, 10)] == [1, 2, 4, 5, 7]
    assert [s.number for s in spans.window(found, 2, 1)] == [2]
    with pytest.raises(ValueError, match="Span 3 is not among"):
        spans.window(found, 3, 2)
    with pytest.raises(ValueError, match="at least 1"):
        spans.window(found, 5, 0)


def test_describe_names_runs_of_spans():
    assert spans.describe([spans.Span(n, None, ()) for n in (2, 3, 4, 5)]) == "2-5"
    assert spans.describe([spans.Span(n, None, ()) for n in (2, 4, 5)]) == "2, 4-5"
    assert spans.describe([spans.Span(7, None, ())]) == "7"


def test_a_pattern_without_spans_is_refused_where_spans_are_needed(tmp_path):
    assert not spans.has_spans("*.csv")
    assert spans.has_spans("span-{SPAN}/*.csv") and spans.has_spans("{YYYY}{MM}{DD}.csv")
    with pytest.raises(ValueError, match="names no spans"):
        spans.list_spans(str(tmp_path), "*.csv")


def test_any_span_is_a_plain_glob_over_every_span():
    assert spans.any_span("span-{SPAN:2}/v-{VERSION}/*.csv") == "span-*/v-*/*.csv"
    assert spans.any_span("{YYYY}{MM}{DD}.csv") == "***.csv"
    assert spans.any_span("*.csv") == "*.csv"
