"""StatisticsGen's statistics of a split, computed by the fast CSV ExampleGen's workers from
the columns they encode (speedups on), with TFDV's own generators and proto makers, for
``components.statistics_gen`` to copy. The same figures as StatisticsGen's Beam pipeline
with its default options (tested on the shipped problems); what it uses of TFDV is listed
in ``runtime/speedups`` ("statistics-with-the-examples"). TFDV is imported on first use.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

# TFX StatisticsGen's output file in each split directory (statistics_gen.executor.DEFAULT_FILE_NAME).
FILE_NAME = "FeatureStats.pb"
# Per-block value counts kept before they are folded into one table per feature.
_PENDING_COUNTS = 64


def _default_generators() -> list:
    """TFDV's default combiner generators for StatisticsGen's default options, minus the
    sketch-based top-k (counted exactly here, as Beam does)."""
    from tensorflow_data_validation.statistics import stats_impl, stats_options
    from tensorflow_data_validation.statistics.generators import top_k_uniques_sketch_stats_generator as sketch

    generators = stats_impl.get_generators(stats_options.StatsOptions(), in_memory=True)
    return [g for g in generators if not isinstance(g, sketch.TopKUniquesSketchStatsGenerator)]


def _is_string(column: pa.Array) -> bool:
    """A list column of bytes: what TFDV types STRING and counts values of."""
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return False
    value_type = column.type.value_type
    return pa.types.is_binary(value_type) or pa.types.is_large_binary(value_type)


def decoded(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``feature_batch`` columns as tfx_bsl's decoder reads their tf.Examples back: a column
    that never has a value (features without a kind) decodes to Arrow's null type, which
    TFDV counts as a STRING feature with every value missing."""
    columns = [
        pa.nulls(len(column), pa.null()) if len(column) and column.null_count == len(column) else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, batch.schema.names)


def _folded(tables: list[pa.Table]) -> pa.Table:
    """One table of (value, count) from several, counts of a value summed."""
    if len(tables) == 1:
        return tables[0]
    summed = pa.concat_tables(tables).group_by("value").aggregate([("count", "sum")])
    return pa.table({"value": summed.column("value"), "count": summed.column("count_sum")})


class SplitStatistics:
    """One split's statistics, fed ``feature_batch`` columns; picklable, so a worker's part
    travels to the process that merges them (only the accumulators and counts travel)."""

    def __init__(self) -> None:
        self._generators = _default_generators()
        self._partial = [g.create_accumulator() for g in self._generators]
        self._counts: dict[str, list[pa.Table]] = {}

    def __getstate__(self) -> dict:
        self._fold()
        return {"partial": self._partial, "counts": self._counts}

    def __setstate__(self, state: dict) -> None:
        self._generators = _default_generators()
        self._partial = state["partial"]
        self._counts = state["counts"]

    def add(self, batch: pa.RecordBatch) -> None:
        """Adds a batch of rows (``csv_encoding.feature_batch``, or rows taken from one)."""
        if batch.num_rows == 0:
            return
        batch = decoded(batch)
        self._partial = [g.add_input(p, batch) for g, p in zip(self._generators, self._partial, strict=True)]
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if not _is_string(column):
                continue
            counted = pc.value_counts(pc.list_flatten(column))
            if len(counted):
                table = pa.table({"value": counted.field("values"), "count": counted.field("counts")})
                pending = self._counts.setdefault(name, [])
                pending.append(table)
                if len(pending) >= _PENDING_COUNTS:
                    self._counts[name] = [_folded(pending)]

    def merge(self, others: Iterable[SplitStatistics]) -> SplitStatistics:
        """This split's statistics with ``others``' rows added (other workers', other spans')."""
        others = list(others)
        self._partial = [
            g.merge_accumulators([p, *(o._partial[i] for o in others)])
            for i, (g, p) in enumerate(zip(self._generators, self._partial, strict=True))
        ]
        for other in others:
            for name, tables in other._counts.items():
                self._counts.setdefault(name, []).extend(tables)
        self._fold()
        return self

    def _fold(self) -> None:
        self._counts = {name: [_folded(tables)] for name, tables in self._counts.items()}

    def to_proto(self):
        """A ``DatasetFeatureStatisticsList`` as StatisticsGen writes it for the split."""
        from tensorflow_data_validation.statistics import stats_options
        from tensorflow_data_validation.utils import top_k_uniques_stats_util as top_k
        from tfx_bsl.statistics import merge_util

        options = stats_options.StatsOptions()
        protos = [g.extract_output(g.compact(p)) for g, p in zip(self._generators, self._partial, strict=True)]
        self._fold()
        keep = max(options.num_top_values, options.num_rank_histogram_buckets)
        for name, (table,) in sorted(self._counts.items()):
            # Beam's Top().PerKey over (count, value): the largest counts, ties to the larger value.
            top = table.take(pc.sort_indices(table, [("count", "descending"), ("value", "descending")])[:keep])
            values = [
                top_k.FeatureValueCount(value, count)
                for value, count in zip(top.column("value").to_pylist(), top.column("count").to_pylist(), strict=True)
            ]
            protos.append(
                top_k.make_dataset_feature_stats_proto_topk_single(
                    feature_path_tuple=(name,),
                    value_count_list=values,
                    is_weighted_stats=False,
                    num_top_values=options.num_top_values,
                    frequency_threshold=options.frequency_threshold,
                    num_rank_histogram_buckets=options.num_rank_histogram_buckets,
                )
            )
            protos.append(top_k.make_dataset_feature_stats_proto_unique_single((name,), table.num_rows))
        return merge_util.merge_dataset_feature_statistics(protos)


def write(statistics: SplitStatistics, split_dir: str) -> str:
    """Writes the split's ``FeatureStats.pb`` (binary, as StatisticsGen does) into ``split_dir``."""
    from tfx.dsl.io import fileio

    fileio.makedirs(split_dir)
    path = os.path.join(split_dir, FILE_NAME)
    with fileio.open(path, "wb") as out:
        out.write(statistics.to_proto().SerializeToString())
    return path
