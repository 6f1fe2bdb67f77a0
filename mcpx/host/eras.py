"""The era variants the dispatcher routes to, built once per daemon and wired to each other."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from ..config.model import Config
from ..questions.broker import Broker
from ..records.task import Task
from ..tasks.engine import TaskEngine
from ..tasks.plain_calls import PlainCalls
from ..upstream.pool import UpstreamPool
from .asking import Asker
from .legacy_task_methods import LegacyTasks
from .listen import Listen
from .modern_task_methods import ModernTasks
from .remote_changes import Announced
from .subscriptions import Hub
from .task_host import TaskHost
from .task_streams import TaskStreams
from .upstream_call import Current, UpstreamCalls


@dataclass(frozen=True)
class Eras:
    calls: UpstreamCalls  # every upstream call of either era is built here
    legacy: LegacyTasks
    modern: ModernTasks
    listen: Listen
    announced: Announced = field(default_factory=Announced)

    async def task_changed(self, task: Task) -> None:
        """Every change of a task goes to its era's hosts (the owning session, or listen streams),
        once: on a shared store the same change may come both from here and from the event log."""
        if not self.announced.fresh(task):
            return
        await (self.modern if task.era == "modern" else self.legacy).announce(task)


def build(
    config: Config, pool: UpstreamPool, hub: Hub, engine: TaskEngine, broker: Broker, current: Current | None = None
) -> Eras:
    streams = TaskStreams(engine.frames)  # a 2025 task's streams: its questions (asking) and results (legacy)
    plain = PlainCalls(engine, show_after_ms=config.calls.showAfterMs, poll_ms=config.tasks.pollIntervalMs)
    asker = Asker(engine, broker, streams)
    calls = UpstreamCalls(config, engine, asker, secrets.token_bytes(32), plain, current=current)
    host = TaskHost(calls, engine, broker, hub, config.tasks)
    modern = ModernTasks(host)
    return Eras(calls, LegacyTasks(host, streams), modern, Listen(pool, hub, modern))
