"""SEP-2243 `x-mcp-header` rules (mcpx/protocol/param_headers.py): which annotations make a tool
unusable, and how a call's arguments become `Mcp-Param-*` headers (2026-07-28 streamable-http.mdx
"Custom Headers from Tool Parameters", its encoding table)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.protocol.param_headers import HeaderParam, InvalidAnnotation, encode, header_params, headers_for


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def s(name: Any, kind: Any = "string") -> dict[str, Any]:
    return {"type": kind, "x-mcp-header": name}


# The conformance suite's invalid tools (http-invalid-tool-headers), each left out.
INVALID = {
    "empty": obj(value=s("")),
    "object": obj(data=s("Data", "object")),
    "array": obj(items={"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"}),
    "null": obj(nil=s("Nil", "null")),
    "number": obj(score=s("Score", "number")),
    "duplicate same case": obj(field1=s("Region"), field2=s("Region")),
    "duplicate other case": obj(field1=s("MyField"), field2=s("myfield")),
    "space": obj(value=s("My Region")),
    "colon": obj(value=s("Region:Primary")),
    "non-ASCII": obj(value=s("Région")),
    "control character": obj(value=s("Region\t1")),
    "not a string": obj(value=s(7)),
    "no type": obj(value={"enum": ["a"], "x-mcp-header": "V"}),
    "inside anyOf": obj(v={"anyOf": [s("V")]}),
    "inside $defs": {**obj(v={"$ref": "#/$defs/d"}), "$defs": {"d": s("V")}},
    "inside items of a property": obj(v={"type": "array", "items": s("V")}),
    "on the root": {**obj(), "x-mcp-header": "Root"},
    "inside if/then": obj(v={"if": s("A"), "then": s("B")}),
}


@pytest.mark.parametrize("schema", INVALID.values(), ids=INVALID.keys())
def test_an_invalid_annotation_makes_the_tool_invalid(schema: dict[str, Any]) -> None:
    with pytest.raises(InvalidAnnotation):
        header_params(schema)


def test_valid_annotations_are_found_through_properties_only_in_schema_order() -> None:
    schema = obj(
        region=s("Region"),
        n=s("N", "integer"),
        flag=s("Flag", ["boolean", "null"]),
        nested={"type": "object", "properties": {"deep": s("Deep")}},
        plain={"type": "string", "description": "x-mcp-header in a description is nothing"},
        data={"type": "object", "default": {"x-mcp-header": "NotAnAnnotation"}},
    )
    assert header_params(schema) == (
        HeaderParam(("region",), "Region"),
        HeaderParam(("n",), "N"),
        HeaderParam(("flag",), "Flag"),
        HeaderParam(("nested", "deep"), "Deep"),
    )
    assert header_params({"type": "object"}) == () and header_params(None) == ()
    assert header_params(obj(**{"x-mcp-header": {"type": "string"}})) == ()  # a property named so


@pytest.mark.parametrize(
    ("value", "header"),
    [  # the SEP's encoding examples, and the conformance suite's values
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ("us west 1", "us west 1"),
        ("\tindented", "=?base64?CWluZGVudGVk?="),
        ("", ""),
    ],
)
def test_values_are_encoded_as_the_sep_says(value: str, header: str) -> None:
    assert encode(value) == header


def test_a_call_sends_a_header_for_each_annotated_argument_with_a_value() -> None:
    params = header_params(obj(r=s("R"), i=s("I", "integer"), b=s("B", "boolean"), o={"properties": {"z": s("Z")}}))
    assert headers_for(params, {"r": "x", "i": 42, "b": False, "o": {"z": "é"}}) == {
        "Mcp-Param-R": "x",
        "Mcp-Param-I": "42",
        "Mcp-Param-B": "false",
        "Mcp-Param-Z": "=?base64?w6k=?=",
    }
    assert headers_for(params, {"r": None, "i": 42.0, "o": "not an object"}) == {"Mcp-Param-I": "42"}
    assert headers_for(params, None) == {}
