"""The count of unfinished tasks per owner and in all, against `tasks.maxActivePerOwner` and
`tasks.maxActive`: kept in memory beside the store (rebuilt from the open rows at start)."""

from __future__ import annotations

from ..protocol.errors import LimitReached
from ..records.task import Task


class ActiveTasks:
    def __init__(self, per_owner: int = 1000, total: int = 10_000) -> None:
        self.per_owner = per_owner
        self.total = total
        self._owner_of: dict[str, str] = {}  # task id -> owner, for the unfinished ones
        self._by_owner: dict[str, int] = {}

    def count(self, owner: str | None = None) -> int:
        return len(self._owner_of) if owner is None else self._by_owner.get(owner, 0)

    def refusal(self, owner: str) -> LimitReached | None:
        """Why `owner` may not start another task now, or None when it may."""
        if self._by_owner.get(owner, 0) >= self.per_owner:
            return LimitReached(
                "tasks.maxActivePerOwner",
                self.per_owner,
                "this owner has that many unfinished tasks; collect or cancel some first",
            )
        if len(self._owner_of) >= self.total:
            return LimitReached("tasks.maxActive", self.total, "the daemon holds that many unfinished tasks")
        return None

    def reserve(self, owner: str, task_id: str) -> None:
        """Count a task about to be created, or raise the limit it would break. Reserving before the
        row is written keeps concurrent creations from passing the check together."""
        refused = self.refusal(owner)
        if refused is not None:
            raise refused
        self._add(owner, task_id)

    def track(self, task: Task) -> None:
        """Follow a written row: counted while unfinished, dropped once terminal."""
        if task.kind != "task":
            return  # a host's plain call is bounded by the host, not by the task limits
        if task.terminal:
            self.forget(task.id)
        elif task.id not in self._owner_of:
            self._add(task.owner, task.id)

    def forget(self, task_id: str) -> None:
        owner = self._owner_of.pop(task_id, None)
        if owner is None:
            return
        left = self._by_owner[owner] - 1
        if left:
            self._by_owner[owner] = left
        else:
            del self._by_owner[owner]

    def _add(self, owner: str, task_id: str) -> None:
        self._owner_of[task_id] = owner
        self._by_owner[owner] = self._by_owner.get(owner, 0) + 1
