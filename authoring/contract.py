"""A draft data contract for a problem's data, for a person to review.

    python -m authoring.contract [--problem DIR] [--data-root DIR] [--data-pattern '*.csv'] [--output FILE]

Drafted from the rows as CsvExampleGen encodes them (TFDV's types, presence and string
domains, each number's observed range, missing-value tolerances, generic drift thresholds)
and from the problem's label: its source columns TRAINING-only and without drift thresholds,
a classification label's ``min_label_class_fraction`` (docs/problems.md, "The contract
belongs to the problem"). A person reviews it and saves it as the problem's ``schema.pbtxt``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import math
import os
import re
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np

from models import problem as problem_lib
from models.problem import MISSING_TOKEN, Problem, Task
from pipeline.config import CONTRACT_FILE, DEFAULT_OUTPUT_ROOT, DEFAULT_PROBLEM_DIR, PipelineConfig
from runtime.terminal import Terminal, add_verbose_flag, command_log, say

MIN_VALUES_FOR_RANGE = 10
# Starting drift thresholds for a draft (DriftGate): the looser of the embedded contract's,
# for a person to tighten per column with `python -m bench.drift` on their own data.
DRAFT_TEXT_DRIFT = 0.2  # L-infinity distance
DRAFT_NUMBER_DRIFT = 0.1  # Jensen-Shannon divergence
# min_label_class_fraction: half the smallest class share of any split, at most this.
MAX_LABEL_CLASS_FRACTION = 0.05
# The train:eval hash buckets CsvExampleGen splits by (the pipeline's defaults).
_FIELDS = {f.name: f for f in dataclasses.fields(PipelineConfig)}
SPLIT_BUCKETS = {"train": _FIELDS["train_buckets"].default, "eval": _FIELDS["eval_buckets"].default}
# Rows per class and split: every row's split up to this many rows, then only rare classes'.
EXACT_SPLIT_ROWS = 100_000
RARE_CLASS_ROWS = 1_000
DRAFT_NOTE = (
    "# DRAFT data contract, drafted by `python -m authoring.contract` from {files} on {date}.\n"
    "# Review before use: the ranges below are the ones observed in this data; make them the\n"
    "# physically possible ones, open string domains that will grow, and say why in comments.\n"
    "# Drift thresholds (drift_comparator) are generic starting points: remove them where a\n"
    "# column moves by design (timestamps, ids), tighten them where a change must stop a run.\n"
)


class DraftError(ValueError):
    """The data cannot be drafted for this problem; the message names the fix."""


@dataclasses.dataclass
class Draft:
    """A drafted contract: the schema, the files it was drafted from, and what a person
    reviewing it should read (header lines, and comments placed in the schema's text)."""

    schema: object  # schema_pb2.Schema (TensorFlow Metadata is imported lazily)
    files: list[str]
    rows: int = 0
    # Lines for the header (without '# ').
    notes: list[str] = dataclasses.field(default_factory=list)
    # Column -> comment lines, placed in the column's `feature` block.
    feature_comments: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    # Comment lines placed before the schema-level annotation (min_label_class_fraction).
    annotation_comments: list[str] = dataclasses.field(default_factory=list)
    # Classification: split -> rows per class, [value that is none of the classes, class 0, ...].
    label_counts: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    min_label_class_fraction: float | None = None


def _numbers(cells) -> np.ndarray:
    """A CSV column's cells as ``preprocessing_fn`` reads a number: float32, 0 where empty."""
    from components.csv_encoding import parse_numbers

    return parse_numbers(cells).fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float32)


def label_classes(block, types: dict, problem: Problem) -> np.ndarray:
    """Each row's class index (-1: a value that is none of the classes) of a classification
    label, computed from the raw CSV cells as ``models.preprocessing.label`` computes it."""
    from components.csv_encoding import ColumnType

    label = problem.label
    if label.expression is not None:
        columns = {key: _numbers(block.column(key)) for key in label.sources}
        return np.asarray(problem_lib.evaluate_expression(label.expression, columns)).astype(np.int64)
    cells = block.column(label.column)
    text = types[label.column] == ColumnType.STRING
    if problem.task == Task.BINARY:
        if text:
            return np.array([c == label.positive for c in cells.to_pylist()], np.int64)
        return (_numbers(cells) == np.float32(float(label.positive))).astype(np.int64)
    import pyarrow as pa
    import pyarrow.compute as pc

    if text:
        found = pc.index_in(pc.fill_null(cells, MISSING_TOKEN), value_set=pa.array(list(label.classes), pa.string()))
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    # Numbers as integers, named as str(int(value)) names them.
    index = {name: i for i, name in enumerate(label.classes)}
    integral = {int(name): i for name, i in index.items() if re.fullmatch(r"0|-?[1-9][0-9]*", name)}
    keys = np.array(sorted(integral), np.int64)
    positions = np.array([integral[k] for k in keys], np.int64)
    integers = _numbers(cells).astype(np.int64)
    at = np.minimum(np.searchsorted(keys, integers), max(len(keys) - 1, 0))
    found = np.where(keys[at] == integers, positions[at], -1) if len(keys) else np.full(len(integers), -1)
    present = cells.is_valid().to_numpy(zero_copy_only=False)
    return np.where(present, found, index.get(MISSING_TOKEN, -1)).astype(np.int64)


def _write_examples(files: Sequence[str], records: str, headers: Mapping[str, str] | None = None) -> None:
    """Writes the rows of ``files`` as CsvExampleGen encodes them to ``records`` (a TFRecord
    file; ``headers``: the problem's header names by feature name)."""
    import tensorflow as tf

    from components import csv_encoding

    types = csv_encoding.infer_column_types(files, headers)
    with tf.io.TFRecordWriter(records) as writer:
        for path in files:
            for block in csv_encoding.read_blocks(path, headers=headers):
                for record in csv_encoding.encode_block(block, types):
                    writer.write(record)


class _SplitCounter:
    """Rows per class of each split, each row put in the split CsvExampleGen puts it in (its
    tf.Example hashed). Hashing every row is most of a pass's time at a million rows, and
    only rare classes need every row: so the first ``EXACT_SPLIT_ROWS`` rows are hashed,
    and after them each row of a class with fewer than ``RARE_CLASS_ROWS`` rows so far. A
    class whose every row was hashed has its exact counts; another's rows not hashed are
    divided between the splits as all hashed rows were. The split does not depend on the
    label, so that is off by about the square root of a class's rows not hashed (on a
    class of a million rows, a few hundred: 0.1% of its share)."""

    def __init__(self, problem: Problem, types) -> None:
        self.problem, self.types = problem, types
        self.names = list(SPLIT_BUCKETS)
        self.buckets = list(np.cumsum(list(SPLIT_BUCKETS.values())))
        self.hashed = np.zeros((len(self.names), problem.num_classes + 1), np.int64)
        self.totals = np.zeros(problem.num_classes + 1, np.int64)
        self.rows = 0

    def add(self, block, batch) -> None:
        """Counts a block's rows (``batch``: its ``csv_encoding.feature_batch``)."""
        import pyarrow as pa

        from components import csv_encoding

        classes = label_classes(block, self.types, self.problem) + 1
        chosen = np.arange(max(0, min(len(classes), EXACT_SPLIT_ROWS - self.rows)))
        rest = classes[len(chosen) :]
        before = self.totals + np.bincount(classes[: len(chosen)], minlength=len(self.totals))
        rare = [
            np.flatnonzero(rest == cls)[: max(0, RARE_CLASS_ROWS - before[cls])] + len(chosen)
            for cls in np.unique(rest)
        ]
        chosen = np.sort(np.concatenate([chosen, *rare]))
        self.totals += np.bincount(classes, minlength=len(self.totals))
        self.rows += len(classes)
        if len(chosen):
            records = csv_encoding.encode_features(batch.take(pa.array(chosen)))
            np.add.at(self.hashed, (csv_encoding.split_indices(records, self.buckets), classes[chosen]), 1)

    @property
    def estimated(self) -> list[int]:
        """The classes (index + 1) whose rows per split are estimated, not counted."""
        return [int(c) for c in np.flatnonzero(self.hashed.sum(axis=0) < self.totals)]

    def counts(self) -> dict[str, list[int]]:
        found = self.hashed.copy()
        # A row's split does not depend on its label: the best guess for a class's rows not
        # hashed is the split of all rows hashed.
        shares = self.hashed.sum(axis=1) / max(1, self.hashed.sum())
        for cls in self.estimated:
            rest = self.totals[cls] - self.hashed[:, cls].sum()
            divided = np.round(shares * rest).astype(np.int64)
            divided[-1] = rest - divided[:-1].sum()
            found[:, cls] += divided
        return {name: [int(v) for v in found[i]] for i, name in enumerate(self.names)}


def _statistics(
    files: Sequence[str],
    problem: Problem | None = None,
    headers: Mapping[str, str] | None = None,
    types: Mapping[str, object] | None = None,
):
    """TFDV's statistics of the rows as CsvExampleGen encodes them, and (for a
    classification ``problem``) a ``_SplitCounter``: one streaming pass, in memory.

    TFDV's in-memory generators are the ones StatisticsGen runs, fed the columns tfx_bsl's
    decoder would make of each block's tf.Examples; distinct values and top values come
    from TFDV's sketches, exact up to 16,384 and 1,024 distinct values (what a string
    domain needs: at most 100)."""
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    from components import csv_encoding
    from components.csv_statistics import decoded

    types = types or csv_encoding.infer_column_types(files, headers)
    options = stats_options.StatsOptions()
    generators = stats_impl.get_generators(options, in_memory=True)
    partial = [generator.create_accumulator() for generator in generators]
    counter = _SplitCounter(problem, types) if problem is not None and problem.task != Task.REGRESSION else None
    for path in files:
        for block in csv_encoding.read_blocks(path, headers=headers):
            batch = csv_encoding.feature_batch(block, types)
            columns = decoded(batch)
            partial = [g.add_input(p, columns) for g, p in zip(generators, partial, strict=True)]
            if counter is not None:
                counter.add(block, batch)
    return stats_impl.extract_statistics_output(partial, generators), counter


def csv_statistics(files: Sequence[str], problem: Problem | None = None):
    """TFDV statistics of the rows as CsvExampleGen encodes them (an empty cell is a feature
    with no value, not an absent one; with a ``problem``, its headers renamed to its feature
    names), so a contract drafted or checked with them means what it will mean in the
    pipeline."""
    import tensorflow_data_validation as tfdv

    with tempfile.TemporaryDirectory(prefix="contract-") as scratch:
        records = os.path.join(scratch, "examples.tfrecord")
        _write_examples(files, records, problem.header_names if problem is not None else None)
        return tfdv.generate_statistics_from_tfrecord(records)


def _round_down(value: float, digits: int = 2) -> float:
    """``value`` rounded down to ``digits`` significant digits (0.0374 -> 0.037)."""
    if value <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return round(math.floor(value / scale + 1e-9) * scale, 12)


def class_names(problem: Problem) -> list[str]:
    """The label's classes as people read them: the positive value and the rest for binary."""
    label = problem.label
    if problem.task == Task.MULTICLASS:
        return list(label.classes)
    if label.expression is not None:
        return [f"not ({label.expression})", label.expression]
    return [f"not {label.positive}", str(label.positive)]


def label_class_fraction(counts: dict[str, list[int]], names: Sequence[str]) -> tuple[float, str]:
    """The ``min_label_class_fraction`` for a label with these rows per class and split, and
    why, in words: half the smallest share any class has in any split, at most
    ``MAX_LABEL_CLASS_FRACTION``."""
    smallest, where = 1.0, ""
    for split, per_split in sorted(counts.items()):
        rows = sum(per_split)
        for name, count in zip(names, per_split[1:], strict=True):
            if rows and count / rows < smallest:
                smallest, where = count / rows, f"class {name!r} is {count} of the {rows} {split} rows"
    fraction = min(MAX_LABEL_CLASS_FRACTION, _round_down(smallest / 2))
    if fraction >= MAX_LABEL_CLASS_FRACTION:
        return fraction, f"at most {MAX_LABEL_CLASS_FRACTION:g}; the rarest {where} ({smallest:.1%})"
    return fraction, f"half the rarest share: {where} ({smallest:.1%})"


def _loosen(schema, feature) -> None:
    """Only type, presence and missing-value tolerance for a column the model never reads."""
    for field in ("int_domain", "float_domain", "string_domain", "drift_comparator", "skew_comparator"):
        feature.ClearField(field)
    if feature.HasField("domain"):
        name = feature.domain
        feature.ClearField("domain")
        if not any(f.domain == name for f in schema.feature):
            kept = [d for d in schema.string_domain if d.name != name]
            del schema.string_domain[:]
            schema.string_domain.extend(kept)


def _apply_problem(found: Draft, statistics, problem: Problem, counter: _SplitCounter | None) -> None:
    """The label-aware parts of the draft: the CSV's header names said, the unused columns
    loosened, the label's source columns marked and, for a classification label
    (``counter``), the class balance every split must keep."""
    schema, dataset = found.schema, statistics.datasets[0]
    by_name = {".".join(f.path.step): f for f in dataset.features}
    _note_header_names(found, problem, by_name)
    _loosen_unused(found, problem, by_name)
    _loosen_dates(found, problem, by_name)
    label_only = set(problem.label_only_columns)
    for key in problem.label.sources:
        comment = _mark_label_source(schema, key, by_name[key], dataset.num_examples, problem, key in label_only)
        found.feature_comments.setdefault(key, []).extend(comment)
    if label_only:
        from components.drift import SERVING, TRAINING

        del schema.default_environment[:]
        schema.default_environment.extend([TRAINING, SERVING])
    if counter is not None:
        _set_class_balance(found, problem, counter)


def _note_header_names(found: Draft, problem: Problem, by_name: Mapping) -> None:
    """A comment on each column the CSV header names otherwise (``[columns]``)."""
    for key, header in problem.columns.items():
        if key in by_name:
            found.feature_comments.setdefault(key, []).append(
                f"Named {header!r} in the CSV header (problem.toml [columns])."
            )


def _loosen_unused(found: Draft, problem: Problem, by_name: Mapping) -> None:
    """Only type and presence for the columns the model never reads (``features.unused``)."""
    import tensorflow_data_validation as tfdv

    for key in problem.features.unused:
        if key in by_name and key not in problem.label.sources:
            _loosen(found.schema, tfdv.get_feature(found.schema, key))
            found.feature_comments.setdefault(key, []).append(
                f"Not a model input (features.unused: {problem.features.unused[key]}): only its type and presence."
            )


def _loosen_dates(found: Draft, problem: Problem, by_name: Mapping) -> None:
    """A date column (``features.dates``) stays text with only its type and presence: its
    values move by design, so a closed domain of the dates seen or a drift threshold on
    them would stop every new span; a cell that is no date is Transform's missing value."""
    import tensorflow_data_validation as tfdv

    for key, form in problem.features.dates.items():
        if key in by_name:
            _loosen(found.schema, tfdv.get_feature(found.schema, key))
            found.feature_comments.setdefault(key, []).append(
                f"A date, {form} (features.dates): text here, with only its type and presence, as its values move "
                "by design. A cell that is no such date is no anomaly here (a contract has no pattern for text): "
                "Transform reads it as a missing value, its parts the mean of the others'."
            )


def _mark_label_source(schema, key: str, statistics, rows: int, problem: Problem, label_only: bool) -> list[str]:
    """Marks the label's source column ``key``: required when every row has a value; when the
    model does not read it (``label_only``), TRAINING-only and without drift thresholds.
    Returns the comment lines saying so."""
    import tensorflow_data_validation as tfdv

    from components.anomaly_gate import missing_share
    from components.drift import SERVING

    feature = tfdv.get_feature(schema, key)
    missing = missing_share(statistics, rows)
    comment = [f"The label's source ({problem.label.describe()})."]
    if missing == 0:
        _require(feature)
    else:
        comment.append(
            f"Empty in {missing:.1%} of this data's rows, so not required; an empty cell counts as "
            + ("0." if problem.label.expression is not None or problem.task == Task.REGRESSION else "no class.")
        )
    if label_only:
        feature.not_in_environment.append(SERVING)
        feature.ClearField("drift_comparator")
        feature.ClearField("skew_comparator")
        comment.append(
            "Not a model input: unknown when the model serves, so not in the SERVING environment. No "
            "drift_comparator: the label moving is what retraining is for (its class balance is "
            "min_label_class_fraction's check)."
        )
    return comment


def _require(feature) -> None:
    """Required: a value in every row, as in every row of this data (no missing-value tolerance)."""
    from components.anomaly_gate import MISSING_TAG

    if not feature.HasField("shape"):
        feature.shape.dim.add(size=1)
    kept = [t for t in feature.annotation.tag if not t.startswith(MISSING_TAG)]
    del feature.annotation.tag[:]
    feature.annotation.tag.extend(kept)
    if not feature.annotation.tag:
        feature.ClearField("annotation")


def _set_class_balance(found: Draft, problem: Problem, counter: _SplitCounter) -> None:
    """The schema's ``min_label_class_fraction`` tag with its comment, and warnings on what
    in this data AnomalyGate would stop."""
    from components.anomaly_gate import LABEL_BALANCE_TAG

    counts, names = counter.counts(), class_names(problem)
    fraction, why = label_class_fraction(counts, names)
    found.notes.extend(_class_balance_warnings(counts, fraction, why))
    if fraction <= 0:
        fraction = problem_lib.MIN_LABEL_CLASS_FRACTION
    found.schema.annotation.tag.append(f"{LABEL_BALANCE_TAG}{fraction:g}")
    found.annotation_comments = [
        f"Each class of {problem.label.describe()} at least this share of every split (AnomalyGate): {why}."
    ]
    if estimated := [(["none of the classes"] + names)[c] for c in counter.estimated]:
        found.annotation_comments.append(
            f"Rows per split counted for the first {EXACT_SPLIT_ROWS:,} rows and every row of a class under "
            f"{RARE_CLASS_ROWS:,} rows; the other rows of {', '.join(map(repr, estimated))} are divided "
            "between the splits as all counted rows were (a row's split does not depend on its label)."
        )
    found.label_counts, found.min_label_class_fraction = counts, fraction


def _class_balance_warnings(counts: dict[str, list[int]], fraction: float, why: str) -> list[str]:
    """The draft's warnings on the label: values that are none of the classes, a class
    missing from a split, a class rarer than the project's default floor."""
    warnings = []
    if unknown := sum(c[0] for c in counts.values()):
        warnings.append(
            f"WARNING: {unknown} rows hold a label value that is none of label.classes: AnomalyGate stops a "
            "run on them. Add the value(s) to label.classes in problem.toml, or fix those rows."
        )
    if fraction <= 0:
        warnings.append(
            f"WARNING: {why}: a split without a class stops the run (AnomalyGate). More rows of that class, "
            "or fewer classes."
        )
    elif fraction < problem_lib.MIN_LABEL_CLASS_FRACTION:
        warnings.append(
            f"WARNING: a rare class ({why}): min_label_class_fraction={fraction:g} is below the project's "
            f"default {problem_lib.MIN_LABEL_CLASS_FRACTION:g}, so this very data passes; a split with that "
            "few rows of a class says little about it."
        )
    return warnings


def draft_contract(
    data_root: str, data_pattern: str = "*.csv", problem: Problem | None = None, types: Mapping | None = None
) -> Draft:
    """The contract drafted from the CSV files (TFDV's schema, each number's observed range,
    missing-value tolerances, drift thresholds), label-aware with a ``problem``; ``types``:
    the columns' ``csv_encoding.ColumnType`` by feature name, where the caller already
    inferred them from these files. Raises ``FileNotFoundError`` without files,
    ``DraftError`` when the data lacks a column the problem names."""
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import schema_pb2

    from components.anomaly_gate import MISSING_TAG, missing_share

    files = sorted(glob.glob(os.path.join(data_root, data_pattern)))
    if not files:
        raise FileNotFoundError(f"No file matches {data_pattern} in {data_root}")
    if problem is not None:
        from components.csv_encoding import column_names, feature_names

        header = feature_names(files[0], problem.header_names)
        if missing := [key for key in problem.raw_columns if key not in header]:
            raise DraftError(
                f"The problem '{problem.name}' names column(s) {', '.join(map(problem.shown, missing))} that "
                f"{files[0]} does not have (its columns: {', '.join(column_names(files[0]))}). Is --problem the "
                "folder of this data's problem?"
            )
    headers = problem.header_names if problem is not None else None
    statistics, counter = _statistics(files, problem, headers, types)
    schema = tfdv.infer_schema(statistics)
    dataset = statistics.datasets[0]
    rows = dataset.num_examples
    for feature in dataset.features:
        target = tfdv.get_feature(schema, feature.path.step[0])
        if not target.HasField("shape") and rows:
            # Half as much again as the share seen, plus a point: a starting tolerance.
            missing = missing_share(feature, rows)
            target.annotation.tag.append(f"{MISSING_TAG}{min(1.0, round(missing * 1.5 + 0.01, 2)):g}")
        if feature.HasField("string_stats"):
            target.drift_comparator.infinity_norm.threshold = DRAFT_TEXT_DRIFT
        # Too few values to suggest a range (a column that is nearly always empty).
        if not feature.HasField("num_stats") or feature.num_stats.common_stats.tot_num_values < MIN_VALUES_FOR_RANGE:
            continue
        target.drift_comparator.jensen_shannon_divergence.threshold = DRAFT_NUMBER_DRIFT
        low, high = feature.num_stats.min, feature.num_stats.max
        if target.type == schema_pb2.INT:
            target.int_domain.min, target.int_domain.max = int(low), int(high)
        elif target.type == schema_pb2.FLOAT:
            target.float_domain.min, target.float_domain.max = low, high
            target.float_domain.disallow_nan = target.float_domain.disallow_inf = True
    found = Draft(schema=schema, files=files, rows=rows)
    if problem is not None:
        _apply_problem(found, statistics, problem, counter)
    return found


def draft(data_root: str, data_pattern: str = "*.csv", problem: Problem | None = None):
    """The schema TFDV infers from the CSV files, with every number's observed range (and,
    with a ``problem``, the label-aware parts); returns ``(schema, files)``."""
    found = draft_contract(data_root, data_pattern, problem)
    return found.schema, found.files


def _comment(lines: Sequence[str], indent: str, width: int = 100) -> list[str]:
    """Comment lines, wrapped."""
    return [f"{indent}# {part}" for line in lines for part in textwrap.wrap(line, width - len(indent) - 2)]


def to_text(found: Draft, header: str | None = None) -> str:
    """The draft as schema.pbtxt text: ``header`` (default: the DRAFT note), the draft's
    notes, then the schema with its comments in place."""
    from google.protobuf import text_format

    if header is None:
        header = DRAFT_NOTE.format(
            files=", ".join(os.path.basename(f) for f in found.files), date=datetime.date.today()
        )
    lines = [header.rstrip("\n"), *_comment(found.notes, "")]
    block = None
    for line in text_format.MessageToString(found.schema).splitlines():
        if not line.startswith(" ") and line.endswith(" {"):
            block = line[:-2]
            if block == "annotation":
                lines += _comment(found.annotation_comments, "")
        lines.append(line)
        name = re.fullmatch(r'  name: "(.*)"', line)
        if block == "feature" and name and name[1] in found.feature_comments:
            lines += _comment(found.feature_comments[name[1]], "  ")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--problem",
        default=DEFAULT_PROBLEM_DIR,
        help="The problem's folder (its problem.toml says which column is the label); default: the taxi example.",
    )
    parser.add_argument("--data-root", help="Directory holding the CSV file(s) (default: the problem's folder).")
    parser.add_argument("--data-pattern", default="*.csv", help="Glob, relative to the data's directory.")
    parser.add_argument(
        "--output", help=f"Where to write the draft (default: <problem's folder>/{CONTRACT_FILE}.draft)."
    )
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    with Terminal(command_log(DEFAULT_OUTPUT_ROOT, "contract"), verbose=args.verbose) as terminal:
        from components.csv_encoding import CsvFileError

        try:
            problem = problem_lib.load(args.problem)
            found = draft_contract(args.data_root or args.problem, args.data_pattern, problem)
        except (FileNotFoundError, DraftError, CsvFileError, problem_lib.ProblemError) as err:
            say(f"error: {err}", err=True)
            return 2
        output = args.output or os.path.join(args.problem, CONTRACT_FILE + ".draft")
        with open(output, "w") as f:
            f.write(to_text(found))
        for note in found.notes:
            say(note)
        say(
            f"Draft data contract for '{problem.name}' written to {output}: review it, then save it as "
            f"{CONTRACT_FILE} in the problem's folder."
        )
        terminal.say_log()
    return 0


if __name__ == "__main__":
    sys.exit(main())
