"""runtime.speedups.signatures: Beam's signatures, each computed once, nothing kept alive, DoFns still
validated by Beam."""

from __future__ import annotations

import functools
import gc
import weakref

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, userstate

from runtime.speedups import signatures
from tests.support.fresh_python import fresh_python


def _add(x, y=1):
    return x + y


class _Adder:
    def __init__(self, y):
        self.y = y

    def add(self, x, z=2):
        return x + self.y + z

    def __call__(self, x):
        return x + self.y

    @staticmethod
    def twice(x):
        return 2 * x

    @classmethod
    def build(cls, y):
        return cls(y)


CALLABLES = [
    _add,
    _Adder(1).add,
    _Adder.twice,
    _Adder.build,
    _Adder(1),
    _Adder,
    str.upper,
    len,
    functools.partial(_add, y=3),
    lambda a, *rest, **named: a,
]


@pytest.fixture
def counted_beam_lookups(monkeypatch):
    """Counts the lookups that reach Beam's own get_signature."""
    calls = []

    def beam_get_signature(func):
        calls.append(func)
        return signatures.BEAM_GET_SIGNATURE.__wrapped__(func)

    beam_get_signature.__wrapped__ = signatures.BEAM_GET_SIGNATURE
    monkeypatch.setattr(signatures, "BEAM_GET_SIGNATURE", beam_get_signature)
    monkeypatch.setattr(signatures, "_signatures", weakref.WeakKeyDictionary())
    return calls


@pytest.mark.parametrize("func", CALLABLES, ids=lambda f: getattr(f, "__name__", type(f).__name__))
def test_signatures_equal_beams(func):
    assert signatures.get_signature(func) == signatures.BEAM_GET_SIGNATURE(func)
    assert signatures.get_signature(func) == signatures.BEAM_GET_SIGNATURE(func)


def test_a_function_and_its_methods_are_looked_up_once(counted_beam_lookups):
    first, second = _Adder(1), _Adder(2)
    for _ in range(3):
        signatures.get_signature(_add)
        signatures.get_signature(first.add)
        signatures.get_signature(second.add)
    assert counted_beam_lookups == [_add, first.add]
    # Bound or not, the same function has two signatures (self dropped when bound).
    assert list(signatures.get_signature(_Adder.add).parameters) == ["self", "x", "z"]
    assert list(signatures.get_signature(second.add).parameters) == ["x", "z"]


def test_other_callables_are_looked_up_every_time(counted_beam_lookups):
    adder, partial = _Adder(1), functools.partial(_add, y=3)
    for _ in range(2):
        signatures.get_signature(adder)
        signatures.get_signature(partial)
        signatures.get_signature(str.upper)
    assert len(counted_beam_lookups) == 6


def test_a_signature_goes_with_its_function(monkeypatch):
    monkeypatch.setattr(signatures, "_signatures", weakref.WeakKeyDictionary())

    def make():
        def local(a, b):
            return a + b

        return local

    func = make()
    signatures.get_signature(func)
    gone = weakref.ref(func)
    del func
    gc.collect()
    assert gone() is None
    assert len(signatures._signatures) == 0


class _Sum(beam.DoFn):
    def process(self, element, offset=beam.DoFn.SideInputParam):
        yield element + offset


class _TwoStates(beam.DoFn):
    first = userstate.ReadModifyWriteStateSpec("same", beam.coders.VarIntCoder())
    second = userstate.ReadModifyWriteStateSpec("same", beam.coders.VarIntCoder())

    def process(self, element, a=beam.DoFn.StateParam(first), b=beam.DoFn.StateParam(second)):  # noqa: B008 - how Beam declares state
        yield element


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setattr(core, "get_signature", core.get_signature)
    signatures.install()
    assert core.get_signature is signatures.get_signature


def test_installed_beam_still_rejects_an_invalid_dofn(installed):
    with pytest.raises(ValueError, match="duplicate process method parameters"):
        beam.ParDo(_TwoStates())


def test_installed_beam_runs_a_pipeline_with_side_inputs(installed):
    with beam.Pipeline("DirectRunner") as pipeline:
        offset = pipeline | "offset" >> beam.Create([10])
        numbers = pipeline | beam.Create([1, 2, 3]) | beam.ParDo(_Sum(), beam.pvalue.AsSingleton(offset))
        assert_that(numbers, equal_to([11, 12, 13]))


def test_importing_installs_nothing():
    code = (
        "import apache_beam.transforms.core as core; from runtime.speedups import signatures; "
        "print(core.get_signature is signatures.BEAM_GET_SIGNATURE)"
    )
    assert fresh_python(code) == "True"
