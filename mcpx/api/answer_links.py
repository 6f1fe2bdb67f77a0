"""One-time answer links: a URL that lets whoever holds it answer one question, once, until it
expires (docs/answer-links.md). The token has 256 random bits and only its SHA-256 is kept, so
the daemon's memory holds nothing that would open a link; a daemon restart forgets every link
(its questions end with it anyway)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

TOKEN_BYTES = 32


@dataclass
class _Link:
    question_id: str
    expires_ms: int
    used: bool = False


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AnswerLinks:
    def __init__(self, *, clock: Callable[[], float] = time.time, key: bytes | None = None) -> None:
        self.clock = clock
        self._key = key or secrets.token_bytes(32)  # signs each page's CSRF field
        self._links: dict[str, _Link] = {}

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def mint(self, question_id: str, expires_ms: int) -> str:
        """A new token for this question, good until `expires_ms` (the question's own expiry)."""
        self._sweep()
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self._links[_digest(token)] = _Link(question_id, expires_ms)
        return token

    def question_of(self, token: str) -> tuple[str | None, str]:
        """(question id, "") for a link that may be used now, else (None, why not)."""
        link = self._links.get(_digest(token))
        if link is None:
            return None, "This link is not known (never issued, or the daemon restarted since)."
        if link.used:
            return None, "This link was used already: the question was answered through it."
        if link.expires_ms <= self._now_ms():
            return None, "This link has expired."
        return link.question_id, ""

    def use(self, token: str) -> None:
        """The link's answer was taken: it opens nothing any more."""
        link = self._links.get(_digest(token))
        if link is not None:
            link.used = True

    def csrf(self, token: str) -> str:
        """The value a page's form must send back with its POST."""
        return hmac.new(self._key, _digest(token).encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, token: str, sent: str) -> bool:
        return hmac.compare_digest(self.csrf(token), sent)

    def _sweep(self) -> None:
        now = self._now_ms()
        for key in [k for k, link in self._links.items() if link.expires_ms <= now]:
            del self._links[key]
