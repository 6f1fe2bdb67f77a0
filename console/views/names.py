"""The views `:` switches between, and completing what was typed into one of them. Pure."""

from __future__ import annotations

VIEWS = ("tasks", "questions", "hosts", "upstreams", "events")
# Short names a k9s user types; a unique prefix works as well.
ALIASES = {"t": "tasks", "q": "questions", "qs": "questions", "h": "hosts", "up": "upstreams", "ev": "events"}


def _typed(text: str) -> str:
    return text.strip().removeprefix(":").strip().lower()


def completions(text: str) -> list[str]:
    """Every view whose name starts with what was typed (all of them for nothing typed)."""
    typed = _typed(text)
    return [v for v in VIEWS if v.startswith(typed)]


def complete(text: str) -> str | None:
    """The rest of the name to suggest: the first view that starts with what was typed."""
    typed = _typed(text)
    found = completions(text) if typed else []
    return found[0] if found else None


def resolve(text: str) -> str | None:
    """The view meant: a whole name, an alias, or a prefix only one view has; else None."""
    typed = _typed(text)
    if typed in VIEWS:
        return typed
    if typed in ALIASES:
        return ALIASES[typed]
    found = completions(text) if typed else []
    return found[0] if len(found) == 1 else None
