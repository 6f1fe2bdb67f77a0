"""console/heap.py: Python's full collections are held back while the console runs and the heap is
settled at quiet moments; console/widgets/tasks.py empties Textual's LRU caches without leaving
cyclic garbage (which only a full collection would free)."""

from __future__ import annotations

import gc
import weakref

from textual.cache import LRUCache

from console import heap
from console.widgets.tasks import _cut_ring


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_hold_holds_back_full_collections_and_release_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    keeper = heap.HeapKeeper()
    keeper.hold()
    try:
        assert gc.get_threshold() == (before[0], before[1], heap.NEVER)
        keeper.hold()  # twice: still the thresholds of before to restore
    finally:
        keeper.release()
    assert gc.get_threshold() == before


def test_the_heap_is_settled_when_no_key_was_pressed_for_a_while_and_at_the_latest_every_max_s() -> None:
    clock = Clock()
    keeper = heap.HeapKeeper(clock)
    try:
        clock.now += heap.SETTLE_EVERY_S - 1
        keeper.tick()
        assert (keeper.settles, keeper.collects) == (0, 0)  # too soon after the last one
        clock.now += 1
        keeper.key()
        keeper.tick()
        assert (keeper.settles, keeper.collects) == (0, 0)  # a key was just pressed
        clock.now += heap.IDLE_S
        keeper.tick()
        assert (keeper.settles, keeper.collects) == (1, 0)  # quiet now: settled
        # Keys all along: only a young-only collection, once SETTLE_MAX_S has gone by.
        for _ in range(int(heap.SETTLE_MAX_S / 0.1) + 1):
            clock.now += 0.1
            keeper.key()
            keeper.tick()
        assert (keeper.settles, keeper.collects) == (1, 1)
    finally:
        keeper.release()
    assert gc.get_freeze_count() == 0


class Value:
    pass


def test_a_cut_lru_cache_frees_its_entries_at_once_without_a_collection() -> None:
    cache: LRUCache[int, Value] = LRUCache(10)
    values = [Value() for _ in range(5)]
    refs = [weakref.ref(v) for v in values]
    for i, v in enumerate(values):
        cache[i] = v
    del values, v
    gc.disable()
    try:
        _cut_ring(cache)
        assert len(cache) == 0 and all(r() is None for r in refs)
    finally:
        gc.enable()


def test_a_cleared_lru_cache_leaves_its_entries_to_the_collector() -> None:
    """Why _cut_ring exists: Textual's own clear() leaves the ring of entries as a cycle."""
    cache: LRUCache[int, Value] = LRUCache(10)
    value = Value()
    ref = weakref.ref(value)
    cache[0], cache[1] = value, Value()
    del value
    gc.disable()
    try:
        cache.clear()
        assert ref() is not None
    finally:
        gc.enable()
    gc.collect()
    assert ref() is None
