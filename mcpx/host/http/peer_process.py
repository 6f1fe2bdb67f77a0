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


async def look_up_process(
    router: HostRouter, conn: HostConnection, peer: str | None, wait_s: float = naming.PEER_LOOKUP_S
) -> None:
    """Set `conn.process` now if the scan answers within `wait_s`, else once it does (relabelling
    the record). Meanwhile `conn.process_lookup` is the scan's end, for what would rather wait for
    the name."""
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
        if conn.process_lookup is done:  # (not a later lookup's: look_up_again)
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
    with anyio.move_on_after(wait_s):
        await done.wait()
    if found:
        conn.process = found[0]
    else:
        late = True
        log.info("connection from %s: its process is still being looked up (a busy machine)", peer)


def look_up_again(router: HostRouter, conn: HostConnection, peer: str | None) -> None:
    """A session whose process is still unknown is looked up once more, from a later request's
    socket, which stays open while that request runs: an SDK host often closes its initialize's
    connection before a slow scan gets to it. In the background (the request does not wait), after
    a scan still running; `conn.process_lookup` is both scans' end."""
    if conn.process is not None or conn.given_label is not None or conn.looked_up_again or peer is None:
        return
    conn.looked_up_again = True
    pending = conn.process_lookup
    settled = conn.process_lookup = anyio.Event()

    async def again() -> None:
        try:
            if pending is not None:
                await pending.wait()
            if conn.process is None:
                await look_up_process(router, conn, peer, 0.0)
                scanning = conn.process_lookup
                if scanning is not None and scanning is not settled:
                    await scanning.wait()
        finally:
            if conn.process_lookup is settled:
                conn.process_lookup = None
            settled.set()

    router.spawn(again)
