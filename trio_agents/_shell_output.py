"""Capture one output stream: keep its tail in memory, spill the whole of it to a private file
once it outgrows the cap. Pure and synchronous (no trio import).

The tail is what a tool result shows; the spill file is where the complete stream stays
readable. Output exactly at the cap is not truncated. The spill file is created with O_EXCL
and mode 0600, under an unpredictable name, in a per-process directory made with mode 0700.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["OutputCollector", "StreamOutput"]

_spill_dir: str | None = None
MAX_SPILL_BYTES = 64 * 1024 * 1024  # past this a stream keeps only its tail


def spill_directory() -> str:
    """The private (0700) directory this process spills into, created on first use."""
    global _spill_dir
    if _spill_dir is None or not os.path.isdir(_spill_dir):
        _spill_dir = tempfile.mkdtemp(prefix="trio-agents-spill-")  # mkdtemp makes it 0700
    return _spill_dir


@dataclass(frozen=True, slots=True)
class StreamOutput:
    """What a stream produced: the retained tail, whether anything was dropped from it, and
    the file holding the complete stream if it overflowed."""

    text: str
    truncated: bool
    spill_path: str | None
    total_bytes: int


class OutputCollector:
    __slots__ = (
        "_chunks",
        "_label",
        "_max",
        "_max_spill",
        "_retained",
        "_spill",
        "_spill_failed",
        "_spill_path",
        "total",
        "truncated",
    )

    def __init__(self, max_bytes: int, label: str, max_spill_bytes: int = MAX_SPILL_BYTES) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes!r}")
        self._max = max_bytes
        self._max_spill = max_spill_bytes
        self._spill_failed = False
        self._label = label
        self._chunks: list[bytes] = []
        self._retained = 0
        self._spill: BinaryIO | None = None
        self._spill_path: str | None = None
        self.total = 0
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        """Never raises: a spill file that cannot be written (a full disk, no descriptors,
        past `max_spill_bytes`) is given up, and only the tail remains."""
        if not chunk:
            return
        self.total += len(chunk)
        if self._spill is not None:
            self._write_spill(chunk)
        self._chunks.append(chunk)
        self._retained += len(chunk)
        if self._retained > self._max:
            if self._spill is None and not self._spill_failed:
                self._open_spill()  # writes everything received so far, this chunk included
            self._trim()

    def _write_spill(self, chunk: bytes) -> None:
        assert self._spill is not None
        if self.total > self._max_spill:
            self._give_up_spill()
            return
        try:
            self._spill.write(chunk)
        except OSError:
            self._give_up_spill()

    def _give_up_spill(self) -> None:
        """Keep going without a spill file: remove what there is of it (an incomplete file
        would claim to be the whole stream)."""
        spill, path = self._spill, self._spill_path
        self._spill, self._spill_path, self._spill_failed = None, None, True
        if spill is not None:
            with contextlib.suppress(OSError):
                spill.close()
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _trim(self) -> None:
        while self._retained > self._max and len(self._chunks) > 1:
            self._retained -= len(self._chunks.pop(0))
        if self._retained > self._max:
            keep = self._chunks[0][-self._max :]
            self._chunks[0] = keep
            self._retained = len(keep)
        self.truncated = True

    def _open_spill(self) -> None:
        name = f"{os.getpid()}-{secrets.token_hex(8)}-{self._label}.log"
        try:
            path = os.path.join(spill_directory(), name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            self._spill_failed = True
            return
        # Unbuffered: the file holds everything received so far whenever someone reads it.
        self._spill = os.fdopen(fd, "wb", buffering=0)
        self._spill_path = path
        for chunk in self._chunks:
            self._write_spill(chunk)
            if self._spill_failed:
                return

    @property
    def spill_path(self) -> str | None:
        """The file holding the complete stream, once it has overflowed."""
        return self._spill_path

    def read_from(self, offset: int) -> tuple[str, int, bool]:
        """Output from byte `offset` of the stream on: (text, next offset, lossy). When the
        offset lies before the retained tail, the whole tail is returned and `lossy` is True
        (the rest is in the spill file)."""
        tail = b"".join(self._chunks)
        window_start = self.total - len(tail)
        lossy = offset < window_start
        data = tail if lossy else tail[offset - window_start :]
        return data.decode("utf-8", "replace"), self.total, lossy

    def finish(self) -> StreamOutput:
        """Close the spill file (never raising: a failed close drops the spill path)."""
        path = self._spill_path
        if self._spill is not None:
            try:
                self._spill.close()
            except OSError:
                path = None
            self._spill = None
        text = b"".join(self._chunks).decode("utf-8", "replace")
        return StreamOutput(text, self.truncated, path, self.total)
