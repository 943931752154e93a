"""An ACP agent's stdout cut into lines, its frames. Pure; no trio import.

The suite frames what an agent writes on its own, not with the server's splitter it may be
checking: a framing bug shared by oracle and implementation would pass unseen."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["Lines"]


class Lines:
    """Feed bytes, get whole lines. A line longer than `limit` bytes is reported once, as
    None, and skipped up to its newline, so one huge frame cannot exhaust memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pending = bytearray()
        self._overlong = False  # inside a line already reported as too long

    def feed(self, data: bytes | bytearray) -> Iterator[bytes | None]:
        *complete, rest = data.split(b"\n")
        for piece in complete:
            if self._overlong:
                self._overlong = False
            elif len(self._pending) + len(piece) > self.limit:
                self._pending.clear()
                yield None
            else:
                yield bytes(self._pending + piece)
                self._pending.clear()
        if self._overlong:
            return
        if len(self._pending) + len(rest) > self.limit:
            self._pending.clear()
            self._overlong = True
            yield None
        else:
            self._pending += rest

    def end(self) -> Iterator[bytes]:
        """At end of input: a last line without its newline, if any."""
        if self._pending and not self._overlong:
            yield bytes(self._pending)
        self._pending.clear()
