"""`POST /v1/config/reload`: read the config file again and apply it, as SIGHUP does (`mcpx reload`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI

from ..config.diff import ReloadOutcome, Trigger
from . import models

Reload = Callable[[Trigger, str], Awaitable[ReloadOutcome]]  # (trigger, by) -> what it did


def add_routes(app: FastAPI, reload: Reload) -> None:
    """On /v1's app, so its token and origin checks apply."""

    @app.post(
        "/v1/config/reload",
        response_model=models.ConfigReload,
        summary="Read the config file again and apply it (as SIGHUP does)",
        description="Added servers start; removed ones are unlisted at once and stop once their calls in flight"
        " end; changed ones restart after the same drain; top-level `approve` and `approveTimeoutMs` apply at"
        " once; other settings that changed are listed in `needsRestart` and ignored. A file that cannot be used is refused (`result: refused`, with `error`)"
        " and the running config keeps serving. Either way the answer is 200 and the reload is an event.",
    )
    async def reload_config(body: models.ReloadBody | None = None) -> dict[str, Any]:
        name = ((body.by if body else None) or "operator").strip()[:64] or "operator"
        outcome = await reload("api", f"operator:{name}")
        return outcome.wire()
