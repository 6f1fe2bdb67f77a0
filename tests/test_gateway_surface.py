"""Resources, prompts and completion through a *namespaced* server (the conformance suite covers the
passthrough case): names become `<ns>__<name>`, URIs `mcpx://<ns>/<uri>` (also those inside what a
tool or a prompt returns, so a host can read them back), content passes verbatim otherwise."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from harness import ROOT, RawHost, reply_of

SERVER = ROOT / "tests" / "conformance" / "server.py"


@pytest.fixture
def host(start_daemon: Any, raw_host: Any) -> RawHost:
    d = start_daemon({"mcpServers": {"cf": {"command": sys.executable, "args": [str(SERVER), "stdio"]}}})
    return raw_host(d.url)


def test_resources_are_namespaced_and_read_back_verbatim(host: RawHost) -> None:
    listed = host.modern("resources/list").json()["result"]
    uris = [r["uri"] for r in listed["resources"]]
    assert uris[0] == "mcpx://cf/test://static-text" and "ttlMs" in listed
    text = host.modern("resources/read", {"uri": "mcpx://cf/test://static-text"}).json()["result"]
    assert text["contents"][0] == {
        "uri": "mcpx://cf/test://static-text",
        "mimeType": "text/plain",
        "text": "This is the content of the static text resource.",
    }
    blob = host.modern("resources/read", {"uri": "mcpx://cf/test://static-binary"}).json()["result"]["contents"][0]
    assert blob["mimeType"] == "image/png" and "blob" in blob and "text" not in blob


def test_resource_templates_are_namespaced_and_matching_uris_route(host: RawHost) -> None:
    templates = host.modern("resources/templates/list").json()["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["mcpx://cf/test://template/{id}/data"]
    data = host.modern("resources/read", {"uri": "mcpx://cf/test://template/123/data"}).json()["result"]["contents"][0]
    assert "123" in data["text"] and data["uri"] == "mcpx://cf/test://template/123/data"


def test_unknown_resource_is_invalid_params(host: RawHost) -> None:
    for uri in ("mcpx://cf/test://nope", "mcpx://other/x", "file:///etc/passwd"):
        assert host.modern("resources/read", {"uri": uri}).json()["error"]["code"] == -32602


def test_prompts_and_completion_use_namespaced_names(host: RawHost) -> None:
    host.initialize()
    names = [p["name"] for p in host.legacy("prompts/list").json()["result"]["prompts"]]
    assert "cf__test_prompt_with_arguments" in names and all(n.startswith("cf__") for n in names)
    got = reply_of(
        host.legacy(
            "prompts/get", {"name": "cf__test_prompt_with_arguments", "arguments": {"arg1": "A1", "arg2": "B2"}}
        )
    )["result"]
    text = got["messages"][0]["content"]["text"]
    assert "A1" in text and "B2" in text
    done = host.legacy(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "cf__test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "t"},
        },
    ).json()["result"]
    assert isinstance(done["completion"]["values"], list)
    assert host.legacy("prompts/get", {"name": "test_prompt_with_arguments"}).json()["error"]["code"] == -32602


def test_legacy_resource_subscription_is_accepted_and_forwarded(host: RawHost) -> None:
    host.initialize()
    assert host.legacy("resources/subscribe", {"uri": "mcpx://cf/test://watched-resource"}).json()["result"] == {}
    assert host.legacy("resources/unsubscribe", {"uri": "mcpx://cf/test://watched-resource"}).json()["result"] == {}


def test_resource_uris_inside_tool_results_are_exposed_ones(host: RawHost) -> None:
    host.initialize()
    got = reply_of(host.legacy("tools/call", {"name": "cf__test_multiple_content_types", "arguments": {}}))
    content = got["result"]["content"]
    assert [c["type"] for c in content] == ["text", "image", "resource"]
    assert content[2]["resource"]["uri"] == "mcpx://cf/test://mixed-content-resource"
    assert content[2]["resource"]["text"] == '{"test": "data", "value": 123}'  # the rest untouched
    modern = host.modern("tools/call", {"name": "cf__test_embedded_resource", "arguments": {}})
    assert modern.json()["result"]["content"][0]["resource"]["uri"] == "mcpx://cf/test://embedded-resource"


def test_a_resource_a_prompt_embeds_can_be_read_back_by_the_uri_the_host_got(host: RawHost) -> None:
    host.initialize()
    got = reply_of(
        host.legacy(
            "prompts/get",
            {"name": "cf__test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://static-text"}},
        )
    )["result"]
    uri = got["messages"][0]["content"]["resource"]["uri"]
    assert uri == "mcpx://cf/test://static-text"
    read = reply_of(host.legacy("resources/read", {"uri": uri}))["result"]
    assert read["contents"][0]["text"] == "This is the content of the static text resource."
