"""The Transform ``preprocessing_fn``: every useful column, missing values explicit.

Missing values: numbers take the mean of the present values, strings a ``__MISSING__``
vocabulary entry, coordinates a bucket of their own, integer categories index 0. A date
(text in the spec's format) becomes numbers, its parts, computed with TensorFlow's string
and integer ops (they run in the serving graph too); a cell that does not parse is missing.
Columns that are sometimes empty in the CSV reach Transform as ``SparseTensor`` (the
schema marks them optional); columns always present arrive dense. ``_dense`` handles
both, so the same code serves the default data, a user's CSV and a tiny test batch.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from models.problem import (
    MISSING_TOKEN,
    Problem,
    Task,
    date_fields,
    date_pattern,
    evaluate_expression,
    parts_of,
    transformed_name,
)

# The key of Transform's custom_config (and the Trainer's) that carries the problem spec.
PROBLEM_KEY = "problem"
# Days in each month of a common year; the days from 0000-03-01 to 1970-01-01 (Hinnant's
# ``days_from_civil``, which counts years from March so that February's leap day comes last).
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DAYS_TO_1970 = 719_468
_DAYS_PER_400_YEARS = 146_097
# A cell that does not parse is read as this date (then marked missing).
_PLACEHOLDER = {"Y": "1970", "m": "01", "d": "01", "H": "00", "M": "00", "S": "00"}


def _dense(x: tf.Tensor | tf.SparseTensor | tf.RaggedTensor, default) -> tf.Tensor:
    """Returns ``x`` as a dense [batch] tensor, ``default`` where the value is missing."""
    if isinstance(x, tf.RaggedTensor):
        x = x.to_sparse()
    if isinstance(x, tf.SparseTensor):
        x = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, x.values, tf.concat([_batch_size(x), [1]], 0)),
            default_value=tf.cast(default, x.dtype),
        )
    return tf.reshape(x, [-1])


# Transform traces preprocessing_fn five times per run, and the Trainer and the
# Evaluator run its graph on every batch: the helpers below build few graph operations
# (tf.slice rather than Python indexing, which adds constants and a strided slice).
def _batch_size(x: tf.SparseTensor) -> tf.Tensor:
    """The batch size of a [batch, ...] sparse tensor, as a shape [1] tensor."""
    return tf.slice(x.dense_shape, [0], [1])


def _is_missing(x: tf.Tensor | tf.SparseTensor | tf.RaggedTensor) -> tf.Tensor:
    """A [batch] bool tensor, True where the raw value is absent."""
    if isinstance(x, tf.RaggedTensor):
        return tf.equal(x.row_lengths(), 0)
    if isinstance(x, tf.SparseTensor):
        # Values per row: a scatter-add of ones at each value's row index.
        rows = tf.slice(x.indices, [0, 0], [-1, 1])
        counts = tf.scatter_nd(rows, tf.fill(tf.shape(x.values), 1), _batch_size(x))
        return tf.equal(counts, 0)
    return tf.zeros_like(tf.reshape(x, [-1]), tf.bool)


def _as_column(x: tf.Tensor) -> tf.Tensor:
    return tf.reshape(x, [-1, 1])


def _to_float(x) -> tf.Tensor:
    return tf.cast(_dense(x, 0), tf.float32)


def _values(x) -> tf.Tensor:
    """The values present, as a flat tensor (for analyzers that must skip missing ones)."""
    if isinstance(x, tf.RaggedTensor):
        return x.flat_values
    if isinstance(x, tf.SparseTensor):
        return x.values
    return tf.reshape(x, [-1])


def _number(x, transform) -> tuple[tf.Tensor, tf.Tensor]:
    """A number column as ``z_scores`` takes it: ``transform`` of its values (float64), and
    where it is missing."""
    return transform(tf.cast(_dense(x, 0), tf.float64)), _is_missing(x)


def _log1p(v: tf.Tensor) -> tf.Tensor:
    return tf.math.log1p(tf.maximum(v, tf.zeros_like(v)))


def z_scores_imputed(columns: dict[str, tuple]) -> dict[str, tf.Tensor]:
    """For each ``name: (x, transform)``: ``z_scores`` of ``transform(x)`` (float64), missing
    where ``x`` has no value."""
    return z_scores({name: _number(x, transform) for name, (x, transform) in columns.items()})


def z_scores(columns: dict[str, tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
    """For each ``name: (values, missing)`` ([batch] float64 and bool): the z-score of the
    values where a missing value stands for the mean of the present ones (over the whole
    data set), so it lands at 0, not far below. float32 results, computed in float64
    (timestamps need it).

    Equal to imputing with ``tft.mean`` then ``tft.scale_to_z_score``, which takes two
    analysis passes per column (the variance needs the mean first). Here one analyzer
    over all columns computes, per column, the fraction present and the first two moments
    of the present values; imputing the mean keeps the mean and scales the variance by
    the fraction present. Every analyzer costs Transform a fixed set of Beam stages, so
    one instead of two per column matters even on small data.
    """
    missing, values, parts = {}, {}, []
    for name, (value, absent) in columns.items():
        missing[name], values[name] = absent, value
        present = 1.0 - tf.cast(absent, tf.float64)
        value = values[name] * present
        parts += [present, value, value * value]
    # Per column: E[present], E[value * present], E[value^2 * present].
    moments = tft.mean(tf.stack(parts, axis=1), reduce_instance_dims=False)
    moments = tf.unstack(moments, num=len(parts))
    result = {}
    for i, name in enumerate(columns):
        fraction, first, second = moments[3 * i : 3 * i + 3]
        mean = tf.math.divide_no_nan(first, fraction)
        variance = tf.maximum(tf.math.divide_no_nan(second, fraction) - mean * mean, 0.0)
        deviation = tf.where(missing[name], mean, values[name]) - mean
        std = tf.sqrt(variance * fraction)
        # As tft.scale_to_z_score: a constant column is only centred.
        result[name] = tf.cast(tf.where(std > 0, tf.math.divide_no_nan(deviation, std), deviation), tf.float32)
    return result


def quantile_buckets(columns: dict[str, tf.Tensor | tf.SparseTensor], num_buckets: int) -> dict[str, tf.Tensor]:
    """For each column, its quantile bucket (0 .. ``num_buckets - 1``) over the present
    values of the whole data set, and ``num_buckets`` (a bucket of its own) where missing.
    int64 results.

    Equal to ``tft.bucketize`` of each column's present values, but one quantiles analyzer
    computes every column's boundaries (``elementwise``: one sketch per column). Missing
    values enter it as NaN, which the quantiles analyzer ignores. Like the moments above,
    one analyzer instead of one per column saves Transform its fixed per-analyzer stages.
    """
    missing = {name: _is_missing(x) for name, x in columns.items()}
    nan = tf.constant(float("nan"), tf.float32)
    stacked = tf.stack(
        [tf.where(missing[name], nan, tf.cast(_dense(x, 0), tf.float32)) for name, x in columns.items()], axis=1
    )
    buckets = tft.bucketize(stacked, num_buckets, elementwise=True)
    missing_bucket = tf.constant(num_buckets, tf.int64)
    per_column = tf.unstack(tf.cast(buckets, tf.int64), num=len(columns), axis=1)
    return {
        name: tf.where(missing[name], missing_bucket, column) for name, column in zip(columns, per_column, strict=True)
    }


def _to_string(x) -> tf.Tensor:
    """Strings as they are; numbers (codes such as census tracts) as integer strings.
    Missing: a token."""
    if x.dtype == tf.string:
        return _dense(x, MISSING_TOKEN)
    as_text = tf.strings.as_string(tf.cast(_dense(x, 0), tf.int64))
    return tf.where(_is_missing(x), MISSING_TOKEN, as_text)


def _days_from_civil(year: tf.Tensor, month: tf.Tensor, day: tf.Tensor) -> tf.Tensor:
    """Days from 1970-01-01 to a date of the proleptic Gregorian calendar (int64 tensors;
    Howard Hinnant's ``days_from_civil``)."""
    year = year - tf.cast(month <= 2, tf.int64)
    era = tf.math.floordiv(year, 400)
    year_of_era = year - era * 400
    day_of_year = (153 * tf.math.floormod(month + 9, 12) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * _DAYS_PER_400_YEARS + day_of_era - _DAYS_TO_1970


def _month_length(year: tf.Tensor, month: tf.Tensor) -> tf.Tensor:
    """Days in the month (``month`` 1-12) of the year."""
    leap = tf.logical_and(tf.equal(year % 4, 0), tf.not_equal(year % 100, 0)) | tf.equal(year % 400, 0)
    extra = tf.cast(tf.logical_and(leap, tf.equal(month, 2)), tf.int64)
    return tf.gather(tf.constant(_MONTH_DAYS, tf.int64), month - 1) + extra


def date_parts(x: tf.Tensor | tf.SparseTensor | tf.RaggedTensor, form: str) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """A date column's parts (``models.problem.parts_of(form)``: days since 1970-01-01 with
    the time of day as a fraction, year, month, weekday with Monday 0, hour), each a [batch]
    float64 tensor, and where the date is missing: no value, a cell that is not ``form``
    (``models.problem.date_pattern``), or a day past its month's end. No analyzer: the
    parts of one row are the row's alone."""
    pattern, fields = date_pattern(form), date_fields(form)
    text = _to_string(x)
    parsed = tf.strings.regex_full_match(text, pattern)
    placeholder = form
    for field in fields:
        placeholder = placeholder.replace(f"%{field}", _PLACEHOLDER[field])
    text = tf.where(parsed, text, placeholder)
    number = {
        field: tf.strings.to_number(tf.strings.regex_replace(text, f"^{pattern}$", f"\\{index}"), tf.int64)
        for index, field in enumerate(fields, start=1)
    }
    year, month, day = number["Y"], number["m"], number["d"]
    missing = _is_missing(x) | tf.logical_not(parsed) | (day > _month_length(year, month))
    days = _days_from_civil(year, month, day)
    seconds = number.get("H", 0) * 3600 + number.get("M", 0) * 60 + number.get("S", 0)
    parts = {
        "days": tf.cast(days, tf.float64) + tf.cast(seconds, tf.float64) / 86_400.0,
        "year": year,
        "month": month,
        "weekday": tf.math.floormod(days + 3, 7),  # 1970-01-01 was a Thursday
        "hour": number.get("H"),
    }
    return {part: tf.cast(parts[part], tf.float64) for part in parts_of(form)}, missing


def problem_of(custom_config: dict | None) -> Problem:
    """The problem spec the pipeline put into a component's ``custom_config``."""
    if not custom_config or PROBLEM_KEY not in custom_config:
        raise ValueError(
            f"custom_config has no {PROBLEM_KEY!r}: the pipeline passes the problem spec to Transform and the "
            "Trainer (pipeline/pipeline.py); build the component with create_pipeline, or pass "
            f"custom_config={{{PROBLEM_KEY!r}: problem.to_json()}}"
        )
    spec = custom_config[PROBLEM_KEY]
    return spec if isinstance(spec, Problem) else Problem.from_json(spec)


def preprocessing_fn(inputs: dict, custom_config: dict | None = None) -> dict:
    """Maps raw columns to model-ready features (``<name>_xf``), each of shape [batch, 1],
    as the problem spec in ``custom_config`` says (TFX's Transform passes it)."""
    problem = problem_of(custom_config)
    spec = problem.features
    outputs = {}
    numbers = {key: _number(inputs[key], _log1p) for key in spec.log_numeric}
    numbers.update({key: _number(inputs[key], tf.identity) for key in spec.numeric})
    for key, form in spec.dates.items():
        parts, missing = date_parts(inputs[key], form)
        named = zip(spec.date_parts[key], parts.values(), strict=True)
        numbers.update({name: (value, missing) for name, value in named})
    if numbers:
        for key, value in z_scores(numbers).items():
            outputs[transformed_name(key)] = _as_column(value)
    for key in spec.categorical:
        outputs[transformed_name(key)] = _as_column(
            tft.compute_and_apply_vocabulary(
                _to_string(inputs[key]),
                top_k=spec.vocab_top_k,
                frequency_threshold=spec.vocab_min_count.get(key),
                num_oov_buckets=spec.vocab_oov_buckets,
                vocab_filename=key,
            )
        )
    for key, max_value in spec.integer_categorical.items():
        raw = inputs[key]
        index = tf.clip_by_value(tf.cast(_dense(raw, 0), tf.int64), 0, max_value) + 1
        index = tf.where(_is_missing(raw), tf.constant(0, tf.int64), index)
        outputs[transformed_name(key)] = _as_column(index)
    if spec.bucketized:
        bucketized = {key: inputs[key] for key in spec.bucketized}
        for key, value in quantile_buckets(bucketized, spec.num_buckets).items():
            outputs[transformed_name(key)] = _as_column(value)

    outputs.update(label(inputs, problem))
    return outputs


def label(inputs: dict, problem: Problem) -> dict:
    """The label from raw columns, ``{<label>_xf: [batch, 1]}``: int64 0/1 (binary), the
    class's index in ``label.classes`` (multi-class; -1 for a value not listed, which
    AnomalyGate refuses before training), float32 (regression). Needs no analyzer, so the
    exported model also computes it alone for the Evaluator (``models/signatures.py``)."""
    spec = problem.label
    if spec.expression is not None:
        # Missing source values count as 0.
        value = evaluate_expression(spec.expression, {key: _to_float(inputs[key]) for key in spec.sources})
        target = tf.cast(value, tf.int64) if problem.task == Task.BINARY else tf.cast(value, tf.float32)
    elif problem.task == Task.BINARY:
        raw = inputs[spec.column]
        if raw.dtype == tf.string:
            target = tf.cast(tf.equal(_dense(raw, ""), spec.positive), tf.int64)
        else:
            target = tf.cast(tf.equal(_to_float(raw), float(spec.positive)), tf.int64)
    elif problem.task == Task.MULTICLASS:
        text = _to_string(inputs[spec.column])
        matches = tf.stack([tf.equal(text, name) for name in spec.classes], axis=1)
        target = tf.where(tf.reduce_any(matches, axis=1), tf.argmax(tf.cast(matches, tf.int64), axis=1), -1)
    else:
        target = _to_float(inputs[spec.column])
    return {problem.label_key: _as_column(target)}
