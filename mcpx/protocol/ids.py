"""Opaque random ids that are also safe to type as a command-line argument."""

from __future__ import annotations

import secrets


def opaque_id(nbytes: int) -> str:
    """`secrets.token_urlsafe(nbytes)`, drawn again while it starts with '-' or '_'.

    An id beginning with '-' reads as an option to `mcpx questions show ID` (argparse refused one in a
    test run); redrawing keeps every id uniform over the ids that remain, so none is more guessable."""
    while True:
        token = secrets.token_urlsafe(nbytes)
        if token[0].isalnum():
            return token
