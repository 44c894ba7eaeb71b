"""Beam's pickles compressed with zlib at its fastest level instead of bz2 at its slowest, in
processes whose pickles never leave this machine; reading accepts both (docs/speedups.md).
Written against apache-beam 2.61.0.
"""

from __future__ import annotations

import bz2
import zlib

from apache_beam.internal import cloudpickle_pickler, dill_pickler

# Beam's own compressor, as its two picklers call it (module attribute ``bz2``).
BEAM_COMPRESSOR = dill_pickler.bz2
BEAM_PICKLERS = (dill_pickler, cloudpickle_pickler)
BZ2_MAGIC = b"BZh"
# zlib's fastest level: these pickles are small, and read back within the run.
ZLIB_LEVEL = 1


class _Reader:
    """Beam's compressor, except that it also reads zlib streams."""

    @staticmethod
    def compress(data: bytes, compresslevel: int = 9) -> bytes:
        return bz2.compress(data, compresslevel)

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bz2.decompress(data) if data[:3] == BZ2_MAGIC else zlib.decompress(data)


class _Writer(_Reader):
    """Writes zlib streams; reads both."""

    @staticmethod
    def compress(data: bytes, compresslevel: int = 9) -> bytes:
        return zlib.compress(data, ZLIB_LEVEL)


def install(pickles_stay_here: bool) -> None:
    """Beam's picklers read both forms; they write zlib only if ``pickles_stay_here``."""
    for beam_pickler in BEAM_PICKLERS:
        beam_pickler.bz2 = _Writer if pickles_stay_here else _Reader
