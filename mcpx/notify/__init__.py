"""Notifications: events of the daemon's bus delivered to webhooks and command hooks (docs/notify.md).

`notifier.Notifier` taps the bus and hands each matching event to every matching sink's bounded
`outbox.Outbox`; one worker per sink delivers in order (`webhook.py`, `command_hook.py`), so a slow
or dead receiver only ever fills its own outbox. Signing and the retry schedule are pure
(`signing.py`, `backoff.py`).
"""
