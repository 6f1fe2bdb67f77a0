"""An HTTP host's process, found for its label (connections/naming.py) without holding the host up.

The /proc scan that finds a loopback peer's process reads every process's fds: on a busy machine it
can take longer than a host should wait for its initialize. So the host waits at most
`naming.PEER_LOOKUP_S`; a scan still running then goes on in the background, and when it finds the
process the connection is relabelled (its record too, announced as `connection.updated`), so the
console, the event log and the approval prompts name the process after all instead of only the
host's `clientInfo` for the whole session.
"""

from __future__ import annotations

import logging

import anyio

from ...connections import naming
from ..connection import HostConnection
from ..router import HostRouter

log = logging.getLogger("mcpx.host")


async def look_up_process(router: HostRouter, conn: HostConnection, peer: str | None) -> None:
    """Set `conn.process` now if the scan answers in time, else once it does (relabelling the record).
    Meanwhile `conn.process_lookup` is the scan's end, for what would rather wait for the name."""
    if peer is None:
        return
    found: list[str | None] = []
    done = anyio.Event()
    late = False

    async def scan() -> None:
        try:
            process = await anyio.to_thread.run_sync(naming.peer_label, peer, abandon_on_cancel=True)
        except Exception as exc:  # noqa: BLE001 - as below: no label is worth taking serving down
            log.warning("connection from %s: its process could not be looked up: %s", peer, exc)
            process = None
        found.append(process)
        relabel = late and process is not None and conn.process is None
        if relabel:
            conn.process = process
        conn.process_lookup = None
        done.set()
        if not relabel:
            return
        try:
            await router.initialized(conn)  # the record takes the label it would have had
        except Exception as exc:  # noqa: BLE001 - a label is display only: never worth taking serving down
            log.warning("connection %s: its process was found late, but not recorded: %s", conn.record_id, exc)

    conn.process_lookup = done
    router.spawn(scan)
    with anyio.move_on_after(naming.PEER_LOOKUP_S):
        await done.wait()
    if found:
        conn.process = found[0]
    else:
        late = True
        log.info("connection from %s: its process is still being looked up (a busy machine)", peer)
