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
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from typing import Any, Literal, Protocol, TypeVar, cast

import trio

from trio_agents import (
    AgentClosedError,
    Message,
    ModelChunk,
    ModelRequest,
    TextDelta,
    Tool,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolSpec,
    Usage,
)

__all__ = ["AsyncioModel", "AsyncioPeer", "AsyncioTool", "PeerAgent", "open_asyncio_peer"]

T = TypeVar("T")
Role = Literal["system", "user", "assistant", "tool"]


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
        `break`, an error, a cancel) closes the trio stream, as the agent's loop would.
        asyncio code: each chunk is an asyncio await (a trio checkpoint in the task that
        reads it), not a trio checkpoint of its caller."""
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

    name: the tool's name.
    description: the tool's description, for the model.
    parameters: the JSON schema of its arguments.
    """

    def __init__(self, loop: _TrioAsyncioLoop, tool: Tool) -> None:
        self._loop = loop
        self._tool = tool
        self.name = tool.name
        self.description = tool.description
        self.parameters: Mapping[str, Any] = tool.parameters

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        """Run the tool in trio and return its answer as a ToolResult. Cancelling the asyncio
        task that awaits it cancels the call in trio; a tool's error propagates. asyncio
        code: an asyncio await, not a trio checkpoint of its caller."""
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

    async def wait(self, future: asyncio.Future[T]) -> T:
        """Wait, from trio code, for an asyncio future or task of the peer's loop, and
        return its result (or raise its exception)."""
        return await self._loop.run_aio_future(future)

    async def aclose(self) -> None:
        """Cancel the tasks `start` made that are still running, and wait until each has
        ended (an asyncio cancellation is only a request). The peer's context does this on
        exit. Always a trio checkpoint."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await self.wait(asyncio.gather(*tasks, return_exceptions=True))
        else:
            await trio.lowlevel.checkpoint()


def _check_anyio() -> None:
    """trio-asyncio replaces `asyncio.get_running_loop` when it is imported; anyio's asyncio
    backend imports the function by name, so one imported first (as anyio's pytest plugin
    does) never sees trio-asyncio's loop, and every anyio task group in the framework fails
    with `no running event loop`. Name that instead of letting a turn fail with it."""
    backend = sys.modules.get("anyio._backends._asyncio")
    if backend is not None and getattr(backend, "get_running_loop", None) is not (
        asyncio.get_running_loop
    ):
        raise RuntimeError(
            "open_asyncio_peer(): anyio's asyncio backend was imported before trio-asyncio, "
            "so it cannot see trio-asyncio's loop; import trio_asyncio first "
            "(under pytest: run with -p no:anyio)"
        )


@asynccontextmanager
async def open_asyncio_peer(
    model: Any, tools: Sequence[Tool] = ()
) -> AsyncGenerator[AsyncioPeer, None]:
    """Open a trio-asyncio loop in the current trio task and yield an `AsyncioPeer` over
    `model` (anything with the `Model` surface) and `tools`. On exit, however it is left, the
    peer's tasks are cancelled and awaited, then the loop closes. Entering and leaving are
    trio checkpoints.

    Use it inside an agent factory, around what the factory yields, so the loop lives
    exactly as long as the agent. An implementation under test must run all its work on this
    loop: no threads, no wall-clock sleeps, no event loop of its own (docs/conformance.md).
    """
    # Lazy: trio-asyncio patches asyncio's loop lookup on import; only the asyncio path needs it.
    import trio_asyncio  # type: ignore[import-untyped]  # pyright: ignore[reportMissingTypeStubs]

    _check_anyio()
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
                await peer.aclose()


Claim = tuple[str, str, str, str]
"""A message a step took: (id, kind "steering" or "context", content, role)."""


class PeerAgent:
    """The part of an adapter every framework shares: the inbox, the status and the turn
    driver, on the peer's loop, reporting to an `AgentObserver`. It is the `ObservedAgent`
    an adapter factory yields; the adapter subclasses it and writes `run_turn`.

    `run_turn(prompt)` runs one turn in the framework's own loop, as an asyncio task, and
    calls `begin_step()` before each model call (it returns the steering and context the
    step claims, for the framework's request), `end_step()` after each step, and the
    observer's `text_streamed`, `reply_ended`, `tool_called` and `tool_answered` as they
    happen. It returns None (completed) or the turn's end reason. `cancel` cancels the
    turn's task (`cancel_turn`, which a framework with another cancel primitive overrides);
    a step still open when the task ends is closed: its reply interrupted, its unanswered
    tool calls interrupted. `message_taken(message)` tells the adapter, synchronously, of
    each message the moment it becomes history (a turn's prompt, a step's steering and
    context), before any cancel can land: an adapter that keeps its own history overrides it.

    peer: the AsyncioPeer the framework runs on.
    observer: the AgentObserver the instants go to.
    options: the agent's options; `max_steps` is the adapter's to honour.
    steps: the steps the running turn has started.
    turn: the running (or last) turn's number.
    task: the running turn's asyncio task, or None.
    """

    interrupted_content: str | None = None
    """What the framework tells its model of an interrupted tool call (None: the suite's
    default sentence)."""

    def __init__(self, peer: AsyncioPeer, observer: Any, options: Any) -> None:
        self.peer = peer
        self.observer = observer
        self.options = options
        self.steps = 0
        self.turn = 0
        self.task: asyncio.Task[Any] | None = None
        self._ids = 0
        self._queue: list[tuple[str, str]] = []
        self._claims: list[Claim] = []  # steering and context for the next step
        self._ending: dict[str, Any] | None = None  # the first cancel's turn end
        self._step_open = False
        self._replied = False
        self._open_calls: list[str] = []
        self._closed = False
        self._exited = False  # the driver has ended (or will never run)
        self._cancelling = False  # a cancel is announcing itself (CancelRequested)
        self._status = "idle"
        self._wakeup = asyncio.Event()
        self._settled = trio.lowlevel.ParkingLot()  # wait_idle's waiters
        self._driver: asyncio.Task[None] | None = None

    @property
    def pending(self) -> tuple[tuple[str, str], ...]:
        """The accepted messages not yet delivered, in order: (id, kind)."""
        queued = tuple((mid, "prompt") for mid, _ in self._queue)
        return tuple((c[0], c[1]) for c in self._claims) + queued

    def send(self, content: str) -> str:
        """Queue a prompt; RUNNING before it returns (A1)."""
        mid = self._accept()
        self._queue.append((mid, content))
        self._running()
        return mid

    def steer(self, content: str) -> str:
        """Steering for the running turn's next step, or a prompt without a live turn (A3):
        steering never joins a cancelled turn that is still unwinding."""
        if not self._live():
            return self.send(content)
        mid = self._accept()
        self._claims.append((mid, "steering", content, "user"))
        return mid

    def inject(self, message: Any, /) -> str:
        """Context for the next step, as a str or a user or system Message (A4)."""
        mid = self._accept()
        if isinstance(message, str):
            content, role = message, "user"
        else:
            content, role = message.content, message.role
        self._claims.append((mid, "context", content, role))
        return mid

    def cancel(self, reason: str, *, cause: Any) -> bool:
        """Cancel the live turn and drop the queued prompts and steering (A5, A6).

        Effective only with a live turn (running and not cancelled yet: a second cancel of
        a turn still unwinding has nothing to cancel) or queued work; a cancel made while
        another announces itself (from a CancelRequested listener) is not. An effective one
        emits CancelRequested first, then drops only the work there was when it was called
        (a listener's send comes after it), then cancels the turn. The first cause given
        to a turn is the one it ends with. A cause other than "user" or "parent" is a
        ValueError, before anything changes."""
        if cause not in ("user", "parent"):
            raise ValueError(f"cause must be 'user' or 'parent', got {cause!r}")
        if self._closed or self._cancelling:
            return False
        live = self._live()
        work = {mid for mid, _ in self._queue}
        work |= {c[0] for c in self._claims if c[1] == "steering"}
        if not live and not work:
            return False
        if live:  # claimed before anyone hears of it: a listener's steer becomes a prompt
            self._ending = {"kind": "aborted", "reason": reason, "cause": cause}
        self._cancelling = True
        try:
            self.observer.cancel_requested(cause, reason)
        finally:
            self._cancelling = False
        self._queue = [q for q in self._queue if q[0] not in work]
        self._claims = [c for c in self._claims if c[0] not in work]
        if live:
            self.cancel_turn()
        elif self.task is None and not self._queue:
            self._idle()
        return True

    def cancel_turn(self) -> None:
        """The framework's cancel primitive; by default, cancel the turn's asyncio task."""
        if self.task is not None:
            self.task.cancel()

    async def wait_idle(self) -> None:
        """Return once the agent is IDLE with nothing queued, or, closed, once the driver
        has ended (A9). A waiter woken as the agent goes IDLE looks again: if a listener of
        that StatusChanged started a replacement turn, it waits for that turn too. Always a
        trio checkpoint."""
        await trio.lowlevel.checkpoint()
        while not (self._exited if self._closed else self._status == "idle"):
            await self._settled.park()

    async def run_turn(self, prompt: str) -> Mapping[str, Any] | None:
        """One turn in the framework's loop; the adapter's to write. asyncio code: it runs
        as the turn's asyncio task (no trio checkpoint). A cancel from a TurnStarted
        listener cancels the task before it first runs: nothing of it runs then (see
        `message_taken` for keeping the prompt)."""
        raise NotImplementedError

    def message_taken(self, message: Message) -> None:
        """`message` has just become history: the turn's prompt as the turn starts (before
        TurnStarted), or steering or context as a step claims it (before StepStarted), with
        its role and `source` ("prompt", "steering", "context"). The records hold it from
        now on, whatever cancel lands next, so the next model request must too (A12): an
        adapter whose framework keeps its own history adds it there. Synchronous; called
        before the listeners that may cancel run. By default nothing: the framework takes
        the prompt from `run_turn` and the claims from `next_step`."""

    def begin_step(self) -> list[Claim]:
        """Claim the next step's steering and context, and start the step."""
        claims, self._claims = self._claims, []
        for mid, kind, content, role in claims:
            self.message_taken(Message(cast("Role", role), content, source=kind))
            self.observer.message_claimed(mid, kind, content, role=role)
        self.steps += 1
        self._step_open, self._replied, self._open_calls = True, False, []
        self.observer.step_started()
        return claims

    async def next_step(self) -> list[Claim]:
        """`end_step()`, then `begin_step()`, each followed by an asyncio checkpoint
        (`asyncio.sleep(0)`): a cancel from a StepEnded or StepStarted listener lands there,
        before the model is called. asyncio code."""
        self.end_step()
        await asyncio.sleep(0)
        claims = self.begin_step()
        await asyncio.sleep(0)
        return claims

    async def stream_reply(self, messages: Sequence[Message]) -> tuple[str, list[ToolCall]]:
        """Call the suite's model with `messages` (what the framework would send) and this
        agent's tools and options, report its text as it streams and the reply's end, and
        return the text and the tool calls. asyncio code: it awaits the model's chunks (see
        `AsyncioModel.stream`; not a trio checkpoint of its caller)."""
        specs = [ToolSpec(t.name, t.description, t.parameters) for t in self.peer.tools.values()]
        text: list[str] = []
        calls: list[ToolCall] = []
        finish: Any = "stop"
        usage: Usage | None = None
        async for chunk in self.peer.model.stream(ModelRequest(messages, specs, self.options)):
            if isinstance(chunk, TextDelta):
                text.append(chunk.text)
                self.observer.text_streamed(chunk.text)
            elif isinstance(chunk, ToolCall):
                calls.append(chunk)
            else:
                finish, usage = chunk.reason, chunk.usage
                break
        self.reply_ended(finish, usage)
        return "".join(text), calls

    async def call_tool(self, name: str, call_id: str, arguments: Mapping[str, Any]) -> str:
        """Run the suite's tool `name` for the framework, reporting the call and its answer;
        the text the framework gives its model. asyncio code (see `AsyncioTool.__call__`;
        not a trio checkpoint of its caller)."""
        tool = self.peer.tools[name]
        self.tool_called(call_id, name, arguments)
        context = ToolContext(self.observer.agent_id, call_id, self.turn, self.steps)
        result = await tool(arguments, context)
        self.tool_answered(call_id, result)
        return result.content

    def reply_ended(self, finish: Any = "stop", usage: Usage | None = None) -> None:
        """The step's reply ended (`finish`, and the `usage` the model reported):
        `observer.reply_ended`, noted for the close."""
        self._replied = True
        self.observer.reply_ended(finish=finish, usage=usage)

    def tool_called(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> None:
        """`observer.tool_called`, noted: a call left unanswered is interrupted."""
        self._open_calls.append(call_id)
        self.observer.tool_called(call_id, name, arguments)

    def tool_answered(self, call_id: str, result: ToolResult) -> None:
        """`observer.tool_answered` with the tool's result."""
        self._open_calls.remove(call_id)
        self.observer.tool_answered(call_id, result.content, is_error=result.is_error)

    def end_step(self) -> None:
        """End the open step (if one is open)."""
        if self._step_open:
            self._step_open = False
            self.observer.step_ended()

    def steering_waits(self) -> bool:
        """Whether steering waits for a next step."""
        return any(kind == "steering" for _, kind, _, _ in self._claims)

    # -- the driver ----------------------------------------------------------------------

    def open(self) -> None:
        """Start the turn driver on the peer's loop."""
        self._driver = self.peer.start(self._drive())

    async def aclose(self) -> None:
        """Close: CLOSED, the turn cancelled and ended `closed`, the driver ended. trio
        code, for the factory's exit. Always a trio checkpoint; a close always finishes
        (shielded from an outer cancel)."""
        with trio.CancelScope(shield=True):
            if not self._closed:
                self._close()
                if self._driver is not None:
                    await self.peer.wait(asyncio.gather(self._driver, return_exceptions=True))
                self._exit()
            await trio.lowlevel.checkpoint()

    def _close(self) -> None:
        self._closed = True
        self._queue.clear()
        self._claims = [c for c in self._claims if c[1] == "context"]
        self._status = "closed"
        self.observer.status_changed("closed")
        if self.task is not None:
            self._ending = self._ending or {"kind": "closed"}
            self.cancel_turn()
        self._wakeup.set()

    async def _drive(self) -> None:
        try:
            while not self._closed:
                if not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                mid, content = self._queue.pop(0)
                await self._turn(mid, content)
                if not self._queue and not self._closed:
                    self._idle()
        finally:
            if self._closed:
                self._exit()

    async def _turn(self, mid: str, content: str) -> None:
        self._ending, self.steps = None, 0
        self.turn += 1
        self.task = self.peer.start(self.run_turn(content))
        self.message_taken(Message("user", content, source="prompt"))
        self.observer.turn_started(mid, content)
        try:
            end = await self.task
        except asyncio.CancelledError:
            end = None  # the cancel's reason, in `_ending`
        except Exception as exc:
            end = {"kind": "error", "message": f"{type(exc).__name__}: {exc}"}
        if self._step_open:
            if not self._replied:
                self.observer.reply_ended(interrupted=True)
            for call_id in self._open_calls:
                self.observer.tool_interrupted(call_id, content=self.interrupted_content)
            # The turn has not ended: a StepEnded listener's cancel still reaches it (A8).
            self.end_step()
        if self._ending is not None:
            end = self._ending
        self.task = None
        self.observer.turn_ended(end or {"kind": "completed"})
        # Steering the turn did not take becomes the next prompt, ahead of the queue (A3).
        left = [(c[0], c[2]) for c in self._claims if c[1] == "steering"]
        self._claims = [c for c in self._claims if c[1] == "context"]
        self._queue[:0] = left

    def _accept(self) -> str:
        if self._closed:
            raise AgentClosedError("the agent is closed")
        self._ids += 1
        return f"m{self._ids}"

    def _live(self) -> bool:
        """Whether a turn runs that no cancel or close has reached yet."""
        return self.task is not None and self._ending is None

    def _running(self) -> None:
        self._status = "running"
        self.observer.status_changed("running")
        self._wakeup.set()

    def _idle(self) -> None:
        """IDLE, and wake the waiters: each looks again, so one whose StatusChanged
        listener sent waits for the replacement turn (A9)."""
        if self._closed:
            return
        self._status = "idle"
        self.observer.status_changed("idle")
        self._settled.unpark_all()

    def _exit(self) -> None:
        """The driver has ended (or never ran): CLOSED waiters return."""
        self._exited = True
        self._settled.unpark_all()
