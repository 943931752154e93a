"""Backpressure for the ACP server's output: a client that stops reading stalls the server.

Frames are queued synchronously (by session observers and event listeners, which cannot
wait), so the queue itself cannot refuse them. Instead `OutputBudget` counts the bytes queued
and not yet written; above `high` bytes it pauses, and the code that makes new output waits
at its next await until the writer has brought the count under `low`:

    reader       waits before reading the next request (no new work is taken in)
    each model   waits before its call and before each chunk it streams (`PacedModel`)

Between two of these waits a session adds at most one chunk's worth of records and updates
(a model chunk, the tool calls of one step and their results, which the shell caps), so the
unwritten output stays within `high` plus that much per running session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import trio

from .._model._seam import Model, ModelChunk, ModelRequest

__all__ = ["OutputBudget", "PacedModel"]


class OutputBudget:
    """Bytes queued for one output. `paused` is True from the moment more than `high` bytes
    are unwritten until the writer has brought them down to `low`; once the output is gone
    (`abandon`), nothing pauses again, since queued frames are then dropped."""

    def __init__(self, high: int, low: int) -> None:
        if not 0 <= low <= high:
            raise ValueError(f"need 0 <= low <= high, got low={low}, high={high}")
        self.high = high
        self.low = low
        self.queued = 0
        self.peak = 0  # the most bytes ever unwritten at once, for measurements
        self._resumed = trio.Event()
        self._resumed.set()
        self._abandoned = False

    @property
    def paused(self) -> bool:
        """Whether producers should wait (`resumed`) before making more output."""
        return not self._resumed.is_set()

    def queue(self, size: int) -> None:
        """`size` bytes were queued. Never blocks."""
        self.queued += size
        self.peak = max(self.peak, self.queued)
        if self.queued > self.high and not self._abandoned and self._resumed.is_set():
            self._resumed = trio.Event()

    def written(self, size: int) -> None:
        """`size` queued bytes were written (or dropped). Never blocks."""
        self.queued -= size
        if self.queued <= self.low:
            self._resumed.set()

    def abandon(self) -> None:
        """The output is gone: its frames are dropped from now on, so never pause again."""
        self._abandoned = True
        self._resumed.set()

    async def resumed(self) -> None:
        """Return once not paused. Always a checkpoint; cancellable while it waits."""
        if self._resumed.is_set():
            await trio.lowlevel.checkpoint()
        else:
            await self._resumed.wait()


class PacedModel:
    """`model`, waiting while `budget` is paused before its call and before each chunk: the
    session's turn stalls at that point, inside its step (so a step timeout counts the
    stall), and a `session/cancel` ends the wait as it ends any step."""

    def __init__(self, model: Model, budget: OutputBudget) -> None:
        self.model = model
        self._budget = budget

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The wrapped model's chunks, paced by the budget. Always a checkpoint (the wrapped
        stream's contract); closing this closes the wrapped stream."""
        budget = self._budget
        if budget.paused:
            await budget.resumed()
        stream = self.model.stream(request)
        try:
            async for chunk in stream:
                if budget.paused:
                    await budget.resumed()
                yield chunk
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
