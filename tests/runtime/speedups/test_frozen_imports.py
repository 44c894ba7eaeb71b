"""runtime.speedups.frozen_imports: the collector paused inside, its state restored, what was made frozen."""

from __future__ import annotations

import gc
import weakref

import pytest

from runtime.speedups.frozen_imports import frozen_imports


@pytest.fixture(autouse=True)
def _restore_collector():
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


class _Node:
    def __init__(self) -> None:
        self.peer = self  # a cycle: only the cyclic collector could free it


def test_the_collector_is_paused_inside_and_enabled_again_after():
    gc.enable()
    with frozen_imports():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled():
    gc.disable()
    with frozen_imports():
        pass
    assert not gc.isenabled()


def test_objects_made_inside_are_frozen_and_skipped_by_collections():
    with frozen_imports():
        kept = [_Node() for _ in range(1000)]
        dropped = weakref.ref(_Node())
    assert gc.get_freeze_count() >= len(kept)
    tracked = {id(obj) for obj in gc.get_objects()}
    assert not any(id(node) in tracked for node in kept)
    gc.collect()
    assert dropped() is not None  # frozen garbage is not collected: the price of skipping


def test_what_is_made_after_the_block_is_collected_as_usual():
    with frozen_imports():
        pass
    node = _Node()
    dropped = weakref.ref(node)
    del node
    gc.collect()
    assert dropped() is None


def test_the_collector_comes_back_when_the_block_raises():
    gc.enable()
    with pytest.raises(ImportError), frozen_imports():
        raise ImportError("no such module")
    assert gc.isenabled()
