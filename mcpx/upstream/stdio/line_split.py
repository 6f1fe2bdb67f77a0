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
        end = chunk.rfind(b"\n")
        if end < 0:
            self._pieces.append(chunk)
            self._size += len(chunk)
            if self._size > self.max_line:
                self._pieces, self._size = [], 0
                raise LineTooLong(f"a line over {self.max_line} bytes")
            return []
        done = chunk[:end]
        if self._pieces:
            done = b"".join([*self._pieces, done])
        rest = chunk[end + 1 :]
        self._pieces, self._size = ([rest], len(rest)) if rest else ([], 0)
        if self._size > self.max_line:
            self._pieces, self._size = [], 0
            raise LineTooLong(f"a line over {self.max_line} bytes")
        return done.split(b"\n")
