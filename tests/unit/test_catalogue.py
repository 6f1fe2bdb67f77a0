"""mcpx.upstream.catalogue: how upstream names and URIs appear to hosts, including the resource URIs
inside what a tool or a prompt returns (so a host can read back a link a tool gave it)."""

from __future__ import annotations

from typing import Any

from mcpx.upstream.catalogue import Naming

NS = Naming("every")
PASS = Naming(None)
LINK = {"type": "resource_link", "uri": "demo://resource/dynamic/text/2", "name": "Resource 2"}
EMBEDDED = {"type": "resource", "resource": {"uri": "demo://r/1", "mimeType": "text/plain", "text": "one"}}
TEXT = {"type": "text", "text": "demo://not/a/link"}


def test_a_resource_link_and_an_embedded_resource_get_the_exposed_uri() -> None:
    assert NS.content_out(LINK) == {**LINK, "uri": "mcpx://every/demo://resource/dynamic/text/2"}
    assert NS.content_out(EMBEDDED) == {
        "type": "resource",
        "resource": {"uri": "mcpx://every/demo://r/1", "mimeType": "text/plain", "text": "one"},
    }


def test_the_exposed_uri_routes_back_to_the_upstreams_own() -> None:
    exposed = NS.content_out(LINK)
    assert isinstance(exposed, dict) and NS.uri_in(exposed["uri"]) == LINK["uri"]


def test_other_blocks_and_malformed_ones_pass_untouched() -> None:
    odd: list[Any] = [TEXT, {"type": "resource_link"}, {"type": "resource", "resource": "x"}, "text", None]
    assert [NS.content_out(block) for block in odd] == odd


def test_a_passthrough_server_keeps_its_uris() -> None:
    result = {"content": [LINK, EMBEDDED]}
    assert PASS.call_result_out(result) is result
    assert PASS.prompt_result_out({"messages": [{"role": "user", "content": LINK}]})["messages"][0]["content"] == LINK


def test_a_call_result_and_a_prompt_result_are_rewritten_block_by_block() -> None:
    result = {"content": [TEXT, LINK], "isError": False, "structuredContent": {"uri": "demo://kept"}}
    out = NS.call_result_out(result)
    assert out["content"] == [TEXT, NS.content_out(LINK)] and out["structuredContent"] == {"uri": "demo://kept"}
    assert result["content"][1] == LINK  # the upstream's own result is not changed in place
    prompt = {"messages": [{"role": "user", "content": EMBEDDED}, {"role": "assistant", "content": TEXT}]}
    assert [m["content"] for m in NS.prompt_result_out(prompt)["messages"]] == [NS.content_out(EMBEDDED), TEXT]
