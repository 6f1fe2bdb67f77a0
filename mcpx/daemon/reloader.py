"""Reloading the config file: on SIGHUP, when the file changes, or when asked over /v1 (`mcpx reload`).

Each reload reads the file with the same loader the daemon started with. A file that cannot be used
(bad JSON, an unknown key, a bad value) is refused: the reason is logged, kept for `mcpx status`, and
the running config keeps serving. A usable one is applied (config/diff.py says what changes: the
servers, which upstream/reconfigure.py restarts, the notifier's sinks (`notify`: notify/notifier.py)
and the approval gates' settings); settings that only a restart applies are named as needing one.
Either way the reload is an event on the feed (`config.reloaded`, `config.refused`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio

from ..config.diff import ReloadOutcome, ServerChanges, Trigger, diff_servers, needs_restart
from ..config.model import Config, ConfigError, NotifyConfig, load_config
from ..events.bus import Event

log = logging.getLogger("mcpx.daemon")

ApplyServers = Callable[[ServerChanges, Config], Awaitable[None]]
ApplyNotify = Callable[[NotifyConfig], None]  # the notifier's reconfigure
Record = Callable[[Sequence[Event]], Awaitable[object]]  # the store's append: the event, sequence-numbered


class Reloader:
    def __init__(
        self,
        path: Path | None,
        running: Config,
        apply: ApplyServers,
        record: Record,
        *,
        apply_notify: ApplyNotify | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`running` is the config the daemon started with: its settings outside `mcpServers`
        stay in force until a restart, so each reload compares them with the file's."""
        self.path = path
        self.started_with = running
        self.servers = running.active_servers  # what the pool runs now
        self.notify = running.notify  # what the notifier delivers to now
        self.apply_notify = apply_notify
        self.apply = apply
        self.record = record
        self.clock = clock
        self.last: ReloadOutcome | None = None
        self._lock = anyio.Lock()  # one reload at a time, in the order asked
        self._digest: bytes | None = None  # the file's bytes at the last read (the watcher's test)

    def note_current(self) -> None:
        """Remember the file as the daemon read it at start, so that touching it reloads nothing."""
        self._digest = self._read_digest()

    def _read_digest(self) -> bytes | None:
        if self.path is None:
            return None
        try:
            return hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return None

    async def file_changed(self) -> ReloadOutcome | None:
        """The watcher saw the file's stamp change: reload unless its bytes are the same."""
        if self._read_digest() == self._digest:
            log.debug("config %s was touched but reads the same: nothing to reload", self.path)
            return None
        return await self.reload("file", "mcpx")

    async def reload(self, trigger: Trigger, by: str) -> ReloadOutcome:
        async with self._lock:
            try:
                outcome = await self._reload(trigger)
            except Exception as exc:
                log.exception("config reload (%s) failed", trigger)
                error = f"{self.path}: the reload failed: {type(exc).__name__}: {exc}"
                outcome = ReloadOutcome(trigger, int(self.clock() * 1000), str(self.path), error=error)
            self.last = outcome
            if outcome.applied:
                log.info("config reloaded (%s): %s", trigger, outcome.summary())
                if outcome.restart_needed:
                    log.warning(
                        "config %s: %s changed: only a restart applies it; ignored until then",
                        self.path,
                        ", ".join(outcome.restart_needed),
                    )
                event = Event("config.reloaded", {**outcome.source(), **outcome.change_lists()}, by=by)
            else:
                log.error("config reload (%s) %s", trigger, outcome.summary())
                event = Event("config.refused", {**outcome.source(), "error": outcome.error}, by=by)
            try:
                await self.record([event])
            except Exception as exc:  # noqa: BLE001 - the store refused the event: the reload itself stands
                log.error("config reload (%s): its event could not be recorded: %s", trigger, exc)
            return outcome

    async def _reload(self, trigger: Trigger) -> ReloadOutcome:
        now_ms = int(self.clock() * 1000)
        if self.path is None:
            return ReloadOutcome(
                trigger, now_ms, None, error="the daemon started without a config file: there is none to reload"
            )
        self._digest = self._read_digest()
        try:
            new = load_config(self.path)
        except ConfigError as exc:
            return ReloadOutcome(trigger, now_ms, str(self.path), error=str(exc))
        for note in new.warnings:
            log.warning("%s", note)
        changes = diff_servers(self.servers, new.active_servers)
        await self.apply(changes, new)  # the servers that changed, and the live top-level settings
        self.servers = new.active_servers
        if self.apply_notify is not None and new.notify != self.notify:
            self.apply_notify(new.notify)
            log.info(
                "config reloaded: notify now has %d webhook(s) and %d command hook(s)",
                len(new.notify.webhooks),
                len(new.notify.commands),
            )
        self.notify = new.notify
        return ReloadOutcome(trigger, now_ms, str(self.path), changes, needs_restart(self.started_with, new))
