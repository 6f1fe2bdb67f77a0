"""One lock per key, made on first use and dropped when its last holder or waiter leaves: changes
of one task are serialized (compare-and-set needs it) while changes of different tasks commit in
the same store batch instead of one after another."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class KeyedLock:
    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}  # key -> (lock, holders and waiters)

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = anyio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            _, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
