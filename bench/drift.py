"""How far the embedded data drifts from itself, and how far planted changes move it: the
evidence behind the contract's drift thresholds (``python -m bench.drift``; docs/drift.md).

Each case is compared as DriftGate compares two runs; ``--sizes`` measures the same at the
sizes DriftGate compares when data arrives in spans.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR, PipelineConfig

Case = Callable[[pd.DataFrame, np.random.Generator], tuple[pd.DataFrame, pd.DataFrame]]
# Column -> distances measured (one per repeat).
Distances = dict[str, list[float]]


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
    time = pd.to_numeric(frame["trip_start_timestamp"])
    return frame[time < time.median()], frame[time >= time.median()]


def _scaled(column: str, factor: float):
    def change(frame, rng):
        frame[column] = pd.to_numeric(frame[column]) * factor
        return frame

    return change


def _more_cash(frame, rng):
    frame.loc[rng.random(len(frame)) < 0.3, "payment_type"] = "Cash"
    return frame


def _no_cash(frame, rng=None):
    return frame[frame["payment_type"] != "Cash"]


CASES: dict[str, Case] = {
    "random halves": _halves,
    "2013-14 vs 2015-16": _years,
    "fare +20%": _changed(_scaled("fare", 1.2)),
    "fares in cents": _changed(_scaled("fare", 100)),
    "miles in km": _changed(_scaled("trip_miles", 1.609)),
    "30% more cash": _changed(_more_cash),
    "no cash": _changed(_no_cash),
}

# Span mode (--sizes). The sizes DriftGate compares with the taxi data in quarterly spans:
# the new span's eval split holds a third of a quarter (about 300-460 rows in 2013-15, 70 in
# 2016), the champion's training split two thirds of its window of up to four quarters
# (about 600 rows after the first quarter, 3,100 once the window is full).
EVAL_SIZES = (70, 100, 300, 450)
BASELINE_SIZES = (600, 2700)
EVAL_SHARE = PipelineConfig.eval_buckets / (PipelineConfig.train_buckets + PipelineConfig.eval_buckets)
MONTHS_PER_SPAN = 3
# The planted faults at span sizes: each changes the new data's rows (before the sample is
# taken, so the sample keeps its size) and must stop the run on its column.
FAULTS: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], str]] = {
    "fares in cents": (lambda rows: _scaled("fare", 100)(rows.copy(), None), "fare"),
    "no cash": (_no_cash, "payment_type"),
}
NOISE = "noise"


def read_rows(data_root: str) -> pd.DataFrame:
    """The rows of the CSV files in ``data_root``, every cell as its text (written back as it
    was read: read as numbers, 11-digit census tracts would come back as floats, which
    CsvExampleGen reads as float32, rounded to 1,024)."""
    paths = sorted(glob.glob(os.path.join(data_root, "*.csv")))
    return pd.concat([pd.read_csv(p, dtype=str, keep_default_na=False) for p in paths], ignore_index=True)


def statistics(frame: pd.DataFrame, scratch: str):
    """TFDV statistics of the rows as CsvExampleGen encodes them: the same statistics as
    ``authoring.contract.csv_statistics`` of the frame's CSV file, computed in memory (a
    tenth of a second, not the five seconds of a Beam pipeline; thousands of samples need it)."""
    import tensorflow_data_validation as tfdv
    from tensorflow_data_validation.statistics import stats_impl
    from tfx_bsl.coders import example_coder

    from components import csv_encoding

    path = os.path.join(scratch, "rows.csv")
    frame.to_csv(path, index=False)
    types = csv_encoding.infer_column_types([path])
    records = [record for block in csv_encoding.read_blocks(path) for record in csv_encoding.encode_block(block, types)]
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
    return stats_impl.generate_statistics_in_memory(batch, tfdv.StatsOptions())


def _distances(new_statistics, baseline_statistics, schema) -> dict[str, tuple[float, float]]:
    from components import drift

    found, _ = drift.measure(new_statistics, baseline_statistics, schema, "all")
    return {d.feature: (d.value, d.threshold) for d in found}


def measure_case(baseline: pd.DataFrame, new: pd.DataFrame, schema, scratch: str) -> dict[str, tuple[float, float]]:
    """Column -> (distance, threshold) between two frames, as DriftGate measures two runs."""
    return _distances(statistics(new, scratch), statistics(baseline, scratch), schema)


def _add(into: Distances, measured: dict[str, tuple[float, float]]) -> None:
    for column, (value, _) in measured.items():
        into.setdefault(column, []).append(value)


def thresholds(schema) -> dict[str, float]:
    """Column -> the contract's drift threshold, for every column with a drift_comparator."""
    found = {}
    for feature in schema.feature:
        if feature.HasField("drift_comparator"):
            comparator = feature.drift_comparator
            kind = "jensen_shannon_divergence" if comparator.HasField("jensen_shannon_divergence") else "infinity_norm"
            found[feature.name] = getattr(comparator, kind).threshold
    return found


def sampled_distances(
    frame: pd.DataFrame,
    schema,
    eval_sizes: Sequence[int],
    baseline_sizes: Sequence[int],
    repeats: int,
    fault_repeats: int,
    rng: np.random.Generator,
    scratch: str,
) -> dict[tuple[str, int, int], Distances]:
    """(case, new rows, baseline rows) -> column -> distances: ``repeats`` times a random
    baseline sample and, from the other rows, a new sample of each size (the noise); the
    first ``fault_repeats`` times also a new sample of each planted fault (``FAULTS``)."""
    found: dict[tuple[str, int, int], Distances] = {}
    for m in baseline_sizes:
        for repeat in range(repeats):
            order = rng.permutation(len(frame))
            baseline = statistics(frame.iloc[order[:m]], scratch)
            rest = frame.iloc[order[m:]]
            for n in eval_sizes:
                _add(
                    found.setdefault((NOISE, n, m), {}),
                    _distances(statistics(rest.iloc[:n], scratch), baseline, schema),
                )
                if repeat >= fault_repeats:
                    continue
                for name, (fault, _) in FAULTS.items():
                    new = statistics(fault(rest.iloc[n:]).iloc[:n], scratch)
                    _add(found.setdefault((name, n, m), {}), _distances(new, baseline, schema))
    return found


def quarters(frame: pd.DataFrame, time_column: str = "trip_start_timestamp") -> list[tuple[str, pd.DataFrame]]:
    """The rows cut into quarters as ``authoring.replay`` cuts them: (first month, rows), oldest first."""
    from authoring.replay import period_label, period_of

    def period(seconds: float) -> int:
        return period_of(datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC), MONTHS_PER_SPAN)

    periods = pd.to_numeric(frame[time_column]).map(period)
    return [(period_label(p, MONTHS_PER_SPAN), frame[periods == p]) for p in sorted(periods.unique())]


def quarter_distances(
    frame: pd.DataFrame, schema, repeats: int, rng: np.random.Generator, scratch: str, window: int | None = None
) -> dict[str, Distances]:
    """New quarter -> column -> distances: ``repeats`` times a random eval-sized share of the
    quarter (``EVAL_SHARE``) against a random train-sized share of the ``window`` quarters
    before it (the champion's window when the last span's model was blessed)."""
    window = window or PipelineConfig.window_spans
    cut = quarters(frame)
    found: dict[str, Distances] = {}
    for index in range(1, len(cut)):
        label, new_rows = cut[index]
        before = pd.concat(rows for _, rows in cut[max(0, index - window) : index])
        n, m = round(len(new_rows) * EVAL_SHARE), round(len(before) * (1 - EVAL_SHARE))
        for _ in range(repeats):
            new = new_rows.iloc[rng.permutation(len(new_rows))[:n]]
            baseline = before.iloc[rng.permutation(len(before))[:m]]
            _add(found.setdefault(f"{label} ({n} vs {m})", {}), measure_case(baseline, new, schema, scratch))
    return found


def _over(value: float, threshold: float) -> str:
    return f"{value:.3f}{' *' if value > threshold else ''}"


def _figures(values: Iterable[float], threshold: float, figures: Sequence[str]) -> str:
    """``median / p99 / ...`` of the values, a star when the last is above the threshold."""
    values = np.asarray(list(values))
    numbers = {"median": np.median(values), "p99": np.percentile(values, 99), "max": values.max(), "min": values.min()}
    return " / ".join(f"{numbers[f]:.3f}" for f in figures) + (" *" if numbers[figures[-1]] > threshold else "")


def _stopped(measured: Sequence[Distances], limits: dict[str, float]) -> str:
    """The share of the comparisons (repeats) in which any column is above its threshold."""
    runs = [np.any([np.asarray(d[c]) > t for c, t in limits.items()], axis=0) for d in measured]
    return f"{np.concatenate(runs).mean():.1%}"


def _table(title: str, headers: Sequence[str], rows: dict[str, list[str]], note: str) -> None:
    print(f"\n{title}\n")
    print("| column (threshold) | " + " | ".join(headers) + " |")
    print("|---|" + "---|" * len(headers))
    for column, cells in rows.items():
        print(f"| {column} | " + " | ".join(cells) + " |")
    print(f"\n{note}")


def _print_summary(
    sampled: dict[tuple[str, int, int], Distances],
    by_quarter: dict[str, Distances],
    limits: dict[str, float],
    label: dict[str, str],
    pairs: list[tuple[int, int]],
    repeats: int,
) -> None:
    """Per column: the noise's 99th percentile at each new size (the worse of the baselines),
    the largest quarter to quarter, the smallest of each planted fault; then the share of
    runs each would stop."""
    sizes = sorted({n for n, _ in pairs})
    faults = {name: [d for (case, _, _), d in sampled.items() if case == name] for name in FAULTS}
    faults = {name: measured for name, measured in faults.items() if measured}
    rows = {}
    for column, threshold in sorted(limits.items()):
        cells = [
            _over(
                max(np.percentile(sampled[(NOISE, n, m)][column], 99) for m in {m for k, m in pairs if k == n}),
                threshold,
            )
            for n in sizes
        ]
        if by_quarter:
            worst = max(by_quarter, key=lambda quarter: max(by_quarter[quarter][column]))
            cells.append(f"{_over(max(by_quarter[worst][column]), threshold)} ({worst.split(' (')[0]})")
        cells += [_over(min(min(d[column]) for d in measured), threshold) for measured in faults.values()]
        rows[label[column]] = cells
    stopped = [_stopped([d for (case, k, _), d in sampled.items() if case == NOISE and k == n], limits) for n in sizes]
    if by_quarter:
        stopped.append(_stopped(list(by_quarter.values()), limits))
    rows["runs stopped (any column)"] = stopped + [_stopped(measured, limits) for measured in faults.values()]
    baselines = " and ".join(f"{m:,}" for m in sorted({m for _, m in pairs}))
    _table(
        f"Summary: noise (99th percentile of {repeats} random samples of n new rows against disjoint ones of "
        f"{baselines} rows), quarter to quarter (largest), planted faults (smallest)",
        [f"noise, {n} rows" for n in sizes] + (["quarter to quarter"] if by_quarter else []) + [f"{f}" for f in faults],
        rows,
        "* above the contract's threshold: the run stops. The faults must stop every run.",
    )


def _print_noise(
    sampled: dict[tuple[str, int, int], Distances],
    limits: dict[str, float],
    label: dict[str, str],
    pairs: list[tuple[int, int]],
    repeats: int,
) -> None:
    """The noise at each pair of sizes: median, 99th percentile and largest distance."""
    _table(
        f"Noise: n new rows against m rows, disjoint random samples ({repeats} times), median / p99 / max",
        [f"{n} vs {m}" for n, m in pairs],
        {
            label[c]: [_figures(sampled[(NOISE, n, m)][c], t, ("median", "p99", "max")) for n, m in pairs]
            for c, t in sorted(limits.items())
        },
        "* the largest above the contract's threshold: ordinary data would stop a run.",
    )


def _print_quarters(by_quarter: dict[str, Distances], limits: dict[str, float], label: dict[str, str]) -> None:
    """Each quarter against the ones before it: median and largest distance."""
    _table(
        "Quarter to quarter: an eval-sized share of each quarter (n) against a train-sized share of the four "
        "before (m), median / max",
        list(by_quarter),
        {
            label[c]: [_figures(d[c], t, ("median", "max")) for d in by_quarter.values()]
            for c, t in sorted(limits.items())
        },
        "* the largest above the contract's threshold.",
    )


def _print_faults(
    sampled: dict[tuple[str, int, int], Distances], limits: dict[str, float], label: dict[str, str]
) -> None:
    """Each planted fault that was measured: median and smallest distance at each pair of sizes."""
    for name, (_, column) in FAULTS.items():
        planted = [(n, m) for case, n, m in sampled if case == name]
        if not planted:
            continue
        _table(
            f"Planted fault '{name}' ({len(sampled[(name, *planted[0])][column])} times), median / min",
            [f"{n} vs {m}" for n, m in planted],
            {
                label[c]: [_figures(sampled[(name, n, m)][c], t, ("median", "min")) for n, m in planted]
                for c, t in sorted(limits.items())
            },
            f"* the smallest above the contract's threshold; {column} must be starred everywhere.",
        )


def print_sizes(
    sampled: dict[tuple[str, int, int], Distances], by_quarter: dict[str, Distances], limits: dict[str, float]
) -> None:
    """The tables of ``--sizes``: the summary (docs/pipeline.md), then noise, quarter to
    quarter and the planted faults in detail."""
    label = {column: f"{column} ({threshold:g})" for column, threshold in sorted(limits.items())}
    pairs = [(n, m) for case, n, m in sampled if case == NOISE]
    repeats = len(next(iter(sampled[(NOISE, *pairs[0])].values())))
    _print_summary(sampled, by_quarter, limits, label, pairs, repeats)
    _print_noise(sampled, limits, label, pairs, repeats)
    if by_quarter:
        _print_quarters(by_quarter, limits, label)
    _print_faults(sampled, limits, label)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--data-root", default=DEFAULT_PROBLEM_DIR)
    parser.add_argument("--contract", help=f"The data contract (default: {CONTRACT_FILE} in --data-root).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES), help="Which cases to measure.")
    parser.add_argument(
        "--sizes",
        nargs="*",
        type=int,
        help=f"Span mode: measure new samples of these sizes (no sizes: {' '.join(map(str, EVAL_SIZES))}) against "
        "--baseline-sizes, quarter to quarter and the planted faults, instead of --cases.",
    )
    parser.add_argument("--baseline-sizes", nargs="+", type=int, default=list(BASELINE_SIZES))
    parser.add_argument("--repeats", type=int, default=200, help="Span mode: random samples per pair of sizes.")
    parser.add_argument("--fault-repeats", type=int, default=20, help="Span mode: of them, how many also plant faults.")
    parser.add_argument("--quarter-repeats", type=int, default=10, help="Span mode: random samples per quarter.")
    args = parser.parse_args(argv)
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    contract = args.contract or os.path.join(args.data_root, CONTRACT_FILE)
    schema = io_utils.parse_pbtxt_file(contract, schema_pb2.Schema())
    frame = read_rows(args.data_root)
    rng = np.random.default_rng(args.seed)
    if args.sizes is not None:
        with tempfile.TemporaryDirectory(prefix="drift-") as scratch:
            sampled = sampled_distances(
                frame,
                schema,
                args.sizes or EVAL_SIZES,
                args.baseline_sizes,
                args.repeats,
                args.fault_repeats,
                rng,
                scratch,
            )
            by_quarter = (
                quarter_distances(frame, schema, args.quarter_repeats, rng, scratch) if args.quarter_repeats else {}
            )
        print_sizes(sampled, by_quarter, thresholds(schema))
        return 0
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
