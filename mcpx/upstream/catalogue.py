"""How upstream names and URIs appear to hosts. Pure.

Namespaced servers: tools and prompts become `<ns>__<name>`; resource URIs (and templates) become
`mcpx://<ns>/<original uri>`, which stays a valid URI and a valid template. Passthrough servers keep
their own names and URIs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SEP = "__"
URI_PREFIX = "mcpx://"

# kind -> (list method, result key, identifying field, capability the server must declare)
KINDS: dict[str, tuple[str, str, str, str]] = {
    "tools": ("tools/list", "tools", "name", "tools"),
    "prompts": ("prompts/list", "prompts", "name", "prompts"),
    "resources": ("resources/list", "resources", "uri", "resources"),
    "resourceTemplates": ("resources/templates/list", "resourceTemplates", "uriTemplate", "resources"),
}
# Which list a list_changed notification invalidates.
CHANGED = {
    "notifications/tools/list_changed": ("tools",),
    "notifications/prompts/list_changed": ("prompts",),
    "notifications/resources/list_changed": ("resources", "resourceTemplates"),
}


@dataclass(frozen=True)
class Naming:
    namespace: str | None  # None = passthrough

    def name_out(self, name: str) -> str:
        return name if self.namespace is None else f"{self.namespace}{SEP}{name}"

    def name_in(self, exposed: str) -> str | None:
        if self.namespace is None:
            return exposed
        prefix = f"{self.namespace}{SEP}"
        return exposed[len(prefix) :] if exposed.startswith(prefix) else None

    def uri_out(self, uri: str) -> str:
        return uri if self.namespace is None else f"{URI_PREFIX}{self.namespace}/{uri}"

    def uri_in(self, exposed: str) -> str | None:
        if self.namespace is None:
            return exposed
        prefix = f"{URI_PREFIX}{self.namespace}/"
        return exposed[len(prefix) :] if exposed.startswith(prefix) else None

    def content_out(self, block: object) -> object:
        """A content block as hosts see it: a `resource_link`'s URI, or an embedded `resource`'s,
        becomes the exposed one, so the host can read back what a tool or prompt gave it."""
        if self.namespace is None or not isinstance(block, dict):
            return block
        kind = block.get("type")
        if kind == "resource_link" and isinstance(block.get("uri"), str):
            return {**block, "uri": self.uri_out(block["uri"])}
        resource = block.get("resource")
        if kind == "resource" and isinstance(resource, dict) and isinstance(resource.get("uri"), str):
            return {**block, "resource": {**resource, "uri": self.uri_out(resource["uri"])}}
        return block

    def call_result_out(self, result: dict[str, Any]) -> dict[str, Any]:
        """A CallToolResult with its content's resource URIs exposed (content_out)."""
        content = result.get("content")
        if self.namespace is None or not isinstance(content, list) or not any(map(_names_a_resource, content)):
            return result  # the usual case, on the hot path: nothing to copy
        return {**result, "content": [self.content_out(block) for block in content]}

    def prompt_result_out(self, result: dict[str, Any]) -> dict[str, Any]:
        """A GetPromptResult with each message's resource URIs exposed (content_out)."""
        messages = result.get("messages")
        if self.namespace is None or not isinstance(messages, list):
            return result
        out = [
            {**m, "content": self.content_out(m["content"])} if isinstance(m, dict) and "content" in m else m
            for m in messages
        ]
        return {**result, "messages": out}

    def item_out(self, kind: str, item: dict[str, Any]) -> dict[str, Any]:
        field = KINDS[kind][2]
        value = item.get(field)
        if not isinstance(value, str):
            return item
        return {**item, field: self.uri_out(value) if kind.startswith("resource") else self.name_out(value)}


def _names_a_resource(block: object) -> bool:
    return isinstance(block, dict) and block.get("type") in ("resource_link", "resource")


def template_matches(template: str, uri: str) -> bool:
    """RFC 6570 level-1 match: each {var} matches a run of characters (`{+var}`/`{/var}` may span '/')."""
    pattern = ""
    for part in re.split(r"(\{[^}]*\})", template):
        if part.startswith("{") and part.endswith("}"):
            pattern += ".*" if part[1:2] in ("+", "/", "#") else "[^/]*"
        else:
            pattern += re.escape(part)
    return re.fullmatch(pattern, uri) is not None


def valid_items(kind: str, items: object) -> list[dict[str, Any]]:
    field = KINDS[kind][2]
    if not isinstance(items, list):
        return []  # a broken upstream's list is no list at all
    return [i for i in items if isinstance(i, dict) and isinstance(i.get(field), str)]
