"""A real webhook receiver for tests: an HTTP server on 127.0.0.1, port 0, in a thread.

It answers each POST with the next status of `statuses` (200 once they run out), or holds the
request until the test ends when `hang` is set, and records every request it got.
"""

from __future__ import annotations

import http.server
import json
import threading
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
    def __init__(self, statuses: list[int] | None = None, *, hang: bool = False) -> None:
        self.statuses = list(statuses or [])
        self.hang = hang
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
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass  # quiet: pytest shows failures, not every request

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
