"""A real webhook receiver for tests: an HTTP server on 127.0.0.1, port 0, in a thread.

It answers each POST with the next status of `statuses` (200 once they run out), or holds the
request until the test ends when `hang` is set, and records every request it got. `trickle` sends
the answer's body (of that many bytes) one byte every `trickle_every` seconds; `body_bytes` sends a
large body at once. `sent` counts the body bytes written, `cut` whether the client closed first.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    status: int

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(
        self,
        statuses: list[int] | None = None,
        *,
        hang: bool = False,
        trickle: int = 0,
        trickle_every: float = 0.5,
        body_bytes: int = 0,
        path: str = "/hook",
    ) -> None:
        self.statuses = list(statuses or [])
        self.hang = hang
        self.trickle = trickle
        self.trickle_every = trickle_every
        self.body_bytes = body_bytes
        self.sent = 0
        self.cut = threading.Event()
        self.finished = threading.Event()
        self.released = threading.Event()
        self.got: list[Received] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name for the POST handler
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.got.append(Received({k.lower(): v for k, v in self.headers.items()}, body, status))
                if receiver.hang:
                    receiver.released.wait(60)
                self.send_response(status)
                length = receiver.trickle or receiver.body_bytes
                self.send_header("Content-Length", str(length))
                self.end_headers()
                try:
                    self.wfile.flush()
                    if receiver.trickle:
                        for _ in range(receiver.trickle):
                            time.sleep(receiver.trickle_every)
                            self.wfile.write(b"x")
                            self.wfile.flush()
                            receiver.sent += 1
                    elif receiver.body_bytes:
                        chunk = b"x" * 65536
                        while receiver.sent < receiver.body_bytes:
                            n = min(len(chunk), receiver.body_bytes - receiver.sent)
                            self.wfile.write(chunk[:n])
                            receiver.sent += n
                        self.wfile.flush()
                except OSError:  # the client closed the connection before the whole body went
                    receiver.cut.set()
                    self.close_connection = True
                    return
                receiver.finished.set()

            def log_message(self, *args: Any) -> None:
                pass  # quiet: pytest shows failures, not every request

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
