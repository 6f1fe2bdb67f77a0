"""mcpx.upstream.stdio.fd_io against real pipes and a real socket pair, on a real event loop: lines
handed over per read, writes in order past what the pipe takes, backpressure, and the ends."""

from __future__ import annotations

import asyncio
import os
import socket

from mcpx.upstream.stdio.fd_io import LineReader, Writer


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w


def test_a_reader_hands_over_whole_lines_and_keeps_the_rest_for_the_next_read() -> None:
    async def main() -> None:
        r, w = _pipe()
        got: list[list[bytes]] = []
        ended: list[bool] = []
        more = asyncio.Event()
        reader = LineReader(asyncio.get_running_loop(), r, lambda b: (got.append(b), more.set()), ended.append, 100)
        reader.resume()
        os.write(w, b'{"a":1}\n\n{"b":')
        await asyncio.wait_for(more.wait(), 5)
        more.clear()
        os.write(w, b"2}\n")
        await asyncio.wait_for(more.wait(), 5)
        assert got == [[b'{"a":1}\n'], [b'{"b":2}\n']]
        os.write(w, b"x" * 101)  # a line past the bound ends the reader
        for _ in range(100):
            if ended:
                break
            await asyncio.sleep(0.01)
        assert ended == [True]
        os.close(r)
        os.close(w)

    asyncio.run(main())


def test_a_reader_ends_once_at_eof() -> None:
    async def main() -> None:
        r, w = _pipe()
        ended = asyncio.Event()
        reader = LineReader(asyncio.get_running_loop(), r, lambda b: None, lambda over: ended.set(), 100)
        reader.resume()
        os.close(w)
        await asyncio.wait_for(ended.wait(), 5)
        os.close(r)

    asyncio.run(main())


def test_a_writer_keeps_order_past_a_full_pipe_and_presses_back_until_it_drains() -> None:
    async def main() -> None:
        r, w = _pipe()
        pressure: list[bool] = []
        writer = Writer(asyncio.get_running_loop(), w, on_pressure=pressure.append, high_water=64 * 1024)
        blocks = [bytes([65 + i]) * 50_000 for i in range(8)]  # 400 kB: far past a 64 KiB pipe
        for block in blocks:
            assert writer.write(block)
        assert pressure == [True] and writer.pressed
        received = bytearray()
        while len(received) < len(blocks) * 50_000:
            try:
                received += os.read(r, 1 << 16)
            except BlockingIOError:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0)
        assert bytes(received) == b"".join(blocks)
        assert await asyncio.wait_for(writer.drained(), 5)
        assert pressure == [True, False] and not writer.pressed
        os.close(r)
        os.close(w)

    asyncio.run(main())


def test_a_writer_whose_peer_is_gone_says_so_once_and_writes_nothing_more() -> None:
    async def main() -> None:
        a, b = socket.socketpair()
        a.setblocking(False)
        broken: list[bool] = []
        writer = Writer(asyncio.get_running_loop(), a, on_broken=lambda: broken.append(True))
        b.close()
        writes = [writer.write(b"x" * 1000) for _ in range(3)]
        assert writes[-1] is False and broken == [True] and writer.broken
        assert await writer.drained() is False
        a.close()

    asyncio.run(main())


def test_poll_handles_what_is_readable_now_and_only_while_reading() -> None:
    async def main() -> None:
        a, b = socket.socketpair()
        a.setblocking(False)
        got: list[list[bytes]] = []
        reader = LineReader(asyncio.get_running_loop(), a, got.append, lambda over: None, 100)
        b.sendall(b'{"x":1}\n')
        reader.poll()  # not reading (paused): left for later
        assert got == []
        reader.resume()
        reader.poll()  # no loop iteration in between: handled here and now
        assert got == [[b'{"x":1}\n']]
        reader.poll()  # nothing more to read: no call, no error
        assert got == [[b'{"x":1}\n']]
        reader.close()
        a.close()
        b.close()

    asyncio.run(main())
