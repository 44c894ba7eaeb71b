"""References for a problem's model, computed on the rows of a run's own split (ExampleGen's
Split-train and Split-eval), so every model is judged on exactly the rows the Evaluator judged
ours on: the trivial answer, scikit-learn's default gradient-boosted trees (native
categories, one core), and optionally a linear model; scored by the spec's blessing metric.
Used by ``python -m bench.quality`` and by tests/problems/test_shipped_problems.py.
"""

from __future__ import annotations

import glob
import math
import os
import time
from typing import Any

import numpy as np

from models.problem import Problem, Task

# HistGradientBoosting's limit on the categories of a categorical feature (its max_bins).
MAX_CATEGORIES = 255
TRIVIAL, BOOSTED_TREES, LINEAR, BEST = "trivial", "gradient-boosted trees", "linear", "scikit-learn"


def _files(examples_uri: str, name: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{name}", "*.gz")))
    assert files, f"no Split-{name} under {examples_uri}"
    return files


def split(examples_uri: str, name: str) -> list:
    """ExampleGen's rows of one split, as the raw tf.Examples it wrote (gzipped TFRecords)."""
    import tensorflow as tf

    records = tf.data.TFRecordDataset(_files(examples_uri, name), compression_type="GZIP").as_numpy_iterator()
    return [tf.train.Example.FromString(record) for record in records]


def read_split(examples_uri: str, name: str, batch: int = 16384):
    """The same rows as a pandas frame of cells (what ``cells`` makes of ``split``'s
    Examples), decoded a batch at a time by tfx_bsl's C++ decoder: seconds for the hundreds
    of thousands of rows that take minutes as Examples."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    decoder = example_coder.ExamplesToRecordBatchDecoder()
    records = tf.data.TFRecordDataset(_files(examples_uri, name), compression_type="GZIP").batch(batch)
    tables = [pa.Table.from_batches([decoder.DecodeBatch(list(b))]) for b in records.as_numpy_iterator()]
    table = pa.concat_tables(tables, promote=True)
    columns = {}
    for key in table.column_names:
        column = table.column(key).combine_chunks()
        if pa.types.is_null(column.type):
            columns[key] = pd.Series([None] * len(column), dtype=object)
            continue
        present = pc.greater(pc.list_value_length(column), 0)
        first = pc.list_element(pc.if_else(present, column, pa.scalar(None, column.type)), 0)
        if pa.types.is_binary(first.type) or pa.types.is_large_binary(first.type):
            first = first.cast(pa.large_string())
        columns[key] = first.to_pandas()
    return pd.DataFrame(columns)


def value(example, key: str):
    """A column's value in a tf.Example (text decoded); None where the cell was empty."""
    if key not in example.features.feature:
        return None
    feature = example.features.feature[key]
    kind = feature.WhichOneof("kind")
    values = list(getattr(feature, kind).value) if kind else []
    if not values:
        return None
    return values[0].decode() if isinstance(values[0], bytes) else values[0]


def cells(rows):
    """Rows as a pandas frame of cells, one column per feature (None where empty): ``rows``
    is such a frame already (``read_split``), or a list of tf.Examples (``split``)."""
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        return rows
    keys = sorted({key for example in rows for key in example.features.feature})
    return pd.DataFrame([{k: value(e, k) for k in keys} for e in rows], columns=keys)


def inputs(problem: Problem) -> list[str]:
    """The spec's model inputs, in its order."""
    features = problem.features
    return list(features.dense + features.bucketized + features.categorical + tuple(features.integer_categorical))


def frame(rows, problem: Problem):
    """The model inputs of ``rows`` (``cells``) as a pandas frame typed as pandas reads a
    CSV: a column whose present values are all numbers is numeric, any other is text (NaN
    where empty)."""
    import pandas as pd

    rows = cells(rows)
    table = pd.DataFrame(index=rows.index)
    for column in inputs(problem):
        cells_ = rows[column] if column in rows else pd.Series(np.nan, index=rows.index)
        present = cells_.dropna()
        if pd.api.types.is_numeric_dtype(cells_) or all(isinstance(v, (int, float)) for v in present):
            table[column] = pd.to_numeric(cells_).astype(float)
        else:
            table[column] = cells_.astype(object).where(cells_.notna(), np.nan)
    for column, form in problem.features.dates.items():
        cells_ = rows[column] if column in rows else pd.Series(np.nan, index=rows.index)
        for name, values in date_numbers(cells_, form).items():
            table[f"{column}_{name}"] = values
    return table


def date_numbers(cells_, form: str) -> dict:
    """A date column's numbers as the network's Transform makes them (``models/preprocessing.py``):
    days since 1970-01-01, year, month, weekday (Monday 0), and the hour where the format has
    one; NaN where a cell is empty or does not parse."""
    import pandas as pd

    from models.problem import parts_of

    when = pd.to_datetime(cells_.astype(object).where(cells_.notna(), None), format=form, errors="coerce")
    numbers = {
        "days": (when - pd.Timestamp("1970-01-01")) / pd.Timedelta(days=1),
        "year": when.dt.year,
        "month": when.dt.month,
        "weekday": when.dt.weekday,
        "hour": when.dt.hour,
    }
    return {part: numbers[part].astype(float) for part in parts_of(form)}


def categorical_columns(table) -> list[str]:
    """The text columns of ``frame``'s table."""
    return [c for c in table.columns if table[c].dtype == object]


def _is_positive(cell, positive: str) -> bool:
    if isinstance(cell, (int, float, np.number)):
        try:
            return float(cell) == float(positive)
        except ValueError:
            return False
    return str(cell) == positive


def labels(rows, problem: Problem) -> np.ndarray:
    """The label of each row (``cells``): the class's name (multi-class), 1.0 for the
    positive class and 0.0 otherwise (binary), the number (regression)."""
    assert problem.label.column and not problem.label.expression, "a label read from a column"
    rows = cells(rows)
    column = problem.label.column
    values = rows[column].tolist() if column in rows else [None] * len(rows)
    assert not any(v is None or v != v for v in values), f"rows without {problem.label.describe()}"
    if problem.task == Task.BINARY:
        return np.array([float(_is_positive(v, problem.label.positive)) for v in values])
    if problem.task == Task.MULTICLASS:
        # As text (the spec's class names): scikit-learn takes an object array of strings as classes.
        return np.array([str(v) for v in values], dtype=object)
    return np.array(values, dtype=float)


def score(problem: Problem, truth: np.ndarray, predictions) -> float:
    """The problem's blessing metric of ``predictions``: the positive class's scores (AUC),
    classes (accuracy), values (RMSE, MAE)."""
    metric = problem.blessing.metric
    if metric == "auc":
        from sklearn.metrics import roc_auc_score

        return float(roc_auc_score(truth, np.asarray(predictions, dtype=float).reshape(-1)))
    if metric == "accuracy":
        return float(np.mean(np.asarray(predictions, dtype=object).reshape(-1) == truth))
    errors = np.asarray(predictions, dtype=float).reshape(-1) - truth
    if metric == "rmse":
        return math.sqrt(float(np.mean(errors**2)))
    if metric == "mae":
        return float(np.mean(np.abs(errors)))
    raise AssertionError(f"no reference for the metric {metric!r}")


def trivial(problem: Problem, y_train: np.ndarray, rows: int) -> list:
    """The trivial answer for ``rows`` rows, learnt from the train split's labels: the
    commonest class (binary: its share as a constant score where the metric is AUC, the
    commonest class where it is accuracy), or the mean."""
    if problem.task == Task.MULTICLASS:
        values, counts = np.unique(y_train, return_counts=True)
        return [values[np.argmax(counts)]] * rows
    if problem.task == Task.BINARY and problem.blessing.metric == "accuracy":
        return [float(np.mean(y_train) > 0.5)] * rows
    return [float(np.mean(y_train))] * rows


def boosted_trees(problem: Problem, categorical: list[str]):
    """Default HistGradientBoosting (``random_state=0``), as a user writing ten lines would fit
    it: categories native (``OrdinalEncoder`` codes and ``categorical_features``, at most
    ``MAX_CATEGORIES`` codes a column, the rarer values sharing one), missing values left to HGB."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    encode = ColumnTransformer(
        [
            (
                "categories",
                OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan, max_categories=MAX_CATEGORIES),
                categorical,
            )
        ],
        remainder="passthrough",
    )
    # The ColumnTransformer puts the encoded categories first.
    model = HistGradientBoostingRegressor if problem.task == Task.REGRESSION else HistGradientBoostingClassifier
    return make_pipeline(encode, model(categorical_features=list(range(len(categorical))) or None, random_state=0))


def linear(problem: Problem, numeric: list[str], categorical: list[str]):
    """Logistic regression or ridge on imputed standardised numbers and one-hot categories."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    encode = ColumnTransformer(
        [
            ("numbers", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
            (
                "categories",
                make_pipeline(
                    SimpleImputer(strategy="constant", fill_value="missing"),
                    OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                ),
                categorical,
            ),
        ]
    )
    model = Ridge() if problem.task == Task.REGRESSION else LogisticRegression(max_iter=2000)
    return make_pipeline(encode, model)


def _predict(problem: Problem, fitted, x) -> Any:
    """What ``score`` takes from a fitted scikit-learn model."""
    if problem.blessing.metric == "auc":
        classes = list(fitted.classes_)
        return fitted.predict_proba(x)[:, classes.index(1.0)]
    return fitted.predict(x)


def references(problem: Problem, train, eval_, with_linear: bool = False) -> dict[str, float]:
    """The blessing metric on the eval split of the trivial answer and the boosted trees
    (and, ``with_linear``, the linear model, and under ``BEST`` the better learnt one), each
    fit on the train split; ``fit_s``: the boosted trees' fit time in seconds. ``train`` and
    ``eval_``: the splits' rows (``cells``)."""
    train, eval_ = cells(train), cells(eval_)
    x_train, x_eval = frame(train, problem), frame(eval_, problem)
    y_train, y_eval = labels(train, problem), labels(eval_, problem)
    # A column text in either split is text in both (it is numbers in the other only when empty there).
    categorical = [c for c in x_train.columns if c in categorical_columns(x_train) + categorical_columns(x_eval)]
    numeric = [c for c in x_train.columns if c not in categorical]
    for table in (x_train, x_eval):
        table[categorical] = table[categorical].astype(object)
    scores = {TRIVIAL: score(problem, y_eval, trivial(problem, y_train, len(y_eval)))}
    from threadpoolctl import threadpool_limits

    # One OpenMP thread: with two, libgomp's spin-waiting made the fit 10 to 60 times slower whenever
    # another process used the cores.
    with threadpool_limits(limits=1, user_api="openmp"):
        started = time.perf_counter()
        fitted = boosted_trees(problem, categorical).fit(x_train[categorical + numeric], y_train)
        scores["fit_s"] = time.perf_counter() - started
        scores[BOOSTED_TREES] = score(problem, y_eval, _predict(problem, fitted, x_eval[categorical + numeric]))
    if with_linear:
        fitted = linear(problem, numeric, categorical).fit(x_train, y_train)
        scores[LINEAR] = score(problem, y_eval, _predict(problem, fitted, x_eval))
        learnt = [scores[BOOSTED_TREES], scores[LINEAR]]
        scores[BEST] = max(learnt) if problem.higher_is_better else min(learnt)
    return scores
