"""Prometheus metrics of one daemon, in a registry of its own (several daemons may share a process).

Counts of tasks and questions are derived from the event bus, which already sees every change in
commit order, so the hot path gains nothing for them; a host's tools/call is timed by the router
(one dict lookup and two observations); upstream states and feed subscribers are read at scrape
time. Labels stay bounded: no task, question or connection ids, no arguments, and a tool label only
for tools an upstream lists, the first `toolLabels` per upstream (the rest are `other`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..events.bus import EventBus, StoredEvent, Subscriber
from ..events.kinds import EVENT_KINDS, QUESTION_CLOSED, EventKind

log = logging.getLogger("mcpx.metrics")

OTHER = "other"
UNKNOWN_UPSTREAM = "unknown"
# Seconds: from well under a millisecond (a proxied echo) to the long calls tasks are for.
CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
WAIT_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
TERMINAL = frozenset({"completed", "failed", "cancelled"})
# The bus events metrics are derived from (the tap's filter: nothing else is queued for it).
TAPPED: frozenset[EventKind] = frozenset(k for k in EVENT_KINDS if k.startswith(("task.", "question.")))
TAP_QUEUE = 100_000  # events the tap may lag behind before it misses some (counted, logged)

RouteOf = Callable[[object], "tuple[str, str] | None"]  # exposed tool name -> (upstream, its own tool name)
UpstreamRows = Callable[[], Iterable["tuple[str, str, int]"]]  # (upstream, state, restarts)
UPSTREAM_STATES = ("starting", "ready", "restarting", "down", "stopped")  # upstream/pool.py UpstreamState


def call_outcome(frame: dict[str, Any] | None) -> str:
    """A host's tools/call as one word: what the reply frame says happened."""
    if frame is None:
        return "cancelled"
    if "error" in frame:
        return "error"
    result = frame.get("result")
    if not isinstance(result, dict):
        return "ok"
    if result.get("isError") is True:
        return "tool_error"
    if result.get("resultType") == "input_required":
        return "input_required"
    if "task" in result or result.get("resultType") == "task":
        return "task"
    return "ok"


def answered_by(by: str | None) -> str:
    """Who answered, as a bounded label: operator, host, mcpx (expiry, defaults) or other."""
    kind = (by or "").partition(":")[0]
    return kind if kind in ("operator", "host", "mcpx") else OTHER


class Metrics:
    def __init__(
        self,
        *,
        route_of: RouteOf,
        upstreams: UpstreamRows,
        feed_subscribers: Callable[[], int],
        tool_labels: int = 200,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._route_of = route_of
        self._tool_labels = tool_labels
        self._tools_kept: dict[str, set[str]] = {}
        call_labels = ["upstream", "tool", "era", "outcome"]
        self.calls = Counter(
            "mcpx_tool_calls", "Host tools/call requests answered, by outcome.", call_labels, registry=r
        )
        self.call_seconds = Histogram(
            "mcpx_tool_call_duration_seconds",
            "Time from a host's tools/call to mcpx's reply (a task-creating call: until the task's handle).",
            call_labels,
            buckets=CALL_BUCKETS,
            registry=r,
        )
        self._call_children: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}
        self.tasks_created = Counter(
            "mcpx_tasks_created", "Tasks created (kind call: a listed plain call).", ["kind"], registry=r
        )
        self.tasks_ended = Counter(
            "mcpx_tasks_ended", "Tasks that reached a terminal status.", ["kind", "status"], registry=r
        )
        self.tasks_expired = Counter("mcpx_tasks_expired", "Tasks deleted at the end of their TTL.", registry=r)
        self.questions_opened = Counter("mcpx_questions_opened", "Questions opened.", ["method"], registry=r)
        self.questions_open = Gauge(
            "mcpx_questions_open", "Questions open now (opened since this daemon started).", registry=r
        )
        self.question_wait = Histogram(
            "mcpx_question_wait_seconds",
            "How long a question stayed open, by how it closed (answered, expired).",
            ["outcome"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.answers = Counter(
            "mcpx_question_answers", "Questions answered, by who answered (operator, host, mcpx).", ["by"], registry=r
        )
        self.feed_gaps = Counter("mcpx_feed_gaps", "Feed subscribers that fell behind and were sent a gap.", registry=r)
        self.events_missed = Counter(
            "mcpx_metrics_events_missed",
            "Events the metrics tap fell behind on (its counts are short by these).",
            registry=r,
        )
        self.store_commit = Histogram(
            "mcpx_store_commit_duration_seconds",
            "One store write batch's transaction, to its commit.",
            buckets=COMMIT_BUCKETS,
            registry=r,
        )
        ProcessCollector(registry=r)
        r.register(_LiveState(upstreams, feed_subscribers, self._open_tasks))
        self._task_kind: dict[str, tuple[str, str]] = {}  # open task -> (kind, status), from events
        self._opened_ms: dict[str, int] = {}  # open question -> when it opened

    # ---- calls (the router, per host tools/call) ------------------------------------------
    def observe_call(self, name: object, era: str, frame: dict[str, Any] | None, seconds: float) -> None:
        upstream, tool = self._labels(name)
        key = (upstream, tool, era, call_outcome(frame))
        children = self._call_children.get(key)
        if children is None:
            children = self._call_children[key] = (self.calls.labels(*key), self.call_seconds.labels(*key))
        children[0].inc()
        children[1].observe(seconds)

    def _labels(self, name: object) -> tuple[str, str]:
        route = self._route_of(name)
        if route is None:
            return UNKNOWN_UPSTREAM, OTHER
        upstream, tool = route
        kept = self._tools_kept.setdefault(upstream, set())
        if tool in kept:
            return upstream, tool
        if len(kept) < self._tool_labels:
            kept.add(tool)
            return upstream, tool
        return upstream, OTHER

    # ---- the store's writer -------------------------------------------------------------
    def observe_commit(self, seconds: float) -> None:
        self.store_commit.observe(seconds)

    # ---- the event bus --------------------------------------------------------------------
    async def tap(self, bus: EventBus, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Count from the bus until cancelled; subscribed before `task_status.started()`."""
        from ..events.bus import EventFilter

        sub = bus.subscribe(Subscriber(filter=EventFilter(kinds=frozenset(TAPPED)), internal=True, max_queue=TAP_QUEUE))
        try:
            task_status.started()
            while True:
                await sub.wait()
                if sub.overflowed:  # never blocks the bus: what it missed is counted and said
                    self.events_missed.inc(max(1, len(sub.queue)))
                    log.warning("metrics fell behind the event bus; some task and question counts are short")
                    sub.queue.clear()
                    sub.overflowed = False
                while sub.queue:
                    self.count(sub.queue.popleft())
        finally:
            bus.unsubscribe(sub)

    def count(self, stored: StoredEvent) -> None:
        """Fold one event into the counts (pure bookkeeping: unit-tested without a bus)."""
        e = stored.event
        data = e.data
        if e.kind == "task.created" and e.task_id is not None:
            kind = str(data.get("kind") or "task")
            self.tasks_created.labels(kind).inc()
            self._task_kind[e.task_id] = (kind, str(data.get("status") or "working"))
            if data.get("status") in TERMINAL:
                self._ended(e.task_id, str(data["status"]))
        elif e.kind == "task.status" and e.task_id is not None:
            status = str(data.get("status"))
            if status == data.get("previous"):
                return  # a status message changed, not the status
            if status in TERMINAL:
                self._ended(e.task_id, status)
            elif e.task_id in self._task_kind:
                self._task_kind[e.task_id] = (self._task_kind[e.task_id][0], status)
        elif e.kind == "task.expired" and e.task_id is not None:
            self.tasks_expired.inc()
            self._task_kind.pop(e.task_id, None)
        elif e.kind == "question.opened" and e.question_id is not None:
            self.questions_opened.labels(str(data.get("method") or OTHER)).inc()
            self._opened_ms[e.question_id] = stored.ts_ms
            self.questions_open.set(len(self._opened_ms))
        elif e.kind in QUESTION_CLOSED and e.question_id is not None:
            if e.kind == "question.answered":
                self.answers.labels(answered_by(e.by or data.get("by"))).inc()
            opened = self._opened_ms.pop(e.question_id, None)
            if opened is not None:
                outcome = e.kind.removeprefix("question.")
                self.question_wait.labels(outcome).observe(max(0, stored.ts_ms - opened) / 1000)
            self.questions_open.set(len(self._opened_ms))

    def _ended(self, task_id: str, status: str) -> None:
        kind = self._task_kind.pop(task_id, ("task", ""))[0]
        self.tasks_ended.labels(kind, status).inc()

    def _open_tasks(self) -> Iterator[tuple[str, str, int]]:
        counts: dict[tuple[str, str], int] = {}
        for pair in self._task_kind.values():
            counts[pair] = counts.get(pair, 0) + 1
        for (kind, status), n in counts.items():
            yield kind, status, n


class _LiveState(Collector):
    """What is read at scrape time rather than counted: upstreams, feed subscribers, open tasks."""

    def __init__(
        self,
        upstreams: UpstreamRows,
        feed_subscribers: Callable[[], int],
        open_tasks: Callable[[], Iterator[tuple[str, str, int]]],
    ) -> None:
        self._upstreams = upstreams
        self._subscribers = feed_subscribers
        self._open_tasks = open_tasks

    def describe(self) -> list[Any]:
        return []  # collected only on a scrape, never at registration

    def collect(self) -> Iterator[Any]:
        restarts = CounterMetricFamily(
            "mcpx_upstream_restarts", "Times each upstream was restarted.", labels=["upstream"]
        )
        state = GaugeMetricFamily(
            "mcpx_upstream_state", "1 for each upstream's current state.", labels=["upstream", "state"]
        )
        for name, now, count in self._upstreams():
            restarts.add_metric([name], count)
            for s in {*UPSTREAM_STATES, now}:
                state.add_metric([name, s], 1.0 if s == now else 0.0)
        yield restarts
        yield state
        yield GaugeMetricFamily(
            "mcpx_feed_subscribers", "Feed (/v1/events) subscribers now.", value=self._subscribers()
        )
        tasks = GaugeMetricFamily(
            "mcpx_tasks_open",
            "Unfinished tasks by status (those created since this daemon started).",
            labels=["kind", "status"],
        )
        for kind, status, n in self._open_tasks():
            tasks.add_metric([kind, status], n)
        yield tasks
