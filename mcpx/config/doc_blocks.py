"""Generated blocks in the Markdown docs: the text between `<!-- NAME:start -->` and
`<!-- NAME:end -->` is written by code (the config reference in the README, the event schemas in
docs/api.md), so the docs and the models they describe cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path


def rewrite_block(path: Path, name: str, body: str) -> bool:
    """Put `body` between the NAME markers of the file at `path`; True when the file changed."""
    text = path.read_text()
    new = re.sub(
        rf"(<!-- {re.escape(name)}:start -->\n).*?(<!-- {re.escape(name)}:end -->)",
        lambda m: m.group(1) + body + "\n" + m.group(2),
        text,
        flags=re.S,
    )
    if new != text:
        path.write_text(new)
        return True
    return False
