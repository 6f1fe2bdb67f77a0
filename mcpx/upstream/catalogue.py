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

    def item_out(self, kind: str, item: dict[str, Any]) -> dict[str, Any]:
        field = KINDS[kind][2]
        value = item.get(field)
        if not isinstance(value, str):
            return item
        return {**item, field: self.uri_out(value) if kind.startswith("resource") else self.name_out(value)}


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
