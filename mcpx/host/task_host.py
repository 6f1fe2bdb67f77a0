"""The one small interface the era task modules (legacy_tasks.py, modern_tasks.py) receive.

They never see the dispatcher: an upstream call, a round of questions and MRTR round signing come
through `CallSurface`; the engine, broker, hub and config are handed over as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config.model import TasksConfig
    from ..protocol.request_state import Round
    from ..questions.broker import Broker
    from ..tasks.engine import TaskEngine
    from ..upstream.pool import Route, UpstreamServer
    from .approvals import Resumed
    from .connection import RequestContext
    from .subscriptions import Hub


class CallSurface(Protocol):
    async def call_tool(
        self,
        ctx: RequestContext,
        params: dict[str, Any],
        route: Route,
        server: UpstreamServer,
        *,
        raw_state: bool = False,
        resumed: Resumed | None = None,
    ) -> dict[str, Any]:
        """One upstream tools/call, shaped for the host's revision."""
        ...

    async def ask_round(self, ctx: RequestContext, requests: dict[str, Any], server: UpstreamServer) -> dict[str, Any]:
        """Every inputRequest of one MRTR round, asked at once; the answers by key."""
        ...

    def unwrap_round(
        self, ctx: RequestContext, params: dict[str, Any], route: Route
    ) -> tuple[dict[str, Any], Round | None]:
        """The host's params with mcpx's signed requestState replaced by the upstream's own, and
        the round that envelope opens (None without one); -32602 for one mcpx did not issue to
        this host for this call."""
        ...

    def wrap_round(
        self, ctx: RequestContext, res: dict[str, Any], params: dict[str, Any], route: Route, round_: int
    ) -> dict[str, Any]:
        """An MRTR round for the host, its state signed by mcpx."""
        ...


@dataclass(frozen=True)
class TaskHost:
    calls: CallSurface
    engine: TaskEngine
    broker: Broker
    hub: Hub
    config: TasksConfig
