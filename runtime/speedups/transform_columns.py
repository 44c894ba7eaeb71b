"""Transform reads each split's columns as the fast ExampleGen kept them
(``runtime.decoded_columns``) instead of decoding every tf.Example again, through TFX's own
TFXIO for that split; any other split is read as TFX reads it. Floating-point analyzers may
differ in their last digits, as between two runs of Beam's batching (docs/speedups.md).
Written against TFX 1.16.0 and its tfx-bsl.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from absl import logging
from tfx.components.transform import executor as transform_executor
from tfx_bsl.tfxio import tensor_representation_util, tf_example_record

from runtime import decoded_columns

# TFX's method, which the executor calls for every split it reads.
CREATE_TFXIO = transform_executor.TransformProcessor._CreateTFXIO


class KeptColumnsRecord(tf_example_record.TFExampleRecord):
    """tfx_bsl's TFXIO for tf.Example records whose Beam source reads the records' kept
    columns (``columns_files``) instead of decoding the records."""

    def __init__(
        self,
        file_pattern: str | list[str],
        columns_files: Sequence[str],
        schema: Any,
        telemetry_descriptors: list[str] | None = None,
    ) -> None:
        super().__init__(file_pattern=file_pattern, schema=schema, telemetry_descriptors=telemetry_descriptors)
        self._columns_files = list(columns_files)

    def BeamSource(self, batch_size: int | None = None) -> beam.PTransform:  # noqa: N802 (TFXIO's name)
        files, schema = self._columns_files, self.ArrowSchema()

        @beam.ptransform_fn
        def read(pipeline: Any) -> beam.PCollection:
            return (
                pipeline
                | "ColumnsFiles" >> beam.Create(files)
                # A stage of its own, so that the runner shares the files out between workers.
                | "ShareOut" >> beam.Reshuffle()
                | "ReadColumns" >> beam.FlatMap(decoded_columns.read_batches, schema=schema, batch_size=batch_size)
            )

        return read()

    def _ProjectImpl(self, tensor_names: list[str]) -> KeptColumnsRecord:  # noqa: N802 (TFXIO's name)
        projected = tensor_representation_util.ProjectTensorRepresentationsInSchema(self._schema, tensor_names)
        return KeptColumnsRecord(self._file_pattern, self._columns_files, projected, self.telemetry_descriptors)


def _kept_columns_tfxio(made: Any, file_pattern: Any, schema: Any) -> KeptColumnsRecord | None:
    """``made`` (TFX's TFXIO for a split) reading the split's kept columns, or None."""
    if type(made) is not tf_example_record.TFExampleRecord or made.raw_record_column_name is not None:
        return None
    files = decoded_columns.kept_columns_files(file_pattern)
    if files is None:
        return None
    if not decoded_columns.decodes_to(files, made.ArrowSchema()):
        logging.info("Transform decodes %s: its kept columns are not of the schema's types.", file_pattern)
        return None
    logging.info("Transform reads %s from the columns ExampleGen kept (%d file(s)).", file_pattern, len(files))
    return KeptColumnsRecord(file_pattern, files, schema, made.telemetry_descriptors)


@contextlib.contextmanager
def read_decoded_columns() -> Iterator[None]:
    """Within this block, TFX's Transform reads a split from its kept columns where it can
    (module docstring), and as TFX reads it otherwise."""

    def create_tfxio(self: Any, dataset: Any, schema: Any) -> Any:
        made = CREATE_TFXIO(self, dataset, schema)
        return _kept_columns_tfxio(made, dataset.file_pattern, schema) or made

    transform_executor.TransformProcessor._CreateTFXIO = create_tfxio
    try:
        yield
    finally:
        transform_executor.TransformProcessor._CreateTFXIO = CREATE_TFXIO
