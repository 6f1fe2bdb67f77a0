"""A plain task record for the pure task-rule tests: only the fields protocol/task_facts.py reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NOW = 1_700_000_100_000
CREATED = 1_700_000_000_000


@dataclass(frozen=True)
class Facts:
    id: str = "t-1"
    status: str = "working"
    created_ms: int = CREATED
    updated_ms: int = CREATED
    ttl_ms: int | None = 600_000
    poll_ms: int = 1000
    owner: str = "conn:c1"
    era: str = "legacy"
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] = field(default_factory=dict)
