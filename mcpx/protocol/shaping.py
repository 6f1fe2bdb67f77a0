"""Trim what an upstream sends to what the host's revision allows. Everything else passes verbatim.

Upstreams do not do this themselves (the SDK 2.3 server sends `structuredContent` to a 2025-03-26
session), so the gateway must. Only fields a revision does not define are removed; unknown fields
that a revision permits (every result and tool is open) are kept.
"""

from __future__ import annotations

from typing import Any

from .revisions import META_SERVER_INFO, MODERN, at_least

# Tool fields and the first revision that defines them (absent from this table: present in all).
# `execution` (taskSupport) came with 2025-11-25 tasks (2025-11-25/changelog.mdx:20; DIGEST 2.2):
# a 2025-06-18 or 2025-03-26 host cannot task-augment, so it must not see the field.
_TOOL_FIELD_SINCE = {
    "title": "2025-06-18",
    "outputSchema": "2025-06-18",
    "icons": "2025-11-25",
    "execution": "2025-11-25",
}
_RESULT_FIELD_SINCE = {"structuredContent": "2025-06-18"}
# `execution.taskSupport` is 2025-11-25 core tasks; 2026 moved tasks to an extension without it.
_LEGACY_ONLY_TOOL_FIELDS = ("execution",)


def item_for(item: dict[str, Any], revision: str) -> dict[str, Any]:
    """A listed tool, prompt, resource or template without fields the revision does not define."""
    return tool_for(item, revision)


def tool_for(tool: dict[str, Any], revision: str) -> dict[str, Any]:
    out = {k: v for k, v in tool.items() if k not in _TOOL_FIELD_SINCE or at_least(revision, _TOOL_FIELD_SINCE[k])}
    if revision == MODERN:
        for k in _LEGACY_ONLY_TOOL_FIELDS:
            out.pop(k, None)
    return out


def result_for(result: dict[str, Any], revision: str) -> dict[str, Any]:
    """A result from any upstream era, shaped for a host at `revision`."""
    out = {
        k: v for k, v in result.items() if k not in _RESULT_FIELD_SINCE or at_least(revision, _RESULT_FIELD_SINCE[k])
    }
    if revision == MODERN:
        # A legacy upstream's result has no resultType; a modern client must see one (DIGEST 3.1).
        out.setdefault("resultType", "complete")
    else:
        # resultType is the 2026 discriminator, not payload: a handshake host has no use for it.
        out.pop("resultType", None)
        meta = out.get("_meta")
        if isinstance(meta, dict) and META_SERVER_INFO in meta:
            # The upstream's 2026 self-identification: neither defined for this host nor about mcpx.
            meta = {k: v for k, v in meta.items() if k != META_SERVER_INFO}
            if meta:
                out["_meta"] = meta
            else:
                del out["_meta"]
    return out


def content_for(content: list[Any], revision: str) -> list[Any]:
    """resource_link content blocks exist only from 2025-06-18 on: older hosts get a text stand-in."""
    if at_least(revision, "2025-06-18"):
        return content
    out: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "resource_link":
            out.append({"type": "text", "text": f"{block.get('name', 'resource')}: {block.get('uri', '')}"})
        else:
            out.append(block)
    return out


def call_result_for(result: dict[str, Any], revision: str) -> dict[str, Any]:
    out = result_for(result, revision)
    if isinstance(out.get("content"), list):
        out["content"] = content_for(out["content"], revision)
    return out


def read_result_for(result: dict[str, Any], revision: str) -> dict[str, Any]:
    """ReadResourceResult: in 2026 a CacheableResult (no upstream hint: revalidate, private);
    before, without the 2026 cache fields a modern upstream may have sent."""
    out = result_for(result, revision)
    if revision == MODERN:
        out.setdefault("ttlMs", 0)
        out.setdefault("cacheScope", "private")
    else:
        out.pop("ttlMs", None)
        out.pop("cacheScope", None)
    return out
