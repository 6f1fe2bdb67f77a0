"""Durable state: tasks, questions, sessions, host connections and the event log (store/base.py)."""

from __future__ import annotations

from .base import Claim, Snapshot, Store, StoreError, TaskQuery

__all__ = ["Claim", "Snapshot", "Store", "StoreError", "TaskQuery"]
