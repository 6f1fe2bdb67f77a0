"""Bytes read a chunk at a time, split into the lines they complete. Pure.

A line's pieces are kept apart until its newline comes, then joined once: joining every read onto
what was left (the way this was done before) copied the whole unfinished line at each read,
quadratic in its length (a 65 MiB line took a keeper 30 s to find too long; a 10 MB reply cost
hundreds of MB of copying).
"""

from __future__ import annotations


class LineTooLong(Exception):
    """A line grew past the limit without ending."""


class LineSplitter:
    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._pieces: list[bytes] = []  # the unfinished line, read by read
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` completes (newline left off, blank ones too); LineTooLong when the
        unfinished line passes `max_line` (it is let go: the next line starts fresh)."""
        if b"\n" not in chunk:
            self._pieces.append(chunk)
            self._size += len(chunk)
            self._bound()
            return []
        *lines, rest = chunk.split(b"\n")
        if self._pieces:
            lines[0] = b"".join([*self._pieces, lines[0]])
        self._pieces, self._size = ([rest], len(rest)) if rest else ([], 0)
        self._bound()
        return lines

    def _bound(self) -> None:
        if self._size > self.max_line:
            self._pieces, self._size = [], 0
            raise LineTooLong(f"a line over {self.max_line} bytes")
