"""SEP-2243 custom headers: a tool's `x-mcp-header` annotations, checked, and its call's arguments
mirrored as `Mcp-Param-{Name}` headers (2026-07-28 streamable-http.mdx "Custom Headers from Tool
Parameters"). Pure.

An annotation is valid when its value is a non-empty HTTP token (RFC 9110 `1*tchar`: no space, colon,
control or non-ASCII character), unique among the schema's annotations ignoring case, on a property of
type `string`, `integer` or `boolean` (a type list of those, `null` allowed beside them: a null value
sends no header), reached from the schema's root through `properties` keys alone (never `items`,
`anyOf`, `$ref`, `$defs`...). A tool with any invalid annotation is left out of the listing
(`InvalidAnnotation` says why). Values: a string as it is, an integer in decimal, a boolean as
`true`/`false`; one that is not plain printable ASCII, has a space at either end, or looks like the
sentinel itself goes as `=?base64?{base64 of its UTF-8}?=`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ANNOTATION = "x-mcp-header"
PREFIX = "Mcp-Param-"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PLAIN = re.compile(r"[\x20-\x7e]*")
_PRIMITIVE = frozenset({"string", "integer", "boolean"})
# Keywords whose value is a schema, a list of schemas, or a map of names to schemas (JSON Schema
# 2020-12 and draft-07): where an annotation may hide. Anything else (const, enum, default, examples)
# is data, not schema.
_SCHEMA = ("additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames",
           "unevaluatedItems", "unevaluatedProperties", "additionalItems")  # fmt: skip
_SCHEMAS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


class InvalidAnnotation(ValueError):
    """Why a tool's `x-mcp-header` annotations make it unusable over HTTP."""


@dataclass(frozen=True, slots=True)
class HeaderParam:
    path: tuple[str, ...]  # the `properties` keys from the schema's root to the annotated property
    name: str  # the annotation: the header is Mcp-Param-{name}


def header_params(input_schema: object) -> tuple[HeaderParam, ...]:
    """The annotated properties of a tool's inputSchema, in schema order; InvalidAnnotation when
    any annotation breaks a rule (the message names the property and the rule)."""
    found: list[HeaderParam] = []
    seen: dict[str, str] = {}  # lower-cased name -> where it was
    for where, schema, reachable in _walk(input_schema, (), True):
        if not isinstance(schema, Mapping) or ANNOTATION not in schema:
            continue
        name, shown = schema[ANNOTATION], ".".join(where) or "(the schema root)"
        if not reachable or not where:
            raise InvalidAnnotation(
                f"{ANNOTATION} on {shown}: only a property reached through `properties` may carry one"
            )
        if not isinstance(name, str) or not name:
            raise InvalidAnnotation(f"{ANNOTATION} on {shown}: it must be a non-empty string")
        if _TOKEN.fullmatch(name) is None:
            raise InvalidAnnotation(
                f"{ANNOTATION} {name!r} on {shown}: a header name is letters, digits and !#$%&'*+-.^_`|~ only"
                " (no space, colon, control or non-ASCII character)"
            )
        if name.lower() in seen:
            raise InvalidAnnotation(f"{ANNOTATION} {name!r} on {shown}: {seen[name.lower()]} has it already")
        types = schema.get("type")
        if isinstance(types, str):
            kinds = {types} - {"null"}
        elif isinstance(types, list) and all(isinstance(t, str) for t in types):
            kinds = set(types) - {"null"}
        else:
            kinds = set()
        if not kinds or not kinds <= _PRIMITIVE:
            raise InvalidAnnotation(
                f"{ANNOTATION} {name!r} on {shown}: only a string, integer or boolean property may carry one"
                f" (its type is {types!r})"
            )
        seen[name.lower()] = shown
        found.append(HeaderParam(where, name))
    return tuple(found)


def _walk(schema: object, where: tuple[str, ...], reachable: bool) -> Iterator[tuple[tuple[str, ...], object, bool]]:
    """Every subschema: (where it is, it, whether only `properties` keys lead to it from the root;
    for those, `where` is that chain of keys)."""
    yield where, schema, reachable
    if not isinstance(schema, Mapping):
        return
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            for name, sub in value.items():
                if key == "properties":
                    yield from _walk(sub, (*where, str(name)), reachable)
                else:
                    yield from _walk(sub, (*where, key, str(name)), False)
        elif key in _SCHEMAS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from _walk(sub, (*where, key, str(i)), False)
        elif key in _SCHEMA and isinstance(value, Mapping):
            yield from _walk(value, (*where, key), False)


def encode(value: str) -> str:
    """A header value as SEP-2243 carries it (`Mcp-Name` too): plain, or the base64 sentinel."""
    sentinel = value.startswith("=?base64?") and value.endswith("?=")
    if _PLAIN.fullmatch(value) and value == value.strip(" ") and not sentinel:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _text(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 42.0 for an integer property
    if isinstance(value, (str, float)):
        return str(value)
    return None  # an object or array: no header form (the server refuses the call on its schema)


def headers_for(params: tuple[HeaderParam, ...], arguments: object) -> dict[str, str]:
    """The `Mcp-Param-*` headers of one call: one for each annotated argument that has a value (an
    absent or null one has none)."""
    out: dict[str, str] = {}
    for p in params:
        value: Any = arguments
        for key in p.path:
            value = value.get(key) if isinstance(value, Mapping) else None
        text = _text(value) if value is not None else None
        if text is not None:
            out[PREFIX + p.name] = encode(text)
    return out
