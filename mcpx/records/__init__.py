"""The shapes the store persists: a task, a question, a host connection's record. Below the store,
so the store imports nothing of the packages that use it."""
