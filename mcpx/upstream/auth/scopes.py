"""Which scopes to ask for (MCP authorization, "Scope Selection Strategy", SEP-2207, SEP-2350).

First sign-in: the challenge's `scope`, else the PRM's `scopes_supported`, else none at all (the
parameter is left out). A configured `oauth.scopes` beats both. Step-up: the union of what was asked
before and what the 403 challenge names. `offline_access` is added when the authorization server
lists it (a refresh token is wanted: the daemon signs in once and keeps going).
"""

from __future__ import annotations

OFFLINE_ACCESS = "offline_access"


def initial(pinned: list[str] | None, challenged: list[str] | None, supported: list[str] | None) -> list[str]:
    for choice in (pinned, challenged, supported):
        if choice:
            return list(dict.fromkeys(choice))
    return []


def union(before: list[str], challenged: list[str] | None) -> list[str]:
    return list(dict.fromkeys([*before, *(challenged or [])]))


def with_offline_access(wanted: list[str], as_supported: list[str] | None) -> list[str]:
    """Ask for a refresh token where the authorization server lists `offline_access`, and never
    otherwise (SEP-2207: not when it is not listed). With no scope to ask for at all the parameter
    stays out: `offline_access` alone would narrow what a server grants by default."""
    listed = bool(as_supported) and OFFLINE_ACCESS in (as_supported or [])
    if not listed:
        return [s for s in wanted if s != OFFLINE_ACCESS]
    return union(wanted, [OFFLINE_ACCESS]) if wanted else []


def covers(granted: list[str] | None, needed: list[str] | None) -> bool:
    """Whether the granted scopes include every needed one (None granted: unknown, assume not)."""
    if not needed:
        return True
    return granted is not None and set(needed) <= set(granted)


def text(scopes: list[str]) -> str:
    return " ".join(scopes)
