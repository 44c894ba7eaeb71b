"""A prediction problem, declared in one file (``problem.toml`` in the problem's folder):
its columns, the label, the task, the Evaluator's slices and the blessing metric. Everything
else is derived from a ``Problem``, which travels to the components as JSON
(docs/problems.md). Pure Python: nothing here imports TensorFlow.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import json
import keyword
import operator
import os
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

PROBLEM_FILE = "problem.toml"
# The data contract's file name, in the problem's folder.
CONTRACT_FILE = "schema.pbtxt"
# Missing string values become this token, so the vocabulary has an explicit entry.
MISSING_TOKEN = "__MISSING__"
# Each class of a classification label must be at least this share of every split, or there
# is nothing to learn (AnomalyGate checks it before Transform); a contract may set its own
# with a schema-level `annotation { tag: "min_label_class_fraction=0.05" }`.
MIN_LABEL_CLASS_FRACTION = 0.01
# A feature name: what TensorFlow keeps as a SavedModel signature's input name (``serving_raw``
# takes one input per column; ``is_feature_name``). A name that is no graph node name (a space,
# '$', 'ö', a leading '_') fails the export; one that is but is no identifier ('a.b', '2023_x')
# is renamed by TensorFlow ('a_b', 'arg_2023_x'), so a request by the column's name would miss
# it; a Python keyword, or 'self', is no parameter name of the signature's function and fails.
_FEATURE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# Letters NFKD does not take apart into an ASCII letter and marks, as German, Danish, Polish,
# Icelandic and Turkish headers write them.
_TRANSLITERATION = {"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "þ": "th", "ł": "l", "ı": "i"}
# Before a name that would start with a digit ("2023 Revenue" -> col_2023_revenue), and the
# name of a header with no letter or digit left ("€" in column 3 -> col_3).
SAFE_PREFIX = "col_"
# A date format's directives (``features.dates``), as strftime writes them, and the text each
# matches: a year of four digits, a month 1-12 and a day 1-31 (a leading zero optional), an
# hour 0-23, minutes and seconds 00-59. Any other character stands for itself.
DATE_DIRECTIVES = {
    "Y": "([0-9]{4})",
    "m": "(0?[1-9]|1[0-2])",
    "d": "(0?[1-9]|[12][0-9]|3[01])",
    "H": "([01]?[0-9]|2[0-3])",
    "M": "([0-5][0-9])",
    "S": "([0-5][0-9])",
}
# The numbers a date column becomes (``date_parts``): days since 1970-01-01 (with the time
# of day as a fraction, where the format has one), the year, the month, the day of the week
# (Monday 0, as Python's ``weekday()``) and, where the format has %H, the hour.
DATE_PARTS = ("days", "year", "month", "weekday")
TIME_PART = "hour"


class ProblemError(ValueError):
    """The problem spec is wrong; the message names the key and the fix."""


class Task(str, enum.Enum):  # noqa: UP042 - str() and format() as they are everywhere
    BINARY = "binary"
    MULTICLASS = "multiclass"
    REGRESSION = "regression"


class ModelFamily(str, enum.Enum):  # noqa: UP042 - as Task
    """What the Trainer trains: the wide-and-deep network (``models/model.py``),
    gradient-boosted trees (``models/trees.py``), or whichever of the two scores better on a
    validation part of the training split (``models/choice.py``)."""

    NETWORK = "network"
    TREES = "trees"
    CHOOSE = "choose"


# Metrics a model can be blessed on, per task: (Keras/TFMA name, higher is better).
BLESSING_METRICS: dict[Task, dict[str, bool]] = {
    Task.BINARY: {"auc": True, "accuracy": True},
    Task.MULTICLASS: {"accuracy": True},
    Task.REGRESSION: {"rmse": False, "mae": False},
}
DEFAULT_METRIC = {Task.BINARY: "auc", Task.MULTICLASS: "accuracy", Task.REGRESSION: "rmse"}

# The label expression's operators: arithmetic over columns and numbers, and comparisons.
_BINARY_OPERATORS: dict[type, Callable] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_COMPARISONS: dict[type, Callable] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
}


def _check_expression(node: ast.AST, text: str) -> set[str]:
    """The column names ``node`` reads; raises ``ProblemError`` on anything but arithmetic,
    one comparison, numbers and column names."""
    if isinstance(node, ast.Expression):
        return _check_expression(node.body, text)
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return set()
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _check_expression(node.operand, text)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
        return _check_expression(node.left, text) | _check_expression(node.right, text)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARISONS:
        return _check_expression(node.left, text) | _check_expression(node.comparators[0], text)
    raise ProblemError(
        f"label.expression {text!r}: {ast.unparse(node)!r} is not allowed; use column names, numbers, "
        "+ - * / and one comparison (> >= < <=), e.g. 'tip > 0.2 * amount'"
    )


def evaluate_expression(text: str, columns: Mapping[str, Any]) -> Any:
    """``text`` over ``columns`` (TensorFlow tensors or numpy arrays: the operators are the
    arrays' own), e.g. ``evaluate_expression("a > 0.2 * b", {"a": ..., "b": ...})``."""

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            return columns[node.id]
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.UnaryOp):
            return -value(node.operand)
        if isinstance(node, ast.BinOp):
            return _BINARY_OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Compare):
            return _COMPARISONS[type(node.ops[0])](value(node.left), value(node.comparators[0]))
        raise ProblemError(f"label.expression {text!r}: cannot evaluate {ast.unparse(node)!r}")

    tree = ast.parse(text, mode="eval")
    _check_expression(tree, text)
    return value(tree.body)


def _is_comparison(text: str) -> bool:
    return isinstance(ast.parse(text, mode="eval").body, ast.Compare)


@dataclasses.dataclass(frozen=True)
class Label:
    """What the model predicts, and how the target is derived from the raw columns.

    One of: ``column`` alone (regression on a number; multi-class with ``classes``),
    ``column`` with ``positive`` (binary: 1 where the column equals that value), or
    ``expression`` (binary with a comparison, e.g. ``tip > 0.2 * amount``; regression with
    arithmetic). Missing source values count as 0 in an expression.
    """

    name: str
    column: str | None = None
    positive: str | None = None
    expression: str | None = None
    classes: tuple[str, ...] = ()

    @property
    def sources(self) -> tuple[str, ...]:
        """The raw columns the label is computed from, in a stable order."""
        if self.expression:
            return tuple(sorted(_check_expression(ast.parse(self.expression, mode="eval"), self.expression)))
        return (self.column,) if self.column else ()

    def describe(self) -> str:
        """The label in words, for messages: "label 'generous' (tip > 0.2 * amount)"."""
        if self.expression:
            rule = self.expression
        elif self.positive is not None:
            rule = f"{self.column} == {self.positive!r}"
        elif self.classes:
            rule = f"{self.column}: one of {', '.join(self.classes)}"
        else:
            rule = str(self.column)
        return f"label '{self.name}' ({rule})"


@dataclasses.dataclass(frozen=True)
class Features:
    """How each raw column feeds the model. Every list may be empty."""

    # Heavy-tailed, non-negative numbers: log1p, then z-score.
    log_numeric: tuple[str, ...] = ()
    # Plain numbers: z-score.
    numeric: tuple[str, ...] = ()
    # Categories: a vocabulary computed over the training data (text or integer codes).
    categorical: tuple[str, ...] = ()
    # Integer categories with a known range: name -> largest valid value. Index 0 is kept for
    # a missing value, so the number of categories is max + 2.
    integer_categorical: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # Numbers put into quantile buckets over the training data, plus one bucket for "missing".
    bucketized: tuple[str, ...] = ()
    num_buckets: int = 10
    # Pairs crossed into one category each in the model's wide part (a number is cut at
    # fixed points of its z-score).
    crosses: tuple[tuple[str, str], ...] = ()
    # Columns deliberately not model inputs, with the reason.
    unused: Mapping[str, str] = dataclasses.field(default_factory=dict)
    vocab_top_k: int = 1000
    vocab_oov_buckets: int = 1
    # Dates and times written as text: name -> format (``DATE_DIRECTIVES``, e.g. "%Y-%m-%d").
    # Each becomes numbers (``date_parts``), z-scored; a cell that does not parse is missing.
    dates: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Categorical columns whose values seen fewer than this many times in the training data
    # share the out-of-vocabulary index (a value rarer than that has no weight of its own).
    vocab_min_count: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def dense(self) -> tuple[str, ...]:
        return self.log_numeric + self.numeric

    @property
    def date_parts(self) -> dict[str, tuple[str, ...]]:
        """Each date column's numbers, by feature name ("opened_days", ...), in ``DATE_PARTS`` order."""
        return {column: tuple(f"{column}_{part}" for part in parts_of(form)) for column, form in self.dates.items()}

    @property
    def numbers(self) -> tuple[str, ...]:
        """Every number the model reads, by feature name: the numeric columns, then the date parts."""
        return self.dense + tuple(part for parts in self.date_parts.values() for part in parts)

    @property
    def categories(self) -> tuple[str, ...]:
        """Every categorical input, in the model's order."""
        return self.categorical + tuple(self.integer_categorical) + self.bucketized

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every raw column that feeds the model."""
        return self.dense + self.categories + tuple(self.dates)


def date_pattern(form: str) -> str:
    """The regular expression (RE2's and Python's syntax, one group per directive in the
    format's order) a whole cell of date format ``form`` matches; raises ``ValueError``
    on a directive other than ``DATE_DIRECTIVES``'."""
    pattern, index = [], 0
    while index < len(form):
        if form[index] == "%":
            directive = form[index + 1 : index + 2]
            if directive not in DATE_DIRECTIVES:
                raise ValueError(f"%{directive} is not one of %{', %'.join(DATE_DIRECTIVES)}")
            pattern.append(DATE_DIRECTIVES[directive])
            index += 2
        else:
            pattern.append(re.escape(form[index]))
            index += 1
    return "".join(pattern)


def date_fields(form: str) -> tuple[str, ...]:
    """The directives of date format ``form`` in their order ("%d/%m/%Y" -> ("d", "m", "Y"))."""
    return tuple(re.findall(r"%(.)", form))


def parts_of(form: str) -> tuple[str, ...]:
    """The parts (``DATE_PARTS``, and ``TIME_PART`` with an hour) a date of format ``form`` becomes."""
    return DATE_PARTS + ((TIME_PART,) if "H" in date_fields(form) else ())


@dataclasses.dataclass(frozen=True)
class Blessing:
    """The Evaluator's gate: ``metric`` on the eval split must be at least ``threshold``
    (at most, for an error metric), and no worse than the champion's by more
    than ``max_regression`` (run-to-run noise)."""

    metric: str
    threshold: float
    max_regression: float = 0.0


@dataclasses.dataclass(frozen=True)
class Problem:
    name: str
    task: Task
    label: Label
    features: Features
    blessing: Blessing
    slices: tuple[str, ...] = ()
    # The column that orders the rows in time, if any: `python -m authoring.replay` cuts the
    # data into spans by it (docs/spans.md, "Spans and the rolling window").
    time_column: str | None = None
    # The CSV header's names that are no feature names, by feature name (the spec's
    # ``[columns]`` table, e.g. ``monthly_charges = "Monthly Charges"``): CsvExampleGen
    # renames those columns, everything after it (contract, Transform, signatures) reads
    # the feature names. Empty: every header is its feature's name.
    columns: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # What the Trainer trains (the spec's ``[model] family``; docs/model.md compares them).
    model: ModelFamily = ModelFamily.NETWORK
    # The folder the spec was read from (None for a spec built in code or read from JSON).
    directory: str | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        _validate(self)

    # --- derived facts -------------------------------------------------------------------

    @property
    def label_key(self) -> str:
        """The transformed label's name (the target the model trains on)."""
        return transformed_name(self.label.name)

    @property
    def num_classes(self) -> int:
        return len(self.label.classes) if self.task == Task.MULTICLASS else 2 if self.task == Task.BINARY else 1

    @property
    def label_only_columns(self) -> tuple[str, ...]:
        """Label sources that are not model inputs: unknown at serving time."""
        return tuple(c for c in self.label.sources if c not in self.features.inputs)

    @property
    def not_served_columns(self) -> tuple[str, ...]:
        """Columns a serving request leaves out: the label-only ones (unknown then) and the
        unused ones (the model never reads them)."""
        return tuple(dict.fromkeys(self.label_only_columns + tuple(self.features.unused)))

    @property
    def served_columns(self) -> tuple[str, ...]:
        """The columns a serving request carries: the raw ones but ``not_served_columns``."""
        return tuple(c for c in self.raw_columns if c not in self.not_served_columns)

    @property
    def higher_is_better(self) -> bool:
        return BLESSING_METRICS[self.task][self.blessing.metric]

    @property
    def raw_columns(self) -> tuple[str, ...]:
        """Every column the spec names: inputs, unused ones and the label's sources."""
        return tuple(dict.fromkeys(self.features.inputs + tuple(self.features.unused) + self.label.sources))

    def header_of(self, column: str) -> str:
        """The column's name in the CSV header (what a person calls it): the feature name
        unless ``columns`` maps it."""
        return self.columns.get(column, column)

    def shown(self, column: str) -> str:
        """The column as a person knows it: the header's name, then the feature's where the
        two differ ("Monthly Charges (monthly_charges)")."""
        header = self.header_of(column)
        return column if header == column else f"{header} ({column})"

    @property
    def header_names(self) -> dict[str, str]:
        """Feature name -> header name for every column the spec names or maps; empty when
        no header is renamed (what CsvExampleGen's ``column_names`` takes)."""
        if not self.columns:
            return {}
        return {column: self.header_of(column) for column in dict.fromkeys((*self.raw_columns, *self.columns))}

    @property
    def data_root(self) -> str | None:
        """The problem's folder holds its data (the CSV files) beside the spec and contract."""
        return self.directory

    @property
    def contract_path(self) -> str | None:
        return None if self.directory is None else os.path.join(self.directory, CONTRACT_FILE)

    # --- serialisation -------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The spec as plain JSON types (what the components receive)."""
        spec = dataclasses.asdict(self)
        spec.pop("directory")
        if not self.columns:  # as before the table existed: the same JSON, the same cache keys
            spec.pop("columns")
        if self.model == ModelFamily.NETWORK:  # the same: the network is what every spec had
            spec.pop("model")
        else:
            spec["model"] = {"family": self.model.value}
        for key in ("dates", "vocab_min_count"):  # the same: absent from every spec before them
            if not spec["features"][key]:
                spec["features"].pop(key)
        spec["task"] = self.task.value
        return spec

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], directory: str | None = None) -> Problem:
        """A ``Problem`` from a spec's tables; raises ``ProblemError`` naming a wrong key."""
        spec = dict(spec)
        _no_unknown_keys(
            spec,
            {"name", "task", "label", "features", "evaluation", "blessing", "slices", "time_column", "columns"}
            | {"model"},
            "",
        )
        model = dict(spec.get("model") or {})
        _no_unknown_keys(model, {"family"}, "model.")
        try:
            family = ModelFamily(model.get("family", ModelFamily.NETWORK.value))
        except ValueError:
            raise ProblemError(
                f"model.family {model.get('family')!r}: use one of {', '.join(f.value for f in ModelFamily)}"
            ) from None
        try:
            task = Task(spec.get("task", ""))
        except ValueError:
            raise ProblemError(f"task {spec.get('task')!r}: use one of {', '.join(t.value for t in Task)}") from None
        label_spec = dict(spec.get("label") or {})
        _no_unknown_keys(label_spec, {f.name for f in dataclasses.fields(Label)}, "label.")
        if "positive" in label_spec and label_spec["positive"] is not None:
            label_spec["positive"] = str(label_spec["positive"])
        label_spec["classes"] = tuple(str(c) for c in label_spec.get("classes", ()))
        label_spec.setdefault("name", label_spec.get("column") or "")
        feature_spec = dict(spec.get("features") or {})
        _no_unknown_keys(feature_spec, {f.name for f in dataclasses.fields(Features)}, "features.")
        for key in ("log_numeric", "numeric", "categorical", "bucketized"):
            feature_spec[key] = tuple(feature_spec.get(key, ()))
        feature_spec["crosses"] = tuple(tuple(pair) for pair in feature_spec.get("crosses", ()))
        feature_spec["integer_categorical"] = dict(feature_spec.get("integer_categorical", {}))
        feature_spec["unused"] = dict(feature_spec.get("unused", {}))
        feature_spec["dates"] = dict(feature_spec.get("dates", {}))
        feature_spec["vocab_min_count"] = dict(feature_spec.get("vocab_min_count", {}))
        # The spec file's [evaluation] table holds the slices and the blessing.
        evaluation = dict(spec.get("evaluation") or {})
        _no_unknown_keys(evaluation, {"slices", "metric", "threshold", "max_regression"}, "evaluation.")
        blessing = dict(spec.get("blessing") or {})
        for key in ("metric", "threshold", "max_regression"):
            if key in evaluation:
                blessing[key] = evaluation[key]
        blessing.setdefault("metric", DEFAULT_METRIC[task])
        if "threshold" not in blessing:
            raise ProblemError(
                "evaluation.threshold is missing: the value of evaluation.metric a model must reach to be "
                "blessed (a floor for auc/accuracy, a ceiling for rmse/mae)"
            )
        return cls(
            name=str(spec.get("name", "")),
            task=task,
            label=Label(**label_spec),
            features=Features(**feature_spec),
            blessing=Blessing(**blessing),
            slices=tuple(evaluation.get("slices", spec.get("slices", ()))),
            time_column=spec.get("time_column"),
            columns=dict(spec.get("columns") or {}),
            model=family,
            directory=directory,
        )

    @classmethod
    def from_json(cls, text: str) -> Problem:
        return cls.from_dict(json.loads(text))


def is_feature_name(name: str) -> bool:
    """Whether ``name`` can name a feature, and so a serving signature's input, as it is."""
    return bool(_FEATURE_NAME.fullmatch(name)) and not keyword.iskeyword(name) and name != "self"


def safe_name(header: str) -> str:
    """A header's feature name by the rule (docs/problems.md, "Column names"): lower case,
    accents dropped (ß ss, æ ae, ...), every run of other characters one '_', none at
    either end, ``col_`` before a leading digit, '_' after a Python keyword or 'self'
    (``class_``); "" when nothing is left."""
    text = "".join(_TRANSLITERATION.get(c, c) for c in header.lower())
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^a-z0-9]+", "_", text).strip("_")
    if text[:1].isdigit():
        return SAFE_PREFIX + text
    return text + "_" if text and not is_feature_name(text) else text


def feature_names(headers: Sequence[str]) -> dict[str, str]:
    """Each header's feature name, deterministic and unique: a header that already is a
    feature name keeps it (so a CSV that needed no mapping still needs none); every other
    takes ``safe_name`` (``col_<position>`` when empty), with ``_2``, ``_3``... after a
    name taken before, in header order (compared ignoring case: Transform's files are
    named after features, and a file system may not tell case apart)."""
    names: dict[str, str] = {}
    taken = {h.lower() for h in headers if is_feature_name(h)}
    for position, header in enumerate(headers, start=1):
        if is_feature_name(header):
            names[header] = header
            continue
        base = safe_name(header) or f"{SAFE_PREFIX}{position}"
        name, suffix = base, 1
        while name.lower() in taken:
            suffix += 1
            name = f"{base}_{suffix}"
        taken.add(name.lower())
        names[header] = name
    return names


def transformed_name(key: str) -> str:
    """Name of a feature after Transform (keeps raw and transformed apart in one dict)."""
    return f"{key}_xf"


def load(directory: str) -> Problem:
    """The problem whose spec is ``<directory>/problem.toml``."""
    import tomllib  # Python 3.11: only where pipelines are built, never in a component.

    path = os.path.join(directory, PROBLEM_FILE)
    if not os.path.isfile(path):
        raise ProblemError(
            f"No problem spec at {path}. Point --problem at a folder holding {PROBLEM_FILE} (data/taxi is the "
            "example), or draft one from your CSV: python -m authoring.scaffold --csv FILE --label COLUMN"
        )
    with open(path, "rb") as f:
        try:
            spec = tomllib.load(f)
        except tomllib.TOMLDecodeError as err:
            raise ProblemError(f"{path}: not valid TOML: {err}") from None
    try:
        return Problem.from_dict(spec, directory=os.path.abspath(directory))
    except (ProblemError, TypeError) as err:
        raise ProblemError(f"{path}: {err}") from None


def _no_unknown_keys(spec: Mapping[str, Any], known: set[str], prefix: str) -> None:
    if unknown := sorted(set(spec) - known):
        raise ProblemError(
            f"unknown key(s) {', '.join(prefix + k for k in unknown)}; known: {', '.join(sorted(known))}"
        )


def _validate(problem: Problem) -> None:
    """Refuses a spec that cannot work, with one line saying what to change."""
    _validate_name(problem)
    _validate_label(problem)
    _validate_feature_names(problem)
    _validate_columns(problem)
    _validate_features(problem)
    _validate_blessing(problem)
    _validate_time_column_and_slices(problem)


def _validate_name(problem: Problem) -> None:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,127}", problem.name):
        raise ProblemError(
            f"name {problem.name!r} must match [a-z0-9][a-z0-9-]{{0,127}} (it is the pipeline's default name, "
            "and Vertex AI Pipelines accepts only those)"
        )


def _validate_label(problem: Problem) -> None:
    """The label: its name, its column or expression, and what the task asks of it."""
    label = problem.label
    if not label.name:
        raise ProblemError('label.name: name the label (it names the model\'s output), e.g. name = "generous"')
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", label.name):
        raise ProblemError(f"label.name {label.name!r} must be a Python-style identifier (it names the model's output)")
    if label.expression is not None and label.column is not None:
        raise ProblemError("label: give either column or expression, not both")
    if label.expression is None and label.column is None:
        raise ProblemError("label: give the label's column (label.column), or an expression over columns")
    if label.expression is not None:
        _validate_label_expression(problem.task, label.expression)
    if problem.task == Task.BINARY and label.column is not None and label.positive is None:
        raise ProblemError(f"label.positive: say which value of '{label.column}' is the positive class")
    if problem.task != Task.BINARY and label.positive is not None:
        raise ProblemError("label.positive applies to binary problems only")
    if problem.task == Task.MULTICLASS and len(label.classes) < 3:
        raise ProblemError(
            "label.classes: a multi-class label lists its classes (at least 3; with 2, make it binary with "
            "label.positive)"
        )
    if problem.task != Task.MULTICLASS and label.classes:
        raise ProblemError("label.classes applies to multi-class problems only")


def _validate_label_expression(task: Task, expression: str) -> None:
    """A binary label's expression is a comparison, a regression target's arithmetic."""
    comparison = _is_comparison(expression)
    if task == Task.BINARY and not comparison:
        raise ProblemError(
            f"label.expression {expression!r}: a binary label needs a comparison, e.g. 'tip > 0.2 * amount'"
        )
    if task == Task.REGRESSION and comparison:
        raise ProblemError(f"label.expression {expression!r}: a regression target is arithmetic, not a comparison")
    if task == Task.MULTICLASS:
        raise ProblemError("label.expression: a multi-class label is a column (label.column) with label.classes")


def _validate_feature_names(problem: Problem) -> None:
    """Every column the spec names is a name TensorFlow takes for a serving input."""
    features = problem.features
    for key in features.inputs + tuple(features.unused) + problem.slices + problem.label.sources:
        if not is_feature_name(key):
            suggested = feature_names([key])[key]
            raise ProblemError(
                f"column {key!r} cannot be a feature name: those are letters, digits and '_', starting with a "
                "letter, and no Python keyword (TensorFlow's rule for the serving signature's inputs). Keep the CSV's "
                f'header and name the feature in the spec: add [columns] {suggested} = "{key}" and write '
                f"{suggested} where the spec says {key!r}"
            )


def _validate_features(problem: Problem) -> None:
    """Each column listed once; some model input; the label neither an input's name nor
    computed from inputs alone; crosses, buckets and integer ranges well-formed."""
    label, features = problem.label, problem.features
    seen: dict[str, str] = {}
    for kind in ("log_numeric", "numeric", "categorical", "integer_categorical", "bucketized", "dates", "unused"):
        for key in getattr(features, kind):
            if key in seen:
                raise ProblemError(f"column '{key}' is listed twice: in features.{seen[key]} and features.{kind}")
            seen[key] = kind
    if not features.inputs:
        raise ProblemError("features: no model inputs; list at least one column under features")
    _validate_dates(problem)
    if label.name in features.inputs or transformed_name(label.name) in map(transformed_name, features.inputs):
        raise ProblemError(f"label.name '{label.name}' is also a feature's name: rename the label's output")
    if not problem.label_only_columns:
        raise ProblemError(
            f"{label.describe()} is computed only from model inputs, so the model would learn the formula: "
            "list the label's column under features.unused (it is unknown at serving time)"
        )
    crossable = set(features.categories) | set(features.numbers)
    for pair in features.crosses:
        if len(pair) != 2 or not set(pair) <= crossable:
            raise ProblemError(f"features.crosses {list(pair)}: a cross is two model inputs (or date parts)")
    if features.bucketized and features.num_buckets < 2:
        raise ProblemError(f"features.num_buckets must be at least 2, got {features.num_buckets}")
    for key, largest in features.integer_categorical.items():
        if not isinstance(largest, int) or largest < 0:
            raise ProblemError(f"features.integer_categorical.{key} = {largest!r}: give the largest valid value")
    _validate_vocab_min_count(features)


def _validate_dates(problem: Problem) -> None:
    """Each date format parses a date (year, month, day once each; an hour with minutes,
    seconds after them), and no date part is named as another column."""
    for key, form in problem.features.dates.items():
        fix = (
            f"features.dates.{key} = {form!r}: write the format with %Y, %m and %d once each, optionally %H:%M or "
            '%H:%M:%S, anything else as it stands in the cells, e.g. "%Y-%m-%d", "%m/%d/%Y %H:%M"'
        )
        if not isinstance(form, str):
            raise ProblemError(fix)
        try:
            date_pattern(form)
        except ValueError as err:
            raise ProblemError(f"{fix} ({err})") from None
        fields = date_fields(form)
        times = [f for f in fields if f in "HMS"]
        if sorted(f for f in fields if f in "Ymd") != ["Y", "d", "m"] or times not in ([], ["H", "M"], ["H", "M", "S"]):
            raise ProblemError(fix)
        if taken := sorted(set(problem.features.date_parts[key]) & set(problem.raw_columns)):
            raise ProblemError(
                f"features.dates.{key}: its part(s) {', '.join(taken)} are named as column(s) of the spec too; rename "
                f"the column(s) ([columns] maps a feature name to a header)"
            )


def _validate_vocab_min_count(features: Features) -> None:
    """``vocab_min_count``: a count of at least 1 for a categorical column."""
    for key, count in features.vocab_min_count.items():
        if key not in features.categorical:
            raise ProblemError(
                f"features.vocab_min_count.{key}: '{key}' is not under features.categorical (only a vocabulary has "
                "values too rare to keep)"
            )
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ProblemError(
                f"features.vocab_min_count.{key} = {count!r}: give the fewest rows of the training data a value needs "
                "to keep a weight of its own, a whole number of at least 1, e.g. 10"
            )


def _validate_blessing(problem: Problem) -> None:
    """The blessing metric fits the task, its threshold and tolerance their ranges."""
    blessing = problem.blessing
    if blessing.metric not in BLESSING_METRICS[problem.task]:
        raise ProblemError(
            f"evaluation.metric {blessing.metric!r} does not apply to {problem.task.value} problems: use "
            f"one of {', '.join(BLESSING_METRICS[problem.task])}"
        )
    if problem.higher_is_better and not 0.0 <= blessing.threshold <= 1.0:
        raise ProblemError(f"evaluation.threshold must be in [0, 1] for {blessing.metric}")
    if blessing.max_regression < 0:
        raise ProblemError("evaluation.max_regression must be >= 0")


def _validate_time_column_and_slices(problem: Problem) -> None:
    """The time column and the Evaluator's slices are columns the spec names."""
    if problem.time_column is not None and problem.time_column not in problem.raw_columns:
        raise ProblemError(f"time_column '{problem.time_column}' is not a column the spec names")
    for key in problem.slices:
        if key not in problem.raw_columns:
            raise ProblemError(f"evaluation.slices: '{key}' is not a column the spec names")


def _validate_columns(problem: Problem) -> None:
    """``columns``: feature names to distinct headers, none of them another column's name."""
    headers: dict[str, str] = {}
    named = set(problem.raw_columns)
    for feature, header in problem.columns.items():
        if not is_feature_name(feature):
            raise ProblemError(
                f"columns.{feature}: a feature name is letters, digits and '_', starting with a letter, and no "
                "Python keyword; "
                f"e.g. {feature_names([feature])[feature]}"
            )
        if not isinstance(header, str) or not header or "," in header or "\n" in header:
            raise ProblemError(
                f"columns.{feature} = {header!r}: give the column's name as the CSV header has it (text, no comma)"
            )
        if header in headers:
            raise ProblemError(f"columns: {headers[header]} and {feature} both name the header {header!r}")
        if header != feature and header in named:
            raise ProblemError(
                f"columns.{feature} = {header!r}: '{header}' is also a column the spec names, so the header "
                "would be read as two columns; rename one"
            )
        headers[header] = feature
