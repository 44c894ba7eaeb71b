"""runtime.speedups.pickle_codec: where pickles stay here Beam writes zlib and reads both forms; told
otherwise it writes Beam's own bz2 form; pipelines give the same results either way. All
of it with each of Beam's picklers (dill, its default; cloudpickle, the local runs')."""

from __future__ import annotations

import base64
import zlib

import apache_beam as beam
import pytest
from apache_beam.internal import pickler
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from runtime.speedups import pickle_codec
from tests.support.beam_pickler import pickling_with


class Scale(beam.DoFn):
    def __init__(self, factor: int):
        self.factor = factor

    def process(self, element):
        yield element * self.factor


@pytest.fixture(params=["dill", "cloudpickle"])
def library(request, monkeypatch):
    """Beam's own compressor in both picklers, and ``request.param`` the pickler in use."""
    for beam_pickler in pickle_codec.BEAM_PICKLERS:
        monkeypatch.setattr(beam_pickler, "bz2", pickle_codec.BEAM_COMPRESSOR)
    with pickling_with(request.param):
        yield request.param


def compressed(encoded: bytes) -> bytes:
    return base64.b64decode(encoded)


def test_beam_writes_bz2_by_default(library):
    assert compressed(pickler.dumps({"a": 1}))[:3] == pickle_codec.BZ2_MAGIC


def test_pickles_that_stay_here_are_zlib_and_both_forms_load(library):
    value = {"fn": Scale(3), "numbers": list(range(1000)), "text": "x" * 5000}
    made_by_beam = pickler.dumps(value)
    pickle_codec.install(pickles_stay_here=True)
    made_here = pickler.dumps(value)
    assert zlib.decompress(compressed(made_here))
    for encoded in (made_by_beam, made_here):
        loaded = pickler.loads(encoded)
        assert (loaded["fn"].factor, loaded["numbers"], loaded["text"]) == (3, value["numbers"], value["text"])


def test_pickles_that_may_leave_stay_in_beams_form_and_both_forms_load(library):
    pickle_codec.install(pickles_stay_here=True)
    made_here = pickler.dumps([1, 2])
    pickle_codec.install(pickles_stay_here=False)
    assert compressed(pickler.dumps([1, 2]))[:3] == pickle_codec.BZ2_MAGIC
    assert pickler.loads(made_here) == [1, 2]


def test_a_pickle_made_with_the_other_pickler_loads(library):
    """A pool process keeps the local runs' pickler even if a run's options chose the
    other: what either one pickled, a function and a DoFn, the other loads."""
    other = "cloudpickle" if library == "dill" else "dill"
    pickle_codec.install(pickles_stay_here=True)
    with pickling_with(other):
        made_by_other = pickler.dumps((lambda x: x + 1, Scale(4)))
    add_one, scale = pickler.loads(made_by_other)
    assert (add_one(1), list(scale.process(2))) == (2, [8])


@pytest.mark.parametrize("pickles_stay_here", [True, False])
def test_a_pipeline_gives_the_same_results(library, pickles_stay_here):
    pickle_codec.install(pickles_stay_here)
    options = PipelineOptions(["--runner=DirectRunner", f"--pickle_library={library}"])
    with beam.Pipeline(options=options) as pipeline:
        assert pickler.desired_pickle_lib.__name__.endswith(f".{library}_pickler")
        scaled = pipeline | beam.Create([1, 2, 3]) | beam.ParDo(Scale(10))
        side = pipeline | "Side" >> beam.Create([5])
        added = scaled | beam.Map(lambda x, s: x + s, beam.pvalue.AsSingleton(side))
        assert_that(added, equal_to([15, 25, 35]))
