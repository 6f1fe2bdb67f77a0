"""What the console demo's hosts call, and how often: a weighted menu per host, a scripted opening
so the console shows every kind of task within seconds, and one question open at a time.

Pure (the caller owns the random source), so the menus can be read and tested as data.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DEMO = "demo__"  # the demo upstream's namespace
RELEASE = "release__"  # the asking tools' upstream (see demo_console.py for why it is a second process)


@dataclass(frozen=True)
class Call:
    tool: str  # as the host sees it: <namespace>__<tool>
    arguments: dict[str, Any] = field(default_factory=dict)
    as_task: bool = True  # 2025-11-25 hosts: send params.task (2026: the daemon decides)
    asks: bool = False  # the upstream will ask a question mid-call
    cancel_after: float | None = None  # the host cancels it after this many seconds


Make = Callable[[random.Random], Call]
Menu = list[tuple[int, Make]]


def _build(rng: random.Random) -> Call:
    return Call(DEMO + "build", {"target": rng.choice(["app", "docs", "cli", "api"])})


def _report(rng: random.Random) -> Call:
    return Call(DEMO + "report", {"period": rng.choice(["day", "week", "month"])})


def _flaky(rng: random.Random) -> Call:
    return Call(DEMO + "flaky")


def _watch(rng: random.Random) -> Call:
    return Call(DEMO + "watch", {"target": rng.choice(["queue", "inbox", "builds"])}, cancel_after=rng.uniform(6, 20))


def _countdown(rng: random.Random) -> Call:
    return Call(DEMO + "countdown", {"n": rng.randint(5, 15)})


def _deploy(rng: random.Random) -> Call:
    service = rng.choice(["web", "api", "worker"])
    version = f"1.{rng.randint(0, 9)}.{rng.randint(0, 20)}"
    return Call(RELEASE + "deploy", {"service": service, "version": version}, asks=True)


def _confirm(rng: random.Random) -> Call:
    question = rng.choice(["Run the database migration?", "Rotate the API keys now?", "Clear the build cache?"])
    return Call(RELEASE + "confirm", {"question": question}, asks=True)


def _echo(rng: random.Random) -> Call:
    return Call(DEMO + "echo", {"text": rng.choice(["hello", "ping", "status?"])}, as_task=False)


def _add(rng: random.Random) -> Call:
    return Call(DEMO + "add", {"a": rng.randint(1, 99), "b": rng.randint(1, 99)}, as_task=False)


def _plain(make: Make) -> Make:
    """The same call without params.task: a plain 2025 call (progress on its own request)."""

    def plain(rng: random.Random) -> Call:
        call = make(rng)
        return Call(call.tool, call.arguments, False, call.asks, call.cancel_after)

    return plain


# An IDE from 2025: every call a task it polls; it stops a watch after a while.
LEGACY_IDE: Menu = [(3, _build), (2, _report), (2, _flaky), (1, _watch), (1, _countdown), (2, _deploy), (1, _confirm)]
LEGACY_IDE_OPENING: list[Make] = [_build, _watch]
# A 2026 agent: the daemon decides what becomes a task (slow calls); fast ones answer inline.
AGENT: Menu = [(1, _echo), (1, _add), (2, _report), (2, _build), (1, _flaky), (1, _watch), (2, _deploy), (1, _confirm)]
AGENT_OPENING: list[Make] = [_deploy, _report]
# A command-line tool on stdio: quick plain calls, tasks for the slow ones.
CLI: Menu = [(2, _echo), (2, _add), (2, _plain(_countdown)), (1, _build), (1, _report), (1, _flaky), (1, _confirm)]
CLI_OPENING: list[Make] = [_flaky, _echo]


class Gate:
    """One question open at a time, across the hosts: the asking upstream serves one at a time."""

    def __init__(self) -> None:
        self.busy = False

    def take(self) -> bool:
        if self.busy:
            return False
        self.busy = True
        return True

    def release(self) -> None:
        self.busy = False


class Plan:
    """A host's next call: its opening first, then weighted picks (asking ones while the gate is free)."""

    def __init__(self, menu: Menu, opening: list[Make], rng: random.Random, gate: Gate) -> None:
        self.menu = menu
        self.opening = list(opening)
        self.rng = rng
        self.gate = gate

    def next(self) -> Call:
        """The next call; an asking one holds the gate until `done()` is called with it."""
        while True:
            make = self.opening.pop(0) if self.opening else self._pick()
            call = make(self.rng)
            if not call.asks or self.gate.take():
                return call

    def done(self, call: Call) -> None:
        if call.asks:
            self.gate.release()

    def _pick(self) -> Make:
        weights = [w for w, _ in self.menu]
        return self.rng.choices([m for _, m in self.menu], weights)[0]
