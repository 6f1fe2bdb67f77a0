"""`WWW-Authenticate` (RFC 9110 11.6.1, RFC 6750 3, RFC 9728 5.1): the challenges of a 401 or 403.

A header holds one or more challenges, each a scheme and either auth-params (`name=value` or
`name="quoted"`, comma-separated) or a token68. Parsing is forgiving: a malformed piece is skipped,
never fatal, since a server's header is input we do not control.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
# An unquoted value is taken up to a comma or a space: servers write `scope=mcp:basic`, whose ':' a
# strict token would not allow.
_PARAM = re.compile(rf"\s*({_TOKEN})\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^\s,\"]+))\s*")
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$|(?=,))")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*\s*(?=,|$)")


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower-cased
    params: dict[str, str] = field(default_factory=dict)  # names lower-cased

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata") or None

    @property
    def scopes(self) -> list[str] | None:
        """The challenge's `scope`, split; None when it names none."""
        raw = self.params.get("scope")
        if raw is None:
            return None
        scopes = raw.split()
        return scopes or None

    @property
    def error(self) -> str | None:
        return self.params.get("error") or None


def parse(header: str | None) -> list[Challenge]:
    """Every challenge in a `WWW-Authenticate` value (several headers joined with ", " included)."""
    out: list[Challenge] = []
    text = header or ""
    pos = 0
    while pos < len(text):
        while pos < len(text) and text[pos] in " ,":
            pos += 1
        m = _SCHEME.match(text, pos)
        if m is None:
            break
        scheme, pos = m.group(1).lower(), m.end()
        params: dict[str, str] = {}
        while pos < len(text):
            p = _PARAM.match(text, pos)
            if p is None:
                if not params:  # a token68 (`Negotiate abc==`) stands alone after its scheme
                    t = _TOKEN68.match(text, pos)
                    if t is not None:
                        pos = t.end()
                break
            value = p.group(2) if p.group(2) is not None else p.group(3)
            params.setdefault(p.group(1).lower(), re.sub(r"\\(.)", r"\1", value))
            pos = p.end()
            if pos < len(text) and text[pos] == ",":
                pos += 1
            else:
                break
        out.append(Challenge(scheme, params))
    return out


def bearer(header: str | None) -> Challenge | None:
    """The Bearer challenge of a header, if it has one."""
    for challenge in parse(header):
        if challenge.scheme == "bearer":
            return challenge
    return None
