"""Each column of a CSV summarised in one streaming pass, for the scaffold's rules.

The CSV is read as CsvExampleGen reads it (``components.csv_encoding``), a block at a time,
each block folded into a ``ColumnProfile``: rows, present cells, distinct values, each
value's rows up to ``COUNTED_VALUES`` values, a number's range, mean and spread, its median
(exact up to ``SAMPLE_ROWS`` values, then a seeded sample's), and for text the cells each
date format of ``DATE_FORMATS`` reads. Memory stays flat in the file's size (docs/problems.md,
"A new problem from a CSV").
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Collection, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from components import csv_encoding
from models.problem import date_pattern

COUNTED_VALUES = 1001
SAMPLE_ROWS = 100_000
SEED = 0
# A number as Python's float() reads it, in the plain notations; cells that do not match
# but could still be one (digits, inf, nan) are judged by float() itself.
_PLAIN_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_MAYBE_NUMBER = r"[0-9]|[iI][nN][fF]|[nN][aA][nN]"
_NUMERIC_TYPES = ("INT", "FLOAT")
# The date formats a text column is tried against (``models.problem.date_pattern``: a month
# 1-12 and a day 1-31, so that a day past 12 tells %d/%m/%Y from %m/%d/%Y): ISO 8601's date,
# with a time after a space or a 'T' (and UTC's 'Z'), and a spreadsheet's with slashes.
_TIMES = ("", " %H:%M", " %H:%M:%S")
DATE_FORMATS = (
    *(f"%Y-%m-%d{time}" for time in _TIMES + ("T%H:%M", "T%H:%M:%S", "T%H:%M:%SZ")),
    *(f"{date}{time}" for date in ("%Y/%m/%d", "%m/%d/%Y", "%d/%m/%Y") for time in _TIMES),
)
_DATE_PATTERNS = {form: f"^{date_pattern(form)}$" for form in DATE_FORMATS}
# A loose first look: a cell with no two separators between digits is no date of DATE_FORMATS.
_LOOKS_LIKE_A_DATE = r"^[0-9]{1,4}[-/][0-9]{1,2}[-/][0-9]{1,4}"


def is_number(text: str) -> bool:
    """Whether CsvExampleGen's parser reads the cell as a number (Python's float on its bytes)."""
    try:
        float(text.encode())
    except ValueError:
        return False
    return True


def numbers(cells: pa.Array) -> np.ndarray:
    """Present text cells of a number column as float64, parsed as CsvExampleGen parses them."""
    return csv_encoding.parse_numbers(cells).to_numpy(zero_copy_only=False)


class _Distinct:
    """The number of distinct values, from 64-bit hashes, compacted as they accumulate."""

    def __init__(self, hashes: np.ndarray) -> None:
        self._unique = np.unique(hashes)
        self._pending: list[np.ndarray] = []
        self._pending_size = 0
        self.added = len(hashes)

    def add(self, hashes: np.ndarray) -> None:
        self._pending.append(hashes)
        self._pending_size += len(hashes)
        self.added += len(hashes)
        if self._pending_size > max(1 << 18, len(self._unique)):
            self._compact()

    def _compact(self) -> None:
        if self._pending:
            self._unique = np.unique(np.concatenate([self._unique, *self._pending]))
            self._pending, self._pending_size = [], 0

    @property
    def repeated(self) -> bool:
        """Whether a value came twice, as far as the last compaction knows (no sort here)."""
        return not self._pending and len(self._unique) < self.added

    def __len__(self) -> int:
        self._compact()
        return len(self._unique)


def _text_hashes(values: list[str]) -> np.ndarray:
    return np.fromiter(map(hash, values), np.int64, count=len(values))


def _number_hashes(values: np.ndarray) -> np.ndarray:
    return (values + 0.0).view(np.int64)  # + 0.0: -0.0 and 0.0 are one number


@dataclasses.dataclass
class ColumnProfile:
    """One column's figures, folded in a block at a time (``add``); ``type`` as CsvExampleGen
    reads it. Each value's rows are counted up to ``COUNTED_VALUES`` distinct values; past
    that, only how many distinct values there are where a rule reads it (64-bit hashes: a
    collision among a million values has odds of about 1 in 30 million)."""

    name: str
    type: str
    rows: int = 0
    present: int = 0
    first: str | None = None
    # Text cell -> rows, in order of first appearance; None once more than COUNTED_VALUES.
    counts: dict[str, int] | None = dataclasses.field(default_factory=dict)
    # Numbers (INT and FLOAT columns).
    low: float = float("inf")
    high: float = float("-inf")
    integral: bool = True
    mean: float = 0.0
    _squares: float = 0.0  # sum of squared deviations from the mean
    # Text: cells that read as numbers, and the rows of each other cell (up to COUNTED_VALUES).
    numeric_cells: int = 0
    tokens: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    # Text: the cells each of DATE_FORMATS reads, while some format reads half the cells.
    date_cells: dict[str, int] | None = dataclasses.field(default_factory=lambda: dict.fromkeys(DATE_FORMATS, 0))
    # Count every distinct value however many (the label's count is shown).
    exact: bool = False
    _distinct: _Distinct | None = None
    _at_least: int = 0
    _keys: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    _sample: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))

    @property
    def numeric(self) -> bool:
        return self.type in _NUMERIC_TYPES

    @property
    def missing(self) -> float:
        """The share of rows without a value."""
        return 1 - self.present / self.rows if self.rows else 1.0

    @property
    def distinct(self) -> int:
        """Distinct cells: exact, but for a number column (not ``exact``) with more than
        COUNTED_VALUES of them, some repeated, where it is a lower bound."""
        if self.counts is not None:
            return len(self.counts)
        return len(self._distinct) if self._distinct is not None else self._at_least

    @property
    def std(self) -> float:
        """The population standard deviation (ddof 0) of the numbers."""
        return float(np.sqrt(self._squares / self.present)) if self.present else float("nan")

    @property
    def sampled(self) -> bool:
        """Whether ``median`` is a random sample's (more than SAMPLE_ROWS numbers)."""
        return self.numeric and self.present > SAMPLE_ROWS

    @property
    def median(self) -> float:
        """The numbers' median: exact up to SAMPLE_ROWS values, else a random sample's."""
        return float(np.median(self._sample)) if len(self._sample) else float("nan")

    def add(self, cells: pa.Array, keys: np.ndarray) -> None:
        """Folds a block's cells (text, null where empty) in; ``keys``: each row's random key."""
        self.rows += len(cells)
        present_mask = cells.is_valid()
        present = cells.filter(present_mask)
        if not len(present):
            return
        if self.first is None:
            self.first = present[0].as_py()
        self.present += len(present)
        counted = pc.value_counts(present)
        values, counts = counted.field("values"), counted.field("counts")
        found = self._numbers(present, keys[present_mask.to_numpy(zero_copy_only=False)]) if self.numeric else None
        self._count_values(values, counts, found)
        if self.type == "STRING":
            self._count_numbers_in_text(values, counts)
            self._count_dates(values, counts)

    def _count_values(self, values: pa.Array, counts: pa.Array, found: np.ndarray | None) -> None:
        if self.counts is not None:
            for value, count in zip(values.to_pylist(), counts.to_pylist(), strict=True):
                self.counts[value] = self.counts.get(value, 0) + count
            if len(self.counts) > COUNTED_VALUES:
                self._count_distinct_only()
            return
        if self._distinct is not None:
            self._distinct.add(_number_hashes(found) if self.numeric else _text_hashes(values.to_pylist()))
            if self._settled():
                self._at_least, self._distinct = len(self._distinct), None

    def _count_distinct_only(self) -> None:
        """Too many values to count each: from here on, only how many distinct there are."""
        seen, repeated = list(self.counts), max(self.counts.values()) > 1
        self.counts = None
        if self.numeric:
            self._distinct = _Distinct(_number_hashes(numbers(pa.array(seen, pa.string()))))
        else:
            self._distinct = _Distinct(_text_hashes(seen))
        if self._settled(repeated):
            self._at_least, self._distinct = len(seen), None

    def _settled(self, repeated: bool = False) -> bool:
        """Whether more distinct values can change no rule: past COUNTED_VALUES, rules tell
        numbers apart only by whether an integer column is unique in every row (an id)."""
        if not self.numeric or self.exact:
            return False
        return self.type == "FLOAT" or repeated or self._distinct.repeated

    def _numbers(self, present: pa.Array, keys: np.ndarray) -> np.ndarray:
        found = numbers(present)
        self.low = min(self.low, float(found.min()))
        self.high = max(self.high, float(found.max()))
        self.integral = self.integral and bool((found == np.round(found)).all())
        # Chan et al.'s merge of two (count, mean, squared deviations) summaries.
        count, before = len(found), self.present - len(found)
        mean = float(found.mean())
        squares = float(((found - mean) ** 2).sum())
        delta = mean - self.mean
        self._squares += squares + delta**2 * before * count / (before + count)
        self.mean += delta * count / (before + count)
        # The SAMPLE_ROWS values with the smallest keys: all of them while there are fewer.
        self._keys = np.concatenate([self._keys, keys])
        self._sample = np.concatenate([self._sample, found])
        if len(self._keys) > 2 * SAMPLE_ROWS:
            self._trim()
        return found

    def _trim(self) -> None:
        if len(self._keys) > SAMPLE_ROWS:
            kept = np.argpartition(self._keys, SAMPLE_ROWS)[:SAMPLE_ROWS]
            self._keys, self._sample = self._keys[kept], self._sample[kept]

    def _count_numbers_in_text(self, values: pa.Array, counts: pa.Array) -> None:
        plain = pc.match_substring_regex(values, _PLAIN_NUMBER)
        self.numeric_cells += pc.sum(pc.filter(counts, plain)).as_py() or 0
        others = pc.invert(plain)
        maybe = pc.match_substring_regex(values, _MAYBE_NUMBER).to_numpy(zero_copy_only=False)
        for value, count, check in zip(
            pc.filter(values, others).to_pylist(),
            pc.filter(counts, others).to_pylist(),
            maybe[~plain.to_numpy(zero_copy_only=False)],
            strict=True,
        ):
            if check and is_number(value):
                self.numeric_cells += count
            elif value in self.tokens or len(self.tokens) < COUNTED_VALUES:
                self.tokens[value] += count

    def _count_dates(self, values: pa.Array, counts: pa.Array) -> None:
        """Adds the block's cells each date format reads; stops once no format reads half
        the cells so far (the column is no date, and its text is not tried again)."""
        if self.date_cells is None:
            return
        looks = pc.match_substring_regex(values, _LOOKS_LIKE_A_DATE)
        values, counts = pc.filter(values, looks), pc.filter(counts, looks)
        for form, pattern in _DATE_PATTERNS.items():
            if len(values):
                read = pc.filter(counts, pc.match_substring_regex(values, pattern))
                self.date_cells[form] += pc.sum(read).as_py() or 0
        if max(self.date_cells.values()) * 2 < self.present:
            self.date_cells = None

    @property
    def dates(self) -> dict[str, int]:
        """The cells each date format reads, for the formats that read any, most first."""
        found = {form: cells for form, cells in (self.date_cells or {}).items() if cells}
        return dict(sorted(found.items(), key=lambda item: -item[1]))

    def finish(self) -> ColumnProfile:
        """Keeps the sample's SAMPLE_ROWS values, once the last block is in."""
        self._trim()
        return self


def profile(
    blocks: Iterator[pa.RecordBatch], types: Mapping[str, str], exact: Collection[str] = (), seed: int = SEED
) -> dict[str, ColumnProfile]:
    """Each column's profile, by feature name, from the CSV's blocks (text cells, null where
    empty, as ``csv_encoding.read_blocks`` yields them) and its types (INT, FLOAT, STRING or
    UNKNOWN, as CsvExampleGen infers them); ``exact``: columns whose distinct values are
    counted however many."""
    profiles = {name: ColumnProfile(name, kind, exact=name in exact) for name, kind in types.items()}
    random = np.random.default_rng(seed)
    for block in blocks:
        keys = random.random(block.num_rows)
        for name, column in profiles.items():
            column.add(block.column(name), keys)
    return {name: column.finish() for name, column in profiles.items()}
