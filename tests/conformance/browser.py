#!/usr/bin/env python3
"""A person's browser, for `mcpx login` under the conformance suite: `$BROWSER` runs it with the
authorization URL (Python's webbrowser appends it). The suite's authorization servers approve at once
and redirect to the redirect URI, the daemon's own loopback callback; this follows every redirect as
a browser would (GET, at most MAX_HOPS) and exits 0 when the last page is not an error.
"""

from __future__ import annotations

import sys

import httpx

MAX_HOPS = 10


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: browser.py URL", file=sys.stderr)
        return 2
    url = argv[-1]
    with httpx.Client(timeout=15, follow_redirects=False) as http:
        for _ in range(MAX_HOPS):
            resp = http.get(url)
            print(f"[browser] GET {url} -> {resp.status_code}", file=sys.stderr)
            location = resp.headers.get("location")
            if resp.is_redirect and location:
                url = str(resp.url.join(location))
                continue
            return 0 if resp.status_code < 400 else 1
    print("[browser] too many redirects", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
