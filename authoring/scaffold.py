"""Drafts a new problem from a CSV file and its label column: one command to a first run.

    python -m authoring.scaffold --csv FILE --label COLUMN [--task binary|multiclass|regression]
                                [--name NAME] [--output DIR] [--force] [--choose-model]

It writes a problem folder (``data/<name>`` by default): a copy of the CSV, a ``problem.toml``
(the spec, ``models/problem.py``) and a draft data contract (``authoring/contract.py``), so
that ``python local_runner.py --problem data/<name>`` runs as it is; then it prints each
decision with its reason for a person to review (docs/problems.md, "A new problem from a CSV").
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import importlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import textwrap
import threading
from collections.abc import Sequence

from authoring import csv_profile
from models import budget as budget_lib
from models import problem as problem_lib
from models.hparams import HParams
from models.problem import CONTRACT_FILE, PROBLEM_FILE, ModelFamily, Task, transformed_name
from pipeline.config import DEFAULT_OUTPUT_ROOT, PIPELINE_NAME_PATTERN, REPO_ROOT, PipelineConfig
from runtime.terminal import Terminal, add_verbose_flag, command_log, say

# Task inference (AutoGluon's constants).
MAX_CLASSES = 1000
LARGE_DATA_ROWS = 1000
CLASS_SHARE_SMALL_DATA = 0.1
CLASS_SHARE_LARGE_DATA = 0.05
MIN_CLASS_ROWS = 10
POSITIVE_WORDS = frozenset({"yes", "y", "true", "t", "1", "positive", "pos"})
# Column treatment.
MOSTLY_EMPTY = 0.95
FEW_INTEGER_VALUES = 20
HEAVY_TAIL_RATIO = 10.0
FREE_TEXT_SHARE = 0.5
# A text column one date format reads in at least this share of its cells is a date (the rest
# are bad cells, missing to the model).
DATE_SHARE = 0.95
# Text with more distinct values than this: a value needs VOCAB_MIN_COUNT rows of the training
# split for a weight of its own (the spec's vocab_min_count), and a column most of whose rows
# have rarer values is left out (fewer values: each its weight, however small the data). Measured on
# bench.datasets' credit-probe: its notes of no signal cost the network 0.013 AUC with every
# value a weight, 0.003 from 10 rows, 0.001 from 25 (left out: 0).
FEW_TEXT_VALUES = 20
VOCAB_MIN_COUNT = 25
RARE_ROWS_SHARE = 0.5
# A text column whose values are numbers but for a few: probably numbers with a token for "no value".
NUMBERS_BUT_FOR_A_FEW = 0.9
# Blessing.
AUC_FLOOR = 0.6
ACCURACY_MARGIN = 0.05
MAX_REGRESSION = {"auc": 0.01, "accuracy": 0.02}
RMSE_MAX_REGRESSION_SHARE = 0.02
# The share of the rows CsvExampleGen puts in the eval split (the pipeline's default buckets).
_BUCKETS = {f.name: f.default for f in dataclasses.fields(PipelineConfig) if f.name.endswith("_buckets")}
EVAL_SHARE = _BUCKETS["eval_buckets"] / (_BUCKETS["train_buckets"] + _BUCKETS["eval_buckets"])
# Slices.
MAX_SLICES = 2
SLICE_VALUES = (2, 20)


class ScaffoldError(ValueError):
    """The CSV or the arguments cannot make a problem; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class Column:
    """One CSV column and what the spec does with it."""

    name: str
    kind: str  # log_numeric, numeric, categorical, date, unused or label
    reason: str
    type: str  # INT, FLOAT, STRING or UNKNOWN, as CsvExampleGen reads it
    distinct: int
    missing: float
    header: str = ""  # the CSV header's name, where it is not ``name``
    date_format: str = ""  # a date's format (features.dates)
    min_count: int = 0  # a categorical column's vocab_min_count (0: every value has a weight)

    @property
    def shown(self) -> str:
        """The column as a person knows it, and its feature name where that differs."""
        return f"{self.header} ({self.name})" if self.header else self.name


@dataclasses.dataclass
class Plan:
    """Everything the scaffold decided, with its reasons (what ``main`` prints)."""

    name: str
    csv: str
    rows: int
    task: Task
    task_reason: str
    label: dict
    label_reason: str
    columns: list[Column]
    metric: str
    threshold: float
    threshold_reason: str
    max_regression: float
    max_regression_reason: str
    slices: list[str]
    budget: budget_lib.Budget
    notes: list[str] = dataclasses.field(default_factory=list)

    def of_kind(self, kind: str) -> list[Column]:
        return [c for c in self.columns if c.kind == kind]

    @property
    def renamed(self) -> dict[str, str]:
        """Header names by feature name, for the columns whose header is no feature name."""
        return {c.name: c.header for c in self.columns if c.header}


# ---------------------------------------------------------------- reading


def derive_name(csv_path: str) -> str:
    """A problem name from a file name: lower case, dashes for anything else ("Breast
    Cancer.csv" -> "breast-cancer"), as Vertex AI accepts pipeline names."""
    stem = os.path.splitext(os.path.basename(csv_path))[0].lower()
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", stem)).strip("-")[:128].rstrip("-")
    return name or "problem"


def read_csv(csv_path: str, label: str) -> tuple[dict[str, csv_profile.ColumnProfile], dict[str, str], str]:
    """The CSV as CsvExampleGen reads it, each column summarised in one streaming pass
    (``authoring.csv_profile``: its cells, types as ``components.csv_encoding`` infers them;
    the ``label`` column's distinct values all counted), by feature name; the header
    names by feature name (``models.problem.feature_names``) where they differ; and the
    label's feature name (``label`` may name its header)."""
    from components import csv_encoding

    names = csv_encoding.column_names(csv_path)
    if duplicates := sorted({n for n in names if names.count(n) > 1}):
        raise ScaffoldError(f"{csv_path}: column(s) {', '.join(duplicates)} appear twice in the header: rename one.")
    headers = {feature: header for header, feature in problem_lib.feature_names(names).items() if feature != header}
    types = {name: t.name for name, t in csv_encoding.infer_column_types([csv_path], headers).items()}
    label = {header: feature for feature, header in headers.items()}.get(label, label)
    profiles = csv_profile.profile(csv_encoding.read_blocks(csv_path, headers=headers), types, exact=(label,))
    if not next(iter(profiles.values())).rows:
        raise ScaffoldError(f"{csv_path} has a header but no rows.")
    return profiles, headers, label


def _share(count: int, rows: int) -> str:
    return f"{count} of {rows} rows"


# ---------------------------------------------------------------- the label


def infer_task(label: csv_profile.ColumnProfile) -> tuple[Task, str]:
    """The task for a label (every row has a value), after AutoGluon's rule."""
    distinct, rows = label.distinct, label.rows
    if distinct == 2:
        return Task.BINARY, "the label has 2 distinct values"
    if label.type == "STRING":
        return Task.MULTICLASS, f"the label is text with {distinct} distinct values"
    limit = CLASS_SHARE_SMALL_DATA if rows <= LARGE_DATA_ROWS else CLASS_SHARE_LARGE_DATA
    few = distinct <= MAX_CLASSES and distinct <= limit * rows
    rule = f"at most {limit:.0%} of the {rows} rows and at most {MAX_CLASSES}: AutoGluon's rule"
    if label.integral and few:
        return Task.MULTICLASS, f"the label is integers with few distinct values ({distinct}; {rule})"
    if not label.integral:
        return Task.REGRESSION, f"the label is numbers with fractions ({distinct} distinct values)"
    return Task.REGRESSION, f"the label is integers with many distinct values ({distinct}; classes need {rule})"


def _reads_positive(value: str, values: Sequence[str], numeric: bool) -> bool:
    if numeric:
        return float(value) == 1 and {float(v) for v in values} == {0.0, 1.0}
    return value.strip().lower() in POSITIVE_WORDS


def choose_positive(label: csv_profile.ColumnProfile) -> tuple[str, str]:
    """The positive value of a 2-valued label, and why."""
    counts = label.counts
    distinct = sorted(counts)
    numeric = label.type != "STRING"
    positive = [v for v in distinct if _reads_positive(v, distinct, numeric)]
    if len(positive) == 1:
        return positive[0], f"{positive[0]!r} reads as positive ({_share(counts[positive[0]], label.present)})"
    # The less frequent value; on a tie the later one in sorted order.
    rarest = min(reversed(distinct), key=lambda v: counts[v])
    return rarest, (
        f"no single value reads as positive (yes/true/1/...): the less frequent one, "
        f"{_share(counts[rarest], label.present)}"
    )


def _class_counts(label: csv_profile.ColumnProfile) -> dict[str, int]:
    """Rows per class name as ``preprocessing_fn`` reads the label: text as it is, numbers
    as integers (refused with fractions), most rows first."""
    if label.type == "STRING":
        counts = dict(label.counts)
    else:
        if not label.integral:
            raise ScaffoldError(
                "a multi-class label of numbers needs whole numbers (class codes); this one has fractions: "
                "use --task regression, or encode the classes as integers or text."
            )
        counts = {}
        for value, count in label.counts.items():
            key = str(int(float(value.encode())))
            counts[key] = counts.get(key, 0) + count
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def _too_rare(label: str, counts: dict[str, int], advice: str) -> None:
    """Refuses classes with fewer than ``MIN_CLASS_ROWS`` rows."""
    if rare := [c for c in sorted(counts) if counts[c] < MIN_CLASS_ROWS]:
        listed = ", ".join(f"{c!r} ({counts[c]} rows)" for c in rare[:10])
        raise ScaffoldError(
            f"the label '{label}' has class(es) with fewer than {MIN_CLASS_ROWS} rows: {listed}"
            f"{' and more' if len(rare) > 10 else ''}. Too few to learn or judge (the eval split holds a third of "
            f"them): {advice}"
        )


def plan_label(
    profiles: dict[str, csv_profile.ColumnProfile], label: str, task: Task | None, headers: dict[str, str] | None = None
) -> tuple[Task, str, dict, str]:
    """The task and its reason, the spec's [label] table and the label's description
    (``headers``: the header names by feature name, for messages)."""
    headers = headers or {}
    cells = _label_cells(profiles, label, headers)
    named = headers.get(label, label)
    if task is None:
        task, task_reason = infer_task(cells)
    else:
        task_reason = "given (--task)"
    spec: dict = {"column": label}
    if task == Task.BINARY:
        spec["positive"], description = _binary_label(named, cells)
    elif task == Task.MULTICLASS:
        spec["classes"], description = _multiclass_label(named, cells)
    else:
        description = _regression_label(named, cells)
    return task, task_reason, spec, description


def _label_cells(
    profiles: dict[str, csv_profile.ColumnProfile], label: str, headers: dict[str, str]
) -> csv_profile.ColumnProfile:
    """The label column's profile; refused when it is no column, has empty cells or one value."""
    if label not in profiles:
        raise ScaffoldError(
            f"--label {label!r} is not a column of the CSV; its columns: "
            + ", ".join(headers.get(c, c) for c in profiles)
        )
    named = headers.get(label, label)
    cells = profiles[label]
    if empty := cells.rows - cells.present:
        raise ScaffoldError(
            f"the label '{named}' is empty in {_share(empty, cells.rows)}: a row without a label teaches nothing "
            "(and counts as 0 or 'no class' in the pipeline). Remove those rows from the CSV and scaffold again."
        )
    if cells.distinct < 2:
        raise ScaffoldError(f"the label '{named}' has one value only ({cells.first!r}): there is nothing to learn.")
    return cells


def _binary_label(named: str, cells: csv_profile.ColumnProfile) -> tuple[str, str]:
    """A binary label's positive class and its description."""
    if cells.distinct != 2:
        raise ScaffoldError(
            f"the label '{named}' has {cells.distinct} distinct values; a binary label has 2. Use --task multiclass "
            "(or regression for a quantity), or reduce the column to two values."
        )
    _too_rare(named, cells.counts, "collect more rows of it.")
    positive, reason = choose_positive(cells)
    return positive, f"positive class {positive!r}: {reason}"


def _multiclass_label(named: str, cells: csv_profile.ColumnProfile) -> tuple[list[str], str]:
    """A multi-class label's classes (sorted as text) and its description."""
    if cells.distinct == 2:
        raise ScaffoldError(f"the label '{named}' has 2 distinct values: use --task binary.")
    if cells.distinct > MAX_CLASSES:
        raise ScaffoldError(
            f"the label '{named}' has {cells.distinct} distinct values, more than the {MAX_CLASSES} classes a "
            "classifier here takes: if it is a quantity use --task regression, else group the values."
        )
    counts = _class_counts(cells)
    classes = sorted(counts)
    _too_rare(
        named,
        counts,
        "remove those rows or merge them into another class (say 'other'); if the label is a quantity, use "
        "--task regression.",
    )
    majority = next(iter(counts))
    return classes, (
        f"{len(classes)} classes, sorted as text; the commonest is {majority!r} "
        f"({_share(counts[majority], cells.rows)})"
    )


def _regression_label(named: str, cells: csv_profile.ColumnProfile) -> str:
    """A regression label's description; refused when it holds text."""
    if cells.type == "STRING":
        texts = list(cells.tokens)[:3]
        raise ScaffoldError(
            f"the label '{named}' holds text (such as {', '.join(repr(v) for v in texts)}): regression needs "
            "numbers. Fix those cells, or use --task binary or multiclass for a label of categories."
        )
    return f"numbers from {cells.low:g} to {cells.high:g}, mean {cells.mean:g}"


# ---------------------------------------------------------------- the columns


@dataclasses.dataclass(frozen=True)
class Treatment:
    """What the spec does with one column: its kind, the reason, its number of distinct
    values, and a date's format or a vocabulary's fewest rows per value where they apply."""

    kind: str
    reason: str
    distinct: int
    date_format: str = ""
    min_count: int = 0


def column_treatment(cells: csv_profile.ColumnProfile) -> Treatment:
    """What the spec does with one (non-label) column."""
    rows, distinct, missing, column_type = cells.rows, cells.distinct, cells.missing, cells.type
    if column_type == "UNKNOWN" or missing > MOSTLY_EMPTY:
        empty = f"empty in {missing:.0%} of the rows (more than {MOSTLY_EMPTY:.0%}): no signal"
        return Treatment("unused", empty, distinct)
    if distinct == 1:
        return Treatment("unused", f"constant: {cells.first!r} in every row that has a value", distinct)
    if column_type == "STRING" and (date := _date_treatment(cells)):
        return date
    if column_type in ("STRING", "INT") and distinct == rows:
        return Treatment("unused", "unique in every row: an identifier, nothing a model can generalize from", distinct)
    if column_type == "STRING":
        return _text_treatment(cells)
    return Treatment(*_number_treatment(cells), distinct)


def _date_treatment(cells: csv_profile.ColumnProfile) -> Treatment | None:
    """A text column that one date format reads (``DATE_SHARE`` of its cells): a date, or,
    where two formats read it alike (day and month both up to 12), left out with the fix."""
    found = cells.dates
    if not found or next(iter(found.values())) < DATE_SHARE * cells.present:
        return None
    best, read = next(iter(found.items()))
    if tied := [form for form, count in found.items() if count == read][1:]:
        forms = " or ".join(repr(f) for f in (best, *tied))
        return Treatment(
            "unused",
            f"dates, but {forms} read every one alike (no day past 12 tells day from month): say which under "
            f"[features.dates], e.g. {cells.name} = {best!r}, and delete this line",
            cells.distinct,
        )
    bad = cells.present - read
    parts = ", ".join(problem_lib.parts_of(best))
    return Treatment(
        "date",
        f"dates ({best}, {cells.distinct} distinct values such as {cells.first!r}): {parts}, each z-scored"
        + (f"; {bad} cell(s) are no such date and count as missing" if bad else ""),
        cells.distinct,
        date_format=best,
    )


def _text_treatment(cells: csv_profile.ColumnProfile) -> Treatment:
    """A text column: categories; past ``FEW_TEXT_VALUES`` values, a weight for each value
    seen ``VOCAB_MIN_COUNT`` times in the training split (the rarer ones share one), and left
    out when most rows' values are rarer than that; left out too when most rows have a value
    of their own (free text, an id)."""
    present, distinct = cells.present, cells.distinct
    if distinct > FREE_TEXT_SHARE * present:
        return Treatment(
            "unused",
            f"text with {distinct} distinct values in {present} rows (more than half): free text or an id, "
            "which a vocabulary cannot generalize from",
            distinct,
        )
    if distinct <= FEW_TEXT_VALUES:
        return Treatment("categorical", f"text with {distinct} distinct values", distinct)
    # The rows a value needs in the whole CSV to have about VOCAB_MIN_COUNT in the train split.
    least = math.ceil(VOCAB_MIN_COUNT / (1 - EVAL_SHARE))
    counted = cells.counts if cells.counts is not None else cells.tokens
    common = [count for count in counted.values() if count >= least]
    rare_rows = present - sum(common)
    if rare_rows > RARE_ROWS_SHARE * present:
        return Treatment(
            "unused",
            f"text with {distinct} distinct values, most rows' ({rare_rows} of {present}) seen fewer than {least} "
            "times: too rare to learn a weight each (free text or an id); left out",
            distinct,
        )
    if rare_rows:
        return Treatment(
            "categorical",
            f"text with {distinct} distinct values: the {len(common)} seen at least {VOCAB_MIN_COUNT} times in the "
            f"training split have a weight each, the rarer ones ({rare_rows} rows) share one",
            distinct,
            min_count=VOCAB_MIN_COUNT,
        )
    return Treatment("categorical", f"text with {distinct} distinct values", distinct)


def _number_treatment(cells: csv_profile.ColumnProfile) -> tuple[str, str]:
    """A number column's kind and reason: levels, a heavy tail, or a plain number."""
    distinct, column_type = cells.distinct, cells.type
    if column_type == "INT" and distinct <= FEW_INTEGER_VALUES:
        return "categorical", f"integers with {distinct} distinct values (codes or levels)"
    low, high, median = cells.low, cells.high, cells.median
    if low >= 0 and high > HEAVY_TAIL_RATIO * median:
        of = f"the median of {csv_profile.SAMPLE_ROWS:,} random rows" if cells.sampled else "the median"
        return (
            "log_numeric",
            f"never negative and heavy-tailed (max {high:g} > {HEAVY_TAIL_RATIO:g}x {of} {median:g}): log1p, "
            "then z-score",
        )
    return "numeric", f"numbers from {low:g} to {high:g}: z-score"


def _text_that_is_numbers(name: str, cells: csv_profile.ColumnProfile) -> str | None:
    """A note for a text column whose values are numbers but for a few tokens ("NA", "?")."""
    if cells.present and 1 > cells.numeric_cells / cells.present >= NUMBERS_BUT_FOR_A_FEW:
        shown = ", ".join(f"{t!r} ({n} rows)" for t, n in cells.tokens.most_common(3))
        return (
            f"'{name}' is read as text because of {shown}; the rest are numbers. If those mean 'no value', empty "
            "those cells and scaffold again to treat it as a number."
        )
    return None


# ---------------------------------------------------------------- the blessing


def _round_up(value: float, digits: int = 3) -> float:
    if value <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return round(math.ceil(value / scale - 1e-9) * scale, 12)


def _accuracy_noise(rows: int) -> tuple[float, str]:
    """``max_regression`` for accuracy: 0.02, or two rows of the eval split when that is more
    (a retrained model getting one or two more eval rows wrong is noise on small data)."""
    eval_rows = rows * EVAL_SHARE
    two_rows = _round_up(2 / eval_rows, 2) if eval_rows else 1.0
    if two_rows <= MAX_REGRESSION["accuracy"]:
        return MAX_REGRESSION["accuracy"], "run-to-run noise of retraining on the same data"
    return two_rows, f"two rows of an eval split of about {eval_rows:.0f}: run-to-run noise of retraining on small data"


def plan_blessing(task: Task, label: csv_profile.ColumnProfile) -> tuple[str, float, str, float, str]:
    """The blessing metric, its threshold and how it was computed, ``max_regression`` and why."""
    metric = problem_lib.DEFAULT_METRIC[task]
    if task == Task.BINARY:
        return (
            metric,
            AUC_FLOOR,
            f"a floor of {AUC_FLOOR:g}: always answering one class (or guessing) scores 0.5; raise it once you "
            "know what a good model scores here",
            MAX_REGRESSION[metric],
            "run-to-run noise of retraining on the same data",
        )
    if task == Task.MULTICLASS:
        counts = _class_counts(label)
        commonest = next(iter(counts))
        majority = counts[commonest] / label.rows
        threshold = math.floor(min(majority + ACCURACY_MARGIN, majority + (1 - majority) / 2) * 1000) / 1000
        return (
            metric,
            threshold,
            f"always answering the commonest class ({commonest!r}) scores {majority:.3f}; the floor is that "
            f"+ {ACCURACY_MARGIN:g} (at most halfway to 1)",
            *_accuracy_noise(label.rows),
        )
    deviation = label.std
    return (
        metric,
        _round_up(deviation),
        f"a ceiling of the label's standard deviation ({deviation:.4g}, rounded up): what always answering the mean "
        "scores",
        _round_up(RMSE_MAX_REGRESSION_SHARE * deviation),
        f"{RMSE_MAX_REGRESSION_SHARE:.0%} of the label's standard deviation, for run-to-run noise",
    )


# ---------------------------------------------------------------- the plan


def plan(csv_path: str, label: str, task: Task | str | None = None, name: str | None = None) -> Plan:
    """Every decision for a problem from ``csv_path`` with ``label`` as its label (nothing
    is written); raises ``ScaffoldError`` naming what to fix."""
    name = name or derive_name(csv_path)
    if not PIPELINE_NAME_PATTERN.fullmatch(name):
        raise ScaffoldError(f"--name {name!r} must match [a-z0-9][a-z0-9-]{{0,127}} (lower case, digits, dashes).")
    task = Task(task) if task else None
    profiles, headers, label = read_csv(csv_path, label)
    task, task_reason, label_spec, label_reason = plan_label(profiles, label, task, headers)
    rows = profiles[label].rows
    notes: list[str] = []
    columns = []
    for column, cells in profiles.items():
        if column == label:
            columns.append(
                Column(column, "label", "the label: not a model input", cells.type, 0, 0.0, headers.get(column, ""))
            )
            continue
        treated = column_treatment(cells)
        columns.append(
            Column(
                column,
                treated.kind,
                treated.reason,
                cells.type,
                treated.distinct,
                cells.missing,
                headers.get(column, ""),
                treated.date_format,
                treated.min_count,
            )
        )
        if cells.type == "STRING" and (note := _text_that_is_numbers(columns[-1].shown, cells)):
            notes.append(note)
    inputs = [c for c in columns if c.kind not in ("unused", "label")]
    if not inputs:
        raise ScaffoldError(
            "no column can feed the model: "
            + "; ".join(f"'{c.name}' {c.reason}" for c in columns if c.kind == "unused")
        )
    label_name = label_spec.get("name", label)
    if transformed_name(label_name) in {transformed_name(c.name) for c in inputs}:
        label_spec["name"] = f"{label_name}_label"
    metric, threshold, threshold_reason, max_regression, max_regression_reason = plan_blessing(task, profiles[label])
    low, high = SLICE_VALUES
    slices = [c.name for c in columns if c.kind == "categorical" and low <= c.distinct <= high][:MAX_SLICES]
    return Plan(
        name=name,
        csv=csv_path,
        rows=rows,
        task=task,
        task_reason=task_reason,
        label=label_spec,
        label_reason=label_reason,
        columns=columns,
        metric=metric,
        threshold=threshold,
        threshold_reason=threshold_reason,
        max_regression=max_regression,
        max_regression_reason=max_regression_reason,
        slices=slices,
        budget=training_budget(rows),
        notes=notes,
    )


def training_budget(rows: int) -> budget_lib.Budget:
    """What the Trainer's budget (``models/budget.py``) is for a CSV of ``rows`` rows: about
    the train split's share of them, in the default batch on one replica."""
    return budget_lib.from_data(max(1, round(rows * (1 - EVAL_SHARE))), HParams().per_replica_batch_size)


def _toml(value) -> str:
    """A TOML value (strings as basic strings: JSON's escapes are TOML's)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def problem_toml(p: Plan, source: str) -> str:
    """The spec's text, each decision with its reason in a comment."""
    lines = [
        f"# Drafted by `python -m authoring.scaffold` from {os.path.basename(source)} ({p.rows} rows) on "
        f"{datetime.date.today()}.",
        "# Review the task, the label, each column's treatment and the blessing threshold (models/problem.py",
        "# documents every key); the data contract beside it (schema.pbtxt) is a draft too.",
        f"name = {_toml(p.name)}",
        f"# {p.task_reason if p.task_reason.startswith('given') else 'inferred: ' + p.task_reason}",
        f"task = {_toml(p.task.value)}",
    ]
    if p.renamed:
        lines += [
            "",
            "[columns]",
            "# Headers that cannot name a feature, by the feature name the spec uses for each (lower case, '_' for",
            '# anything else; docs/problems.md, "Column names"). The CSV keeps its header; CsvExampleGen renames',
            "# these columns, and the model's serving inputs (serving_raw) take the feature names.",
            *(f"{feature} = {_toml(header)}" for feature, header in p.renamed.items()),
        ]
    lines += [
        "",
        "[label]",
        f"# {p.label_reason}",
    ]
    lines += [f"{key} = {_toml(value)}" for key, value in p.label.items()]
    lines += ["", "[features]"]
    for kind in ("log_numeric", "numeric", "categorical"):
        if chosen := p.of_kind(kind):
            lines.append(f"{kind} = [")
            lines += [f"    {_toml(c.name)},  # {c.reason}" for c in chosen]
            lines.append("]")
    if dates := p.of_kind("date"):
        lines += ["", "[features.dates]"]
        lines += ["# Each is numbers: days since 1970-01-01, year, month, weekday (and hour, with a time)."]
        for c in dates:
            lines += [f"# {c.reason}", f"{_toml(c.name)} = {_toml(c.date_format)}"]
    if rare := [c for c in p.of_kind("categorical") if c.min_count]:
        lines += ["", "[features.vocab_min_count]", "# Values seen fewer times in the training split share one index."]
        lines += [f"{_toml(c.name)} = {c.min_count}" for c in rare]
    if unused := p.of_kind("unused"):
        lines += ["", "[features.unused]"]
        lines += [f"{_toml(c.name)} = {_toml(c.reason)}" for c in unused]
    lines += [
        "",
        "[evaluation]",
        f"slices = {_toml(p.slices)}",
        f"metric = {_toml(p.metric)}",
        f"# {p.threshold_reason}",
        f"threshold = {_toml(float(p.threshold))}",
        f"# {p.max_regression_reason}",
        f"max_regression = {_toml(float(p.max_regression))}",
        "",
        "# Training: no step count here. The Trainer trains until the validation metric stops improving,",
        "# within a budget from the training split's size (models/budget.py); for this CSV, about:",
        *textwrap.wrap(p.budget.reason, 96, initial_indent="#   ", subsequent_indent="#   "),
        "# A run's --train-steps N trains exactly N steps instead.",
        "",
        *textwrap.wrap(model_comment(p), 104, initial_indent="# ", subsequent_indent="# "),
        "[model]",
        f"family = {_toml(ModelFamily.CHOOSE.value)}",
    ]
    return "\n".join(lines) + "\n"


def train_rows(p: Plan) -> int:
    """About how many rows of the CSV the training split holds."""
    return max(1, round(p.rows * (1 - EVAL_SHARE)))


def _compared_on(p: Plan) -> str:
    """The rows the choice compares the families on, for this CSV."""
    rows, limit = train_rows(p), HParams().choice_rows
    if rows <= limit:
        return f"the training split (about {rows:,} rows)"
    return f"a sample of at most {limit:,} of the training split's about {rows:,} rows (choice_rows)"


def model_comment(p: Plan) -> str:
    """What the ``choose`` family does for this CSV, and how to name a family instead."""
    return (
        "Each run's Trainer chooses between the network and the gradient-boosted trees: both trained on four "
        f"fifths of {_compared_on(p)} and scored on the rest (never the eval split), the better trained on the "
        'whole training split (models/choice.py). Name "network" or "trees" to train one alone; '
        "`python -m authoring.choose_model --problem DIR` chooses once and writes the family here."
    )


def contract_header(p: Plan, copy_name: str) -> str:
    """The DRAFT note heading the scaffold's schema.pbtxt: what it is and what to review."""
    return (
        f"# DRAFT data contract, drafted by `python -m authoring.scaffold` from {copy_name} on\n"
        f"# {datetime.date.today()}, beside problem.toml. The pipeline checks every run's data against it as\n"
        "# it is, so until it is reviewed it only says that new data looks like this data. Review it:\n"
        "# - ranges (int_domain, float_domain) are the ones observed here: make them the physically possible ones;\n"
        "# - closed string domains list the values seen here: open (delete) the ones that will grow;\n"
        "# - max_missing_fraction tags are the shares of empty cells seen here, with room: decide what is normal;\n"
        "# - drift_comparator thresholds are generic: remove them where a column moves by design (timestamps,\n"
        "#   ids), tighten them where a change must stop a run (`python -m bench.drift` measures them);\n"
        "# - the label's class balance (min_label_class_fraction) and its columns' environments: see below.\n"
    )


def _observed(schema) -> list[str]:
    """The contract's observed ranges and closed domains, one entry per column."""
    domains = {d.name: len(d.value) for d in schema.string_domain}
    found = []
    for feature in schema.feature:
        if feature.HasField("int_domain"):
            found.append(f"{feature.name} {feature.int_domain.min}..{feature.int_domain.max}")
        elif feature.HasField("float_domain"):
            found.append(f"{feature.name} {feature.float_domain.min:g}..{feature.float_domain.max:g}")
        elif feature.HasField("domain"):
            found.append(f"{feature.name} one of {domains.get(feature.domain, '?')} values")
    return found


def scaffold(
    csv_path: str,
    label: str,
    task: Task | str | None = None,
    name: str | None = None,
    output: str | None = None,
    force: bool = False,
) -> tuple[Plan, str, object]:
    """Writes the problem folder for ``csv_path``; returns the plan, the folder and the
    drafted contract (``authoring.contract.Draft``). Raises ``ScaffoldError``."""
    if not os.path.isfile(csv_path):
        raise ScaffoldError(f"--csv {csv_path}: no such file.")
    p = _plan_while_tfdv_imports(csv_path, label, task, name)
    from authoring import contract

    folder = os.path.abspath(output or os.path.join(REPO_ROOT, "data", p.name))
    source = os.path.abspath(csv_path)
    inside = os.path.dirname(source) == folder
    copy_name = os.path.basename(source) if inside else f"{p.name}.csv"
    _refuse_folder(folder, copy_name, force)
    spec_text = problem_toml(p, source)
    with tempfile.TemporaryDirectory(prefix="scaffold-") as scratch:
        drafted = _draft_from_copy(scratch, p, source, copy_name, spec_text)
        os.makedirs(folder, exist_ok=True)
        if not inside:
            shutil.copyfile(source, os.path.join(folder, copy_name))
        with open(os.path.join(folder, PROBLEM_FILE), "w") as f:
            f.write(spec_text)
        with open(os.path.join(folder, CONTRACT_FILE), "w") as f:
            f.write(contract.to_text(drafted, contract_header(p, copy_name)))
    return p, folder, drafted


def _plan_while_tfdv_imports(csv_path: str, label: str, task: Task | str | None, name: str | None) -> Plan:
    """``plan``, while TensorFlow Data Validation is imported for the contract: its import
    (TensorFlow, Beam) takes seconds of mostly one core, and the plan reads the CSV mostly
    in Arrow."""
    importing = threading.Thread(target=importlib.import_module, args=("tensorflow_data_validation",), daemon=True)
    importing.start()
    p = plan(csv_path, label, task, name)
    importing.join()
    return p


def _refuse_folder(folder: str, copy_name: str, force: bool) -> None:
    """Refuses a folder the problem cannot be written into: one not empty (without
    ``force``), a file, or one holding other CSV files the pipeline would read as data."""
    if os.path.isdir(folder) and os.listdir(folder) and not force:
        raise ScaffoldError(
            f"{folder} exists and is not empty: pass --force to write {PROBLEM_FILE}, {CONTRACT_FILE} and "
            f"{copy_name} into it (other files stay), or choose another --output or --name."
        )
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ScaffoldError(f"{folder} is a file, not a folder: choose another --output.")
    others = [
        os.path.basename(f)
        for f in glob.glob(os.path.join(glob.escape(folder), "*.csv"))
        if os.path.basename(f) != copy_name
    ]
    if others:
        raise ScaffoldError(
            f"{folder} holds other CSV file(s) ({', '.join(sorted(others))}), which the pipeline would read as "
            "data too: move them away, or choose another --output."
        )


def _draft_from_copy(scratch: str, p: Plan, source: str, copy_name: str, spec_text: str):
    """The contract drafted in ``scratch`` from a copy of the CSV beside the spec, loaded as
    the runners load it; refuses a class that a split would hold no row of."""
    from authoring import contract
    from components.csv_encoding import ColumnType

    shutil.copyfile(source, os.path.join(scratch, copy_name))
    with open(os.path.join(scratch, PROBLEM_FILE), "w") as f:
        f.write(spec_text)
    try:
        problem = problem_lib.load(scratch)
    except problem_lib.ProblemError as err:
        raise ScaffoldError(f"the drafted spec does not load ({err}); please report this") from err
    types = {c.name: ColumnType[c.type] for c in p.columns}
    drafted = contract.draft_contract(scratch, glob.escape(copy_name), problem, types)
    absent = [
        f"{cls!r} in {split}"
        for split, counts in drafted.label_counts.items()
        for cls, count in zip(contract.class_names(problem), counts[1:], strict=True)
        if count == 0
    ]
    if absent:
        raise ScaffoldError(
            f"class(es) {', '.join(absent)} have no rows in that split as CsvExampleGen splits the data "
            "(AnomalyGate would stop the run): add rows of those classes, or merge them into another class."
        )
    return drafted


def review(p: Plan, folder: str, drafted, chosen: str | None = None) -> str:
    """What a person should review, then the command to run; ``chosen``: what
    ``authoring.choose_model`` said of the model families, if it ran."""
    relative = os.path.relpath(folder)
    shown = folder if relative.startswith("..") else relative
    width = max(len(c.shown) for c in p.columns)
    known_as = {c.name: c.shown for c in p.columns}
    lines = [
        f"Problem '{p.name}' drafted in {shown}: {PROBLEM_FILE}, {CONTRACT_FILE} (a DRAFT contract) and the data "
        f"({p.rows} rows, {len(p.columns)} columns).",
        "",
        "Review (each is a guess; edit problem.toml and schema.pbtxt where it is wrong):",
        f"  Task: {p.task.value}, because {p.task_reason}. Another: --task binary|multiclass|regression.",
        f"  Label: '{next(c.shown for c in p.columns if c.kind == 'label')}': {p.label_reason}.",
        "  Columns:",
    ]
    lines += [f"    {c.shown:<{width}}  {c.kind:<11}  {c.reason}" for c in p.columns]
    if p.renamed:
        lines.append(
            f"  Column names: {len(p.renamed)} header(s) cannot name a feature, so the spec names them as shown in "
            "parentheses ([columns] in problem.toml maps each to its header). The CSV files keep their header; "
            "requests to the served model (serving_raw) use the feature names."
        )
    sense = "at least" if p.metric in ("auc", "accuracy") else "at most"
    lines += [
        f"  Blessing: {p.metric} {sense} {p.threshold:g} on the eval split: {p.threshold_reason}.",
        f"  A new model may be at most {p.max_regression:g} worse than the last blessed one: "
        f"{p.max_regression_reason}.",
        f"  Slices: {', '.join(known_as[s] for s in p.slices) or 'none (no categorical input with 2-20 values)'}.",
        f"  Training: {p.budget.reason} (--train-steps N overrides).",
        f"  Model: {chosen}" if chosen else f"  Model: {model_review(p, shown)}",
    ]
    if observed := _observed(drafted.schema):
        lines.append("  Contract, observed ranges and closed domains (make them the possible ones):")
        lines += textwrap.wrap("; ".join(observed), 116, initial_indent="    ", subsequent_indent="    ")
    if drafted.min_label_class_fraction is not None:
        lines.append(
            f"  Contract, min_label_class_fraction={drafted.min_label_class_fraction:g}: "
            f"{' '.join(drafted.annotation_comments)}"
        )
    for note in p.notes + drafted.notes:
        lines.append(f"  Note: {note}")
    lines += ["", "Then run:", f"  python local_runner.py --problem {shown}"]
    return "\n".join(lines)


def model_review(p: Plan, shown: str) -> str:
    """The review's line on the model family: chosen by every run, on how many rows."""
    return (
        f"chosen by each run: the network and the gradient-boosted trees trained on four fifths of "
        f"{_compared_on(p)} and scored on the rest, the better trained on the whole split; the run's summary says "
        "which, both figures and what choosing took (models/choice.py). A family named in problem.toml's [model] "
        f"trains alone: `python -m authoring.choose_model --problem {shown}` chooses once and writes it."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", required=True, help="The CSV file: a header line, then one row per example.")
    parser.add_argument("--label", required=True, help="The column to predict.")
    parser.add_argument(
        "--task", choices=[t.value for t in Task], help="The task (default: inferred from the label's values)."
    )
    parser.add_argument("--name", help="The problem's name, [a-z0-9][a-z0-9-]* (default: from the CSV's file name).")
    parser.add_argument("--output", help="The problem's folder (default: data/<name> in this repository).")
    parser.add_argument("--force", action="store_true", help="Write into an existing folder.")
    parser.add_argument(
        "--choose-model",
        action="store_true",
        help="Then run the pipeline once with its Trainer choosing whatever the data's size, and write the chosen "
        "family into problem.toml (authoring.choose_model).",
    )
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    with Terminal(command_log(DEFAULT_OUTPUT_ROOT, "scaffold"), verbose=args.verbose) as terminal:
        from components.csv_encoding import CsvFileError

        try:
            p, folder, drafted = scaffold(args.csv, args.label, args.task, args.name, args.output, args.force)
        except (ScaffoldError, CsvFileError) as err:
            say(f"error: {err}", err=True)
            return 2
        chosen = None
        if args.choose_model:
            from authoring import choose_model

            choice, seconds = choose_model.choose(folder)
            chosen = choose_model.describe(choice, seconds).replace("\n", " ")
        terminal.say_log()  # before the review, which ends with the command to run next
        say(review(p, folder, drafted, chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
