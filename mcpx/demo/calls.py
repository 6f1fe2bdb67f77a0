"""How the console demo's hosts make one call, in each task format: a 2025-11-25 task (`params.task`,
polled with tasks/get, collected with tasks/result, stopped with tasks/cancel) or a 2026-07-28 call
that the daemon may turn into a task (polled with tasks/get, result inline).

Each returns a one-line summary for the hosts' log; a JSON-RPC error raises RpcError, a lost
connection whatever the transport raises.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, Protocol

import anyio

from .host_client import RpcError
from .plan import Call

TERMINAL = frozenset({"completed", "failed", "cancelled"})
TASK_TTL_MS = 15 * 60 * 1000


class Rpc(Protocol):
    def request(self, method: str, params: dict[str, Any] | None = None) -> Awaitable[dict[str, Any]]: ...


def summarize(result: dict[str, Any]) -> str:
    texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)]
    line = " ".join(str(t) for t in texts).replace("\n", " ")[:100]
    return ("error: " if result.get("isError") else "") + (line or "(no text)")


def _poll_s(ms: object) -> float:
    """The task's suggested poll interval, kept to a human pace."""
    return min(max(ms / 1000, 0.5), 5.0) if isinstance(ms, (int, float)) else 1.0


def _due(call: Call, started: float) -> bool:
    return call.cancel_after is not None and time.monotonic() - started >= call.cancel_after


async def run_legacy(rpc: Rpc, call: Call, token: str) -> str:
    params: dict[str, Any] = {"name": call.tool, "arguments": call.arguments, "_meta": {"progressToken": token}}
    if not call.as_task:
        return summarize(await rpc.request("tools/call", params))
    params["task"] = {"ttl": TASK_TTL_MS}
    task = (await rpc.request("tools/call", params))["task"]
    tid, started, cancel_sent = task["taskId"], time.monotonic(), False
    while task["status"] not in TERMINAL:
        if not cancel_sent and _due(call, started):
            cancel_sent = True
            try:
                task = await rpc.request("tasks/cancel", {"taskId": tid})
                continue
            except RpcError:
                pass  # it ended on its own meanwhile: the next poll says how
        # input_required: a host that declared elicitation would open tasks/result to be asked;
        # this one declared nothing, so an operator answers and it just keeps polling.
        await anyio.sleep(_poll_s(task.get("pollInterval")))
        task = await rpc.request("tasks/get", {"taskId": tid})
    if task["status"] == "cancelled":
        return f"task {tid[:8]} cancelled after {time.monotonic() - started:.0f} s"
    try:
        return f"task {tid[:8]} {task['status']}: " + summarize(await rpc.request("tasks/result", {"taskId": tid}))
    except RpcError as exc:
        return f"task {tid[:8]} failed: {exc}"


async def run_modern(rpc: Rpc, call: Call) -> str:
    res = await rpc.request("tools/call", {"name": call.tool, "arguments": call.arguments})
    if res.get("resultType") != "task":
        return summarize(res)
    tid, started, cancel_sent = res["taskId"], time.monotonic(), False
    task = res
    while task["status"] not in TERMINAL:
        if not cancel_sent and _due(call, started):
            cancel_sent = True
            await rpc.request("tasks/cancel", {"taskId": tid})  # an ack, whatever its state
        await anyio.sleep(_poll_s(task.get("pollIntervalMs")))
        task = await rpc.request("tasks/get", {"taskId": tid})
    if task["status"] == "completed":
        return f"task {tid[:8]} completed: " + summarize(task.get("result") or {})
    if task["status"] == "failed":
        return f"task {tid[:8]} failed: {(task.get('error') or {}).get('message')}"
    return f"task {tid[:8]} cancelled after {time.monotonic() - started:.0f} s"
