"""The wire shapes of both task formats. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .task_facts import TaskFacts


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _wire(task: TaskFacts, ttl_key: str, poll_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "taskId": task.id,
        "status": task.status,
        "createdAt": iso(task.created_ms),
        "lastUpdatedAt": iso(task.updated_ms),
        ttl_key: task.ttl_ms,
        poll_key: task.poll_ms,
    }
    if task.status_message:
        out["statusMessage"] = task.status_message
    return out


def legacy_task(task: TaskFacts) -> dict[str, Any]:
    """2025-11-25 `Task` (schema Task: taskId, status, createdAt, lastUpdatedAt, ttl required)."""
    return _wire(task, "ttl", "pollInterval")


def modern_task(task: TaskFacts) -> dict[str, Any]:
    """ext `Task`: flat, with ttlMs/pollIntervalMs (never the legacy names)."""
    return _wire(task, "ttlMs", "pollIntervalMs")
