"""The asyncio path: run an asyncio implementation inside the conformance machine's trio run.

The machines drive their target from one trio run, settle it with `wait_all_tasks_blocked`,
and move a MockClock by hand. An asyncio framework cannot run under trio as it is (it calls
`asyncio.create_task`, which needs a running asyncio loop), and a thread bridge cannot work:
trio would see every task blocked, and call the agent at rest, while the framework still works
in its thread. trio-asyncio gives what both need: an asyncio loop whose callbacks and tasks run
as trio tasks, so "every task blocked" still means at rest, and whose `time()` is the run's
clock, so the MockClock moves asyncio's timers too.

`open_asyncio_peer(model, tools)` opens such a loop for an adapter factory and hands it the
machine's model and tools in asyncio form. trio-asyncio is imported only here, on first use.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar, cast

import trio

from .._model import ModelChunk, ModelRequest
from .._tool import Tool, ToolContext, ToolResult

__all__ = ["AsyncioModel", "AsyncioPeer", "AsyncioTool", "open_asyncio_peer"]

T = TypeVar("T")


class _TrioAsyncioLoop(Protocol):
    """The part of trio-asyncio's loop used here (trio-asyncio ships no type hints)."""

    def trio_as_future(
        self, proc: Callable[..., Awaitable[T]], *args: Any
    ) -> asyncio.Future[T]: ...

    def create_task(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]: ...

    async def run_aio_future(self, future: asyncio.Future[T]) -> T: ...


class AsyncioModel:
    """The machine's model, callable from asyncio code on the peer's loop.

    `stream(request)` is an asyncio async iterator of the model's chunks. Each chunk is read
    by a trio task, so a held step keeps that task blocked (the machine sees the agent at
    rest) and cancelling the asyncio task that iterates cancels the model call in trio.
    """

    def __init__(self, loop: _TrioAsyncioLoop, model: Any) -> None:
        self._loop = loop
        self._model = model

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """The chunks of `model.stream(request)`, for asyncio. Leaving the loop early (a
        `break`, an error, a cancel) closes the trio stream, as the agent's loop would."""
        chunks = cast("AsyncIterator[ModelChunk]", self._model.stream(request))
        try:
            while True:
                try:
                    chunk = await self._loop.trio_as_future(chunks.__anext__)
                except StopAsyncIteration:
                    return
                yield chunk
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await self._loop.trio_as_future(aclose)


class AsyncioTool:
    """One of the machine's tools, callable from asyncio code on the peer's loop.

    name, description, parameters: the tool's, as the model is told them.
    """

    def __init__(self, loop: _TrioAsyncioLoop, tool: Tool) -> None:
        self._loop = loop
        self._tool = tool
        self.name = tool.name
        self.description = tool.description
        self.parameters: Mapping[str, Any] = tool.parameters

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        """Run the tool in trio and return its answer as a ToolResult. Cancelling the asyncio
        task that awaits it cancels the call in trio; a tool's error propagates."""
        result = await self._loop.trio_as_future(self._tool, arguments, context)
        return result if isinstance(result, ToolResult) else ToolResult(str(result))


class AsyncioPeer:
    """An asyncio loop running inside the trio run, with the machine's model and tools.

    loop: the trio-asyncio event loop; asyncio code of the implementation runs on it.
    model: the machine's model, callable from asyncio (`AsyncioModel`).
    tools: the machine's tools by name, callable from asyncio (`AsyncioTool`).

    `start(coro)` runs a coroutine as an asyncio task the peer owns: whatever is still
    running when the peer's context exits is cancelled and awaited there.
    """

    def __init__(
        self, loop: _TrioAsyncioLoop, model: AsyncioModel, tools: Mapping[str, AsyncioTool]
    ) -> None:
        self.loop = cast("asyncio.AbstractEventLoop", loop)
        self.model = model
        self.tools = tools
        self._loop = loop
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run `coro` as an asyncio task on the peer's loop and return the task. Never
        blocks: the task first runs at the trio run's next checkpoint. Callable from trio
        code and from asyncio code on the loop."""
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _stop(self) -> None:
        tasks = list(self._tasks)
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        # An asyncio task's cancellation is only a request: wait until each has ended.
        await self._loop.run_aio_future(asyncio.gather(*tasks, return_exceptions=True))


@asynccontextmanager
async def open_asyncio_peer(
    model: Any, tools: Sequence[Tool] = ()
) -> AsyncGenerator[AsyncioPeer, None]:
    """Open a trio-asyncio loop in the current trio task and yield an `AsyncioPeer` over
    `model` (anything with the `Model` surface) and `tools`. On exit, however it is left, the
    peer's tasks are cancelled and awaited, then the loop closes.

    Use it inside an agent factory, around what the factory yields, so the loop lives
    exactly as long as the agent. An implementation under test must run all its work on this
    loop: no threads, no wall-clock sleeps, no event loop of its own (docs/conformance.md).
    """
    import trio_asyncio  # type: ignore[import-untyped]  # pyright: ignore[reportMissingTypeStubs]

    opener = cast("Callable[[], Any]", trio_asyncio.open_loop)  # pyright: ignore[reportUnknownMemberType]
    async with opener() as raw:
        loop = cast("_TrioAsyncioLoop", raw)
        peer = AsyncioPeer(
            loop,
            AsyncioModel(loop, model),
            {tool.name: AsyncioTool(loop, tool) for tool in tools},
        )
        try:
            yield peer
        finally:
            with trio.CancelScope(shield=True):
                await peer._stop()  # pyright: ignore[reportPrivateUsage]
