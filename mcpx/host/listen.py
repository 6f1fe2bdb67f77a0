"""2026 `subscriptions/listen`: one long-lived stream of list changes, resource updates and tasks."""

from __future__ import annotations

from typing import Any

import anyio

from ..protocol import jsonrpc
from ..protocol.errors import InvalidParams, McpError
from ..protocol.jsonrpc import Id
from ..protocol.revisions import META_SUBSCRIPTION
from ..upstream.pool import UpstreamPool, UpstreamServer
from .capabilities import server_capabilities
from .connection import RequestContext
from .modern_task_methods import ModernTasks
from .subscriptions import LIST_FILTERS, Hub, Listener

_KIND_OF_FILTER = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}


class Listen:
    def __init__(self, pool: UpstreamPool, hub: Hub, tasks: ModernTasks) -> None:
        self.pool = pool
        self.hub = hub
        self.tasks = tasks

    async def __call__(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        """Acknowledge what is agreed, send the current state of the tasks asked for, then relay
        changes until the host closes the stream (the request never completes otherwise)."""
        rid: Id | None = ctx.request_id
        if rid is None:
            raise InvalidParams("subscriptions/listen must be a request: its id names the subscription")
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams("subscriptions/listen: params.notifications must be an object")
        if ctx.notify is None:
            raise InvalidParams("subscriptions/listen needs a stream: send Accept: text/event-stream")
        caps = server_capabilities(self.pool)
        agreed: dict[str, Any] = {}
        methods: set[str] = set()
        for key, method in LIST_FILTERS.items():
            if wanted.get(key) is True and _KIND_OF_FILTER[key] in caps:
                agreed[key] = True
                methods.add(method)
        resources: set[str] = set()
        watched: list[tuple[UpstreamServer, str]] = []
        if isinstance(wanted.get("resourceSubscriptions"), list) and caps.get("resources", {}).get("subscribe"):
            for exposed in wanted["resourceSubscriptions"]:
                if not isinstance(exposed, str):
                    continue
                try:
                    server, uri = self.pool.resolve_uri(exposed)
                except McpError:
                    continue  # not a resource mcpx can route: not agreed
                resources.add(exposed)
                watched.append((server, uri))
            agreed["resourceSubscriptions"] = sorted(resources)
        task_ids: list[str] = []
        if "taskIds" in wanted:
            task_ids = await self.tasks.listen_tasks(ctx, wanted["taskIds"])
            agreed["taskIds"] = task_ids
        listener = Listener(rid, ctx.notify, methods, resources, set(task_ids))
        await ctx.notify(
            jsonrpc.notification(
                "notifications/subscriptions/acknowledged", {"_meta": {META_SUBSCRIPTION: rid}, "notifications": agreed}
            )
        )
        subscription = self.hub.add(listener)
        try:
            for server, uri in watched:
                await server.watch(uri)
            for task_id in task_ids:  # the current state at once, then on every change
                await self.tasks.send_state(task_id, ctx.notify, rid)
            await anyio.sleep_forever()
        finally:
            self.hub.remove(subscription)
            with anyio.CancelScope(shield=True):
                for server, uri in watched:
                    await server.unwatch(uri)
        return {"_meta": {META_SUBSCRIPTION: rid}}  # pragma: no cover - ended by cancellation
