"""How far the embedded data drifts from itself, and how far planted changes move it: the
evidence behind the contract's drift thresholds (``python -m bench.drift``).

Each case compares two CSV files as DriftGate compares two runs (statistics as
CsvExampleGen encodes the rows, ``components.drift.measure`` with the contract), and the
table prints every column's distance, a star where it is above the contract's threshold.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR

Case = Callable[[pd.DataFrame, np.random.Generator], tuple[pd.DataFrame, pd.DataFrame]]


def _halves(frame: pd.DataFrame, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    order = rng.permutation(len(frame))
    return frame.iloc[order[: len(frame) // 2]], frame.iloc[order[len(frame) // 2 :]]


def _changed(change: Callable[[pd.DataFrame, np.random.Generator], pd.DataFrame]) -> Case:
    """The baseline is one random half, the new data the other half changed."""

    def case(frame, rng):
        baseline, new = _halves(frame, rng)
        return baseline, change(new.copy(), rng)

    return case


def _years(frame, rng):
    cut = frame["trip_start_timestamp"].median()
    return frame[frame["trip_start_timestamp"] < cut], frame[frame["trip_start_timestamp"] >= cut]


def _scaled(column: str, factor: float):
    def change(frame, rng):
        frame[column] = frame[column] * factor
        return frame

    return change


def _more_cash(frame, rng):
    frame.loc[rng.random(len(frame)) < 0.3, "payment_type"] = "Cash"
    return frame


CASES: dict[str, Case] = {
    "random halves": _halves,
    "2013-14 vs 2015-16": _years,
    "fare +20%": _changed(_scaled("fare", 1.2)),
    "fares in cents": _changed(_scaled("fare", 100)),
    "miles in km": _changed(_scaled("trip_miles", 1.609)),
    "30% more cash": _changed(_more_cash),
    "no cash": _changed(lambda frame, rng: frame[frame["payment_type"] != "Cash"]),
}


def measure_case(baseline: pd.DataFrame, new: pd.DataFrame, schema, scratch: str) -> dict[str, tuple[float, float]]:
    """Column -> (distance, threshold) between two frames, as DriftGate measures two runs."""
    from components import drift
    from pipeline.contract import csv_statistics

    stats = []
    for name, frame in (("baseline", baseline), ("new", new)):
        path = os.path.join(scratch, f"{name}.csv")
        frame.to_csv(path, index=False)
        stats.append(csv_statistics([path]))
    found, _ = drift.measure(stats[1], stats[0], schema, "all")
    return {d.feature: (d.value, d.threshold) for d in found}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=DEFAULT_PROBLEM_DIR)
    parser.add_argument("--contract", help=f"The data contract (default: {CONTRACT_FILE} in --data-root).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES), help="Which cases to measure.")
    args = parser.parse_args(argv)
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    contract = args.contract or os.path.join(args.data_root, CONTRACT_FILE)
    schema = io_utils.parse_pbtxt_file(contract, schema_pb2.Schema())
    frame = pd.concat(pd.read_csv(p) for p in sorted(glob.glob(os.path.join(args.data_root, "*.csv"))))
    results = {}
    with tempfile.TemporaryDirectory(prefix="drift-") as scratch:
        for name in args.cases:
            baseline, new = CASES[name](frame, np.random.default_rng(args.seed))
            results[name] = measure_case(baseline, new, schema, scratch)
    columns = sorted({c for r in results.values() for c in r})
    print("| column (threshold) | " + " | ".join(args.cases) + " |")
    print("|---|" + "---|" * len(args.cases))
    for column in columns:
        threshold = next(r[column][1] for r in results.values() if column in r)
        cells = []
        for name in args.cases:
            value = results[name].get(column, (float("nan"), threshold))[0]
            cells.append(f"{value:.3f}{' *' if value > threshold else ''}")
        print(f"| {column} ({threshold:g}) | " + " | ".join(cells) + " |")
    print("\n* above the contract's threshold: DriftGate stops the run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
