"""Bearer tokens for /mcp: which principal a presented token names.

Tokens are kept only as SHA-256 digests (the config may hold the digest, `tokenSha256`, so the
file need not hold the secret), and a presented token is compared against every digest in
constant time, so neither the answer's timing nor its order says how much of a token was right.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable


class TokenTable:
    def __init__(self, entries: Iterable[tuple[str, str]]) -> None:
        """`entries`: (sha256 hex digest of the token, principal)."""
        self._entries = [(bytes.fromhex(digest), principal) for digest, principal in entries]

    @property
    def enabled(self) -> bool:
        """Auth is on: /mcp requires a token."""
        return bool(self._entries)

    def principal_for(self, presented: str) -> str | None:
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for known, principal in self._entries:  # every entry, always: no early exit
            if hmac.compare_digest(digest, known) and found is None:
                found = principal
        return found
