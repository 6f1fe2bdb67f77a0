"""Change notifications to hosts: legacy sessions (their GET stream or stdio) and 2026 listen streams."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..protocol import jsonrpc
from ..protocol.jsonrpc import Id
from ..protocol.revisions import META_SUBSCRIPTION
from .connection import HostConnection, Send

log = logging.getLogger("mcpx.host")

# listen filter key -> notification it subscribes to
LIST_FILTERS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
KIND_NOTIFICATION = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
    "resourceTemplates": "notifications/resources/list_changed",
}


@dataclass
class Listener:
    subscription_id: Id  # the subscriptions/listen request's id names the subscription
    send: Send
    methods: set[str]
    resources: set[str] = field(default_factory=set)
    task_ids: set[str] = field(default_factory=set)


class Hub:
    def __init__(self) -> None:
        self.listeners: dict[int, Listener] = {}
        self.legacy: dict[str, HostConnection] = {}

    def add(self, listener: Listener) -> int:
        key = id(listener)
        self.listeners[key] = listener
        return key

    def remove(self, key: int) -> None:
        self.listeners.pop(key, None)

    async def list_changed(self, kinds: tuple[str, ...]) -> None:
        for method in {KIND_NOTIFICATION[k] for k in kinds}:
            for listener in list(self.listeners.values()):
                if method in listener.methods:
                    await _send(
                        listener.send,
                        jsonrpc.notification(method, {"_meta": {META_SUBSCRIPTION: listener.subscription_id}}),
                    )
            for conn in list(self.legacy.values()):
                if conn.send is not None:
                    await _send(conn.send, jsonrpc.notification(method))

    async def task_changed(self, task_id: str, state: dict[str, Any]) -> list[dict[str, Any]]:
        """notifications/tasks on every listen stream that asked for the task; the ones sent."""
        sent = []
        for listener in list(self.listeners.values()):
            if task_id in listener.task_ids:
                note = jsonrpc.notification(
                    "notifications/tasks", {**state, "_meta": {META_SUBSCRIPTION: listener.subscription_id}}
                )
                if await _send(listener.send, note):
                    sent.append(note)
        return sent

    async def resource_updated(self, uri: str) -> None:
        for listener in list(self.listeners.values()):
            if uri in listener.resources:
                await _send(
                    listener.send,
                    jsonrpc.notification(
                        "notifications/resources/updated",
                        {"_meta": {META_SUBSCRIPTION: listener.subscription_id}, "uri": uri},
                    ),
                )
        for conn in list(self.legacy.values()):
            if conn.send is not None and uri in conn.resource_subscriptions:
                await _send(conn.send, jsonrpc.notification("notifications/resources/updated", {"uri": uri}))


async def _send(send: Send, msg: dict[str, Any]) -> bool:
    try:
        await send(msg)
    except Exception:  # one host gone must not stop the others hearing
        log.debug("change notification dropped", exc_info=True)
        return False
    return True
