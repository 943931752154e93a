"""Capture one output stream: keep its tail in memory, spill the whole of it to a private file
once it outgrows the cap. Pure and synchronous (no trio import).

The tail is what a tool result shows; the spill file is where the complete stream stays
readable. Output exactly at the cap is not truncated. The spill file is created with O_EXCL,
O_NOFOLLOW and mode 0600, under an unpredictable name, in a session's private directory held
by descriptor (`_spill.SpillDirectory`); its path is checked each time it is handed out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from .._errors import SpillDirectoryError
from ._spill import SpillDirectory, SpillRoot

__all__ = ["OutputCollector", "SpillSource", "StreamOutput"]

MAX_SPILL_BYTES = 64 * 1024 * 1024  # past this a stream keeps only its tail

SpillSource = Callable[[], SpillDirectory]
"""Gives the directory a collector spills into, made when first asked (most streams never
spill, so most sessions never make one)."""

_default_root: SpillRoot | None = None


def default_spill_directory() -> SpillDirectory:
    """The directory of a collector made without one: this process's own, removed when the
    interpreter exits."""
    global _default_root
    if _default_root is None:
        _default_root = SpillRoot()
    return _default_root.directory(None)


@dataclass(frozen=True, slots=True)
class StreamOutput:
    """What a stream produced: the retained tail, whether anything was dropped from it, and
    the file holding the complete stream if it overflowed."""

    text: str
    truncated: bool
    spill_path: str | None
    total_bytes: int
    spill_error: str | None = None  # why a truncated stream has no spill_path, if known


class OutputCollector:
    __slots__ = (
        "_chunks",
        "_directory",
        "_label",
        "_max",
        "_max_spill",
        "_retained",
        "_spill",
        "_spill_error",
        "_spill_failed",
        "_spill_name",
        "_spill_source",
        "total",
        "truncated",
    )

    def __init__(
        self,
        max_bytes: int,
        label: str,
        max_spill_bytes: int = MAX_SPILL_BYTES,
        spill: SpillSource = default_spill_directory,
    ) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes!r}")
        self._max = max_bytes
        self._max_spill = max_spill_bytes
        self._spill_failed = False
        self._label = label
        self._chunks: list[bytes] = []
        self._retained = 0
        self._spill: BinaryIO | None = None
        self._spill_source = spill
        self._directory: SpillDirectory | None = None
        self._spill_name: str | None = None
        self._spill_error: str | None = None
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
        spill, name = self._spill, self._spill_name
        self._spill, self._spill_name, self._spill_failed = None, None, True
        if spill is not None:
            with contextlib.suppress(OSError):
                spill.close()
        if name is not None and self._directory is not None:
            self._directory.discard(name)

    def _trim(self) -> None:
        """Drop the oldest output until what is kept fits the cap. Seam: a double may change
        which output is kept."""
        while self._retained > self._max and len(self._chunks) > 1:
            self._retained -= len(self._chunks.pop(0))
        if self._retained > self._max:
            keep = self._chunks[0][-self._max :]
            self._chunks[0] = keep
            self._retained = len(keep)
        self.truncated = True

    def _open_spill(self) -> None:
        """Open the spill file (owner-only) and write what is kept so far to it. Seam: a double
        may change how the spill file is made."""
        try:
            self._directory = self._spill_source()
            # Unbuffered: the file holds everything received so far whenever someone reads it.
            self._spill, self._spill_name = self._directory.open_file(self._label)
        except OSError as exc:
            self._spill_failed = True
            self._spill_error = str(exc) if isinstance(exc, SpillDirectoryError) else None
            return
        for chunk in self._chunks:
            self._write_spill(chunk)
            if self._spill_failed:
                return

    @property
    def spill_path(self) -> str | None:
        """The file holding the complete stream, once it has overflowed; checked each time
        (None, and `spill_error` set, if its directory was replaced)."""
        if self._spill_name is None or self._directory is None:
            return None
        try:
            return self._directory.path_of(self._spill_name)
        except SpillDirectoryError as exc:
            self._spill_error = str(exc)
            return None

    @property
    def spill_error(self) -> str | None:
        """Why the stream has no spill file it should have (its directory was refused)."""
        return self._spill_error

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
        if self._spill is not None:
            try:
                self._spill.close()
            except OSError:
                self._spill_name = None
            self._spill = None
        path = self.spill_path
        text = b"".join(self._chunks).decode("utf-8", "replace")
        return StreamOutput(text, self.truncated, path, self.total, self._spill_error)
