"""Statistics computed beside the fast CSV encoding against TFDV's Beam statistics of the
tf.Examples written: StatisticsGen's own computation."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from components import csv_encoding, csv_example_gen, csv_statistics
from tests.support.statistics import assert_same_statistics

ROOT = Path(__file__).resolve().parents[2]
BUCKETS = [2, 3]
# Ties, a column never filled, text with numbers, non-ASCII, a value repeated past a block.
EDGE_CASE_CSV = "id,kind,empty,text,amount\n" + "".join(
    f"{i},{'ab'[i % 2] if i % 7 else 'c'},,{['x', 'Zürich', '1.5', 'y'][i % 4]},{i * 0.5 if i % 5 else ''}\n"
    for i in range(1, 3001)
)


def _beam_statistics(split_dir: str):
    """TFDV's Beam pipeline with StatisticsGen's default options over a split's files."""
    import tensorflow_data_validation as tfdv

    return tfdv.generate_statistics_from_tfrecord(os.path.join(split_dir, "*.gz"))


def _converted(csv: Path, out: Path, workers: int) -> tuple[list[str], list[csv_statistics.SplitStatistics]]:
    dirs = [str(out / "train"), str(out / "eval")]
    statistics = [csv_statistics.SplitStatistics() for _ in dirs]
    # Small blocks: many of them, shared out between the workers, each split's counts folded.
    csv_example_gen.convert([str(csv)], dirs, BUCKETS, workers, block_bytes=8 << 10, statistics=statistics)
    return dirs, statistics


@pytest.mark.parametrize(
    "csv", [ROOT / "data" / "taxi" / "taxi.csv", ROOT / "data" / "penguins" / "penguins.csv", None], ids=str
)
@pytest.mark.parametrize("workers", [1, 2])
def test_each_split_has_the_statistics_tfdv_computes_from_its_examples(csv, workers, tmp_path, monkeypatch):
    if csv is None:
        csv = tmp_path / "edge.csv"
        csv.write_text(EDGE_CASE_CSV)
    monkeypatch.setattr(csv_statistics, "_PENDING_COUNTS", 3)
    dirs, statistics = _converted(csv, tmp_path / "out", workers)
    for split_dir, split in zip(dirs, statistics, strict=True):
        assert_same_statistics(split.to_proto(), _beam_statistics(split_dir))


def test_string_features_keep_exact_top_values_past_the_sketch_sizes(tmp_path):
    """TFDV's in-memory sketches are exact to 1,024 top values and 16,384 distinct; Beam's
    default counts exactly, and so does this."""
    rows = [f"{i},{f'v{i % 30000:05d}' if i % 3 else 'common'}\n" for i in range(90000)]
    csv = tmp_path / "wide.csv"
    csv.write_text("n,name\n" + "".join(rows))
    dirs, statistics = _converted(csv, tmp_path / "out", 2)
    ours = statistics[0].to_proto()
    (name,) = [f for f in ours.datasets[0].features if f.path.step[0] == "name"]
    assert name.string_stats.unique > 16384
    assert name.string_stats.top_values[0].value == "common"
    assert len(name.string_stats.rank_histogram.buckets) == 1000
    theirs = _beam_statistics(dirs[0])
    # Past the quantile sketch's exact size, medians and histograms agree within TFDV's
    # epsilon (0.01 of the rows), as two Beam runs batching rows differently do.
    mine, reference = ([f for f in d.datasets[0].features if f.path.step[0] == "n"][0] for d in (ours, theirs))
    assert abs(mine.num_stats.median - reference.num_stats.median) <= 0.01 * mine.num_stats.max
    for feature in (mine, reference):
        feature.num_stats.median = 0.0
        del feature.num_stats.histograms[:]
    assert_same_statistics(ours, theirs)


def test_parts_pickled_and_merged_equal_the_whole(tmp_path):
    """What a worker sends (its accumulators and counts, pickled) merges into what one
    process would have computed over every block."""
    csv = tmp_path / "edge.csv"
    csv.write_text(EDGE_CASE_CSV)
    types = csv_encoding.infer_column_types([str(csv)])
    whole, parts = csv_statistics.SplitStatistics(), [csv_statistics.SplitStatistics() for _ in range(2)]
    for index, block in enumerate(csv_encoding.read_blocks(str(csv), 8 << 10)):
        batch = csv_encoding.feature_batch(block, types)
        whole.add(batch)
        parts[index % 2].add(batch)
    assert index > 2
    first, second = (pickle.loads(pickle.dumps(part)) for part in parts)
    assert_same_statistics(first.merge([second]).to_proto(), whole.to_proto())
