"""runtime.speedups.overheads: dill's tracing levels as before without clearing every logger's cache;
side inputs read in-process without the cache and its objsize weighing, same results."""

from __future__ import annotations

import logging

import apache_beam as beam
import dill
import pytest
from apache_beam.internal import pickler
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker import statecache
from apache_beam.testing.util import assert_that, equal_to

from runtime.speedups import overheads
from tests.support.beam_pickler import pickling_with
from tests.support.fresh_python import fresh_python


@pytest.fixture
def beams_own(monkeypatch):
    """Beam's and dill's own behaviour, whatever an earlier in-process run installed (a local
    run leaves Beam pickling with cloudpickle, which never calls dill's _trace)."""
    monkeypatch.setattr(dill.dill, "_trace", overheads.DILL_TRACE)
    monkeypatch.setattr(worker_handlers, "STATE_CACHE_SIZE_MB", overheads.BEAM_STATE_CACHE_SIZE_MB)
    with pickling_with("dill"):
        yield


@pytest.fixture
def installed(beams_own):
    overheads.install()


@pytest.fixture
def cache_clears(monkeypatch) -> list:
    """Every time logging clears its loggers' cached levels."""
    clears: list = []
    manager = logging.Logger.manager
    clear = manager._clear_cache
    monkeypatch.setattr(manager, "_clear_cache", lambda: clears.append(1) or clear())
    return clears


def test_tracing_switches_dills_logger_as_dill_does(installed):
    dill_logger = logging.getLogger("dill")
    try:
        overheads.trace(True)
        assert dill_logger.level == logging.INFO
        overheads.trace(False)
        assert dill_logger.level == logging.WARNING
    finally:
        overheads.DILL_TRACE(False)


def test_beams_pickling_no_longer_clears_every_loggers_cache(installed, cache_clears):
    overheads.trace(False)
    cache_clears.clear()
    for value in ({"a": 1}, _square, [1, 2, 3]):
        assert pickler.loads(pickler.dumps(value)) == value
    assert cache_clears == []


def test_without_it_each_pickle_clears_them(beams_own, cache_clears):
    """What the switch removes: dill's own _trace clears the caches on every pickle."""
    for value in ({"a": 1}, [1, 2, 3]):
        pickler.loads(pickler.dumps(value))
    assert len(cache_clears) >= 4


def _square(x):
    return x * x


def _side_input_pipeline() -> None:
    with beam.Pipeline("DirectRunner") as pipeline:
        numbers = pipeline | "numbers" >> beam.Create([1, 2, 3])
        offset = pipeline | "offset" >> beam.Create([10])
        names = pipeline | "names" >> beam.Create([(1, "one"), (2, "two"), (3, "three")])
        rows = numbers | beam.Map(
            lambda x, offset, everything, named: (x + offset, sum(everything), named[x]),
            beam.pvalue.AsSingleton(offset),
            beam.pvalue.AsList(numbers),
            beam.pvalue.AsDict(names),
        )
        assert_that(rows, equal_to([(11, 6, "one"), (12, 6, "two"), (13, 6, "three")]))


@pytest.fixture
def weighed(monkeypatch) -> list:
    """Every side-input value the in-process worker's cache weighs with objsize."""
    calls: list = []
    weigh = statecache.get_deep_size
    monkeypatch.setattr(statecache, "get_deep_size", lambda *values: calls.append(values) or weigh(*values))
    return calls


def test_side_inputs_are_read_without_the_cache_and_give_the_same_results(installed, weighed):
    assert worker_handlers.STATE_CACHE_SIZE_MB == 0
    _side_input_pipeline()
    assert weighed == []


def test_with_the_cache_every_side_input_is_weighed(beams_own, weighed):
    """What removing the cache saves: Beam's default weighs each side input it caches."""
    assert worker_handlers.STATE_CACHE_SIZE_MB > 0
    _side_input_pipeline()
    assert len(weighed) >= 3


def test_importing_installs_nothing():
    code = (
        "import dill; from apache_beam.runners.portability.fn_api_runner import worker_handlers; "
        "from runtime.speedups import overheads; "
        "print(dill.dill._trace is overheads.DILL_TRACE, worker_handlers.STATE_CACHE_SIZE_MB > 0)"
    )
    assert fresh_python(code) == "True True"
