"""mcpx.protocol.pagination: opaque cursors that name their list and an offset into it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mcpx.protocol import pagination
from mcpx.protocol.errors import InvalidParams


def forge(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def walk(kind: str, items: list[int], size: int) -> list[list[int]]:
    pages, cursor = [], None
    while True:
        chunk, cursor = pagination.page(kind, items, cursor, size)
        pages.append(chunk)
        if cursor is None:
            return pages


# ---- round trip ---------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [0, 1, 99, 100, 12345])
def test_cursor_round_trips_to_its_offset(offset: int) -> None:
    assert pagination.decode("tools", pagination.encode("tools", offset)) == offset


def test_cursor_is_an_opaque_url_safe_string_without_padding() -> None:
    cursor = pagination.encode("resources/templates", 12345)
    assert isinstance(cursor, str) and cursor and "=" not in cursor
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_no_cursor_means_the_first_page() -> None:
    assert pagination.decode("tools", None) == 0
    assert pagination.page("tools", [1, 2, 3], None, 2) == ([1, 2], pagination.encode("tools", 2))


def test_walking_every_page_yields_every_item_once_in_order() -> None:
    items = list(range(250))
    pages = walk("tools", items, 100)
    assert [len(p) for p in pages] == [100, 100, 50]
    assert [x for p in pages for x in p] == items


def test_default_page_size_is_used_when_none_is_given() -> None:
    chunk, cursor = pagination.page("tools", list(range(pagination.PAGE_SIZE + 1)), None)
    assert len(chunk) == pagination.PAGE_SIZE and cursor is not None


# ---- page boundaries ----------------------------------------------------------------------


def test_empty_list_is_one_empty_page_without_next_cursor() -> None:
    assert pagination.page("tools", [], None, 10) == ([], None)


@pytest.mark.parametrize("n", [1, 9, 10])
def test_list_that_fits_in_one_page_has_no_next_cursor(n: int) -> None:
    # A nextCursor is only for "more results exist" (2025-11-25/server/utilities/pagination.mdx:28).
    chunk, cursor = pagination.page("tools", list(range(n)), None, 10)
    assert chunk == list(range(n)) and cursor is None


def test_one_item_past_a_full_page_makes_a_second_page() -> None:
    assert walk("tools", list(range(11)), 10) == [list(range(10)), [10]]


def test_last_page_that_is_exactly_full_has_no_next_cursor() -> None:
    assert walk("tools", list(range(20)), 10) == [list(range(10)), list(range(10, 20))]


def test_cursor_at_the_very_end_of_a_list_that_shrank_gives_an_empty_last_page() -> None:
    assert pagination.page("tools", [1, 2], pagination.encode("tools", 2), 10) == ([], None)


def test_cursor_past_the_end_is_invalid_params() -> None:
    with pytest.raises(InvalidParams):
        pagination.page("tools", [1, 2], pagination.encode("tools", 3), 10)


# ---- rejected cursors ---------------------------------------------------------------------


def _rejected(kind: str, cursor: Any) -> InvalidParams:
    with pytest.raises(InvalidParams) as exc:
        pagination.page(kind, list(range(5)), cursor, 2)
    # 2025-11-25/server/utilities/pagination.mdx:97: invalid cursors -> -32602. Not a _meta error: HTTP 200 (DIGEST C5).
    assert exc.value.code == -32602 and exc.value.http_status == 200
    return exc.value


def test_cursor_from_another_list_is_invalid_params() -> None:
    _rejected("prompts", pagination.encode("tools", 2))


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("", id="empty"),
        pytest.param("not a cursor", id="words"),
        pytest.param("!!!!", id="punctuation"),
        pytest.param("résumé", id="non-ascii"),
        pytest.param(base64.urlsafe_b64encode(b"\xff\xfe\xfd").decode(), id="not-utf8"),
        pytest.param(forge({"tools": 2}), id="json-object"),
        pytest.param(forge(["tools"]), id="too-short"),
        pytest.param(forge(["tools", 2, 3]), id="too-long"),
        pytest.param(forge("tools"), id="json-string"),
        pytest.param(forge(2), id="json-number"),
        pytest.param(forge(["tools", "2"]), id="offset-string"),
        pytest.param(forge(["tools", 2.0]), id="offset-float"),
        pytest.param(forge(["tools", None]), id="offset-null"),
        pytest.param(forge(["tools", True]), id="offset-bool"),
        pytest.param(2, id="integer-cursor"),
        pytest.param(["tools", 2], id="array-cursor"),
        pytest.param({"offset": 2}, id="object-cursor"),
    ],
)
def test_garbage_cursor_is_invalid_params(cursor: Any) -> None:
    _rejected("tools", cursor)


@pytest.mark.parametrize("offset", [-1, -100])
def test_negative_offset_cursor_is_invalid_params(offset: int) -> None:
    _rejected("tools", forge(["tools", offset]))


def test_error_message_names_the_list() -> None:
    assert "tools" in _rejected("tools", "junk").message
