"""mcpx.upstream.stdio.id_ranges: the request ids a keeper forwarded, as ranges a restarted daemon
reads to tell a request its server got from one it never did."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from mcpx.upstream.stdio import id_ranges
from mcpx.upstream.stdio.id_ranges import IdRanges


def test_ids_out_of_order_merge_into_runs() -> None:
    r = IdRanges()
    for rid in (1, 2, 4, 3, 7, 9, 8):
        r.add(rid)
    assert r.ranges == [[1, 4], [7, 9]]
    assert [r.seen(i) for i in (1, 4, 5, 6, 7, 10)] == [
        "forwarded",
        "forwarded",
        "never",
        "never",
        "forwarded",
        "never",
    ]


def test_past_the_range_budget_the_oldest_go_and_below_the_floor_nothing_is_known() -> None:
    r = IdRanges()
    for rid in range(0, 2 * (id_ranges.MAX_RANGES + 3), 2):  # every other id: a range each
        r.add(rid)
    assert len(r.ranges) == id_ranges.MAX_RANGES
    assert r.floor == r.ranges[0][0] - 1 and r.seen(0) == "unknown" and r.seen(r.floor - 1) == "unknown"
    r.add(0)  # below the floor: nothing to record
    assert r.seen(0) == "unknown"


@given(st.lists(st.integers(min_value=0, max_value=300), max_size=200))
def test_seen_agrees_with_the_set_of_ids_added(ids: list[int]) -> None:
    r = IdRanges()
    random.Random(len(ids)).shuffle(ids)
    for rid in ids:
        r.add(rid)
    assert r.floor == 0  # too few ranges to need a floor
    for rid in range(302):
        assert r.seen(rid) == ("forwarded" if rid in set(ids) else "never")
    back = IdRanges.from_wire(r.wire())
    assert back is not None and back.ranges == r.ranges


def test_a_malformed_or_missing_welcome_entry_means_nothing_is_known() -> None:
    for bad in (
        None,
        [],
        {"floor": "0", "ranges": []},
        {"floor": 0, "ranges": [[3, 1]]},
        {"floor": 0, "ranges": [[1]]},
    ):
        assert IdRanges.from_wire(bad) is None
    assert IdRanges.from_wire({"floor": 5, "ranges": [[9, 9], [6, 7]]}) == IdRanges(5, [[6, 7], [9, 9]])
