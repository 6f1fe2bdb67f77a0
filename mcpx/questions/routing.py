"""The one line that says who a question was put to and why, worded where the route is chosen
(host/asking.py, the approval gate, a shared stdio server's unattributable request). Pure."""

from __future__ import annotations

from collections.abc import Sequence

_FOR_OPERATOR = "waiting for an operator: "


def asked_of_host(capability: str | None, *, in_task: bool = False) -> str:
    where = " as one of its task's input requests" if in_task else ""
    return f"asked of the host{where} (it declared {capability or 'the capability'})"


def host_lacks(capability: str | None) -> str:
    return f"{_FOR_OPERATOR}the host did not declare {capability or 'the capability'}"


def why_not_the_host(why: str | None) -> str | None:
    """Why the host was not asked, from a line above that left the question to an operator."""
    return why[len(_FOR_OPERATOR) :] if why is not None and why.startswith(_FOR_OPERATOR) else None


def host_unreachable() -> str:
    return "waiting for an operator: the host's request has no stream left to ask it on"


def host_gone() -> str:
    return "waiting for an operator: the host that owns this process has disconnected"


def no_channel_outside_a_call(era: str | None) -> str:
    if era != "legacy":
        return "waiting for an operator: no call was in flight, and a 2026-07-28 host is asked only within a call"
    return "waiting for an operator: no call was in flight, and the host has no stream open to ask it on"


def approval_gate(gate: str) -> str:
    return f"waiting for an operator: approval gate `{gate}`"


def unattributable(calls: int, hosts: Sequence[str], transport: str = "stdio") -> str:
    named = f" (hosts {', '.join(hosts)})" if hosts else ""
    where = "this stdio server" if transport == "stdio" else "this server (it asked on its GET stream)"
    return f"waiting for an operator: {calls} calls were in flight on {where}{named}"
