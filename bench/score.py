"""Scoring a CSV at scale (``python -m bench.score``): ``python -m runs.score`` on the
embedded taxi data repeated to each size, with the pushed model of a local run (``make run``
writes one), its wall time and peak memory (RSS and PSS of its process tree,
``bench.measure``). Memory should stay flat in the input's size: the rows are read and
scored a block at a time. Repeated rather than generated (``bench.generate``): the
generated data moves its timestamps outside the contract's range, and scoring checks the
rows against the contract first.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from bench.generate import SOURCE_CSV, rows_for_size
from bench.measure import run_measured
from pipeline.config import DEFAULT_OUTPUT_ROOT, DEFAULT_PROBLEM_DIR, REPO_ROOT

DEFAULT_SIZES = (10.0, 100.0)  # 150k and 1.5M rows


def repeated_dataset(work: Path, size: float) -> tuple[Path, int]:
    """The embedded rows repeated to ``size`` times their number (written once, then reused)."""
    header, *rows = SOURCE_CSV.read_text().splitlines()
    copies = max(1, round(rows_for_size(size, len(rows)) / len(rows)))
    folder = work / "data" / f"taxi-x{copies}"
    target = folder / "data.csv"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        body = "\n".join(rows) + "\n"
        with open(target, "w") as f:
            f.write(header + "\n")
            for _ in range(copies):
                f.write(body)
    return folder, copies * len(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(f"{s:g}" for s in DEFAULT_SIZES), help="Multiples of 15k rows.")
    parser.add_argument("--output-root", default=DEFAULT_OUTPUT_ROOT, help="Where a run pushed the taxi model.")
    parser.add_argument("--work", default=os.path.join(DEFAULT_OUTPUT_ROOT, "bench"), help="Data and logs.")
    args = parser.parse_args(argv)
    work = Path(args.work)
    print(f"{'rows':>10} {'wall s':>8} {'rows/s':>9} {'peak RSS MB':>12} {'peak PSS MB':>12}")
    for size in (float(s) for s in args.sizes.split(",")):
        data_dir, rows = repeated_dataset(work, size)
        with tempfile.TemporaryDirectory(prefix="bench-score-") as scratch:
            command = ["-m", "runs.score", "--problem", DEFAULT_PROBLEM_DIR, "--output-root", args.output_root]
            command += ["--input", str(data_dir), "--output", os.path.join(scratch, "scored.csv")]
            measured = run_measured(command, REPO_ROOT, work / f"score-{rows}.log")
        wall = measured["wall_s"]
        print(
            f"{rows:>10} {wall:>8.1f} {rows / wall:>9.0f} {measured['peak_rss_mb']:>12.0f} "
            f"{measured['peak_pss_mb']:>12.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
