"""The agent registry, agent handles, and the one teardown every owner of an agent joins.

Creating or resuming an agent is a transaction (rule L3): prepare privately, enter the
session (the store rejects a duplicate live id), enter the agent, announce. A loser, or a
create that races its owner's close (L4), runs the same teardown as a normal close and
leaves nothing behind.

Each agent has a lifecycle task in its owner fiber's nursery. That task hosts the agent's own
fiber, which runs the agent's loop, and performs the teardown of rule L1 when asked:

    stop the loop (turn ends `closed`)  ->  await its exit  ->  kill and reap its shell jobs
    ->  flush the session  ->  unregister the agent (AgentClosed)
    ->  detach the session (SessionClosed)  ->  unwind the agent's own fiber

The handle holder, the owner fiber and the runtime all reach it through `_Lifecycle.aclose`,
which is memoized: the first call starts it, every call waits for the same end (L2).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import trio

from .agent import Agent, Closer
from .errors import DuplicateSessionError
from .events import AgentClosed, AgentCreated, SessionClosed, SessionCreated
from .fiber import Fiber, FiberClosedError
from .model import Model
from .nursery import report_started, runs_inside, start_service
from .options import AgentOptions
from .session import Session
from .store import new_header
from .tool import Tool

if TYPE_CHECKING:
    from types import TracebackType

    from .runtime import Runtime

__all__ = ["AgentHandle", "AgentRegistry"]

logger = logging.getLogger("trio_agents.registry")

Phase = Literal["preparing", "live", "closing", "closed"]


class AgentHandle:
    """The capability to close one agent. `async with handle:` closes it on exit."""

    __slots__ = ("_life",)

    def __init__(self, life: _Lifecycle) -> None:
        self._life = life

    @property
    def agent(self) -> Agent:
        return self._life.agent

    @property
    def closed(self) -> bool:
        return self._life.phase == "closed"

    @property
    def fiber(self) -> Fiber:
        """The agent's own fiber: what it owns (its loop, whatever its tools attach to it)
        unwinds last in its teardown, after the session has detached."""
        return self._life.fiber

    async def aclose(self) -> None:
        """Close the agent and wait until its teardown is complete. Memoized: every caller,
        however many and in whatever order, waits for the same teardown. Shielded: a
        cancelled caller still waits (the teardown is bounded by `close_grace`)."""
        await self._life.aclose()

    async def __aenter__(self) -> AgentHandle:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AgentHandle {self.agent.id!r} {self._life.phase}>"


class _Lifecycle:
    """One agent's resources, publication state and memoized teardown."""

    def __init__(self, runtime: Runtime, owner: Fiber, agent: Agent) -> None:
        self.runtime = runtime
        self.owner = owner
        self.agent = agent
        self.session = agent.session
        self.phase: Phase = "preparing"
        self.fiber = Fiber(f"agent {agent.id}", runtime, None)
        self._serving = False
        self._task: trio.lowlevel.Task | None = None
        self._close_requested = trio.Event()
        self._done = trio.Event()
        self._errors: list[Exception] = []
        self._detach_session: Callable[[], None] | None = None
        self._registered = False
        self._session_announced = False
        self._agent_announced = False

    # -- the lifecycle task -------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._task = trio.lowlevel.current_task()
        try:
            with trio.CancelScope(shield=True):  # only aclose() ends an agent
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.fiber.serve)
                    close_loop: Closer = await self.fiber.nursery.start(self.agent.run)
                    if not report_started(task_status, None):
                        self._close_requested.set()  # the create was cancelled: roll back
                    try:
                        await self._close_requested.wait()
                    finally:
                        # Also when a task of the agent's fiber crashed: unregister and
                        # detach anyway, so nothing is left half-closed (rule L5).
                        with trio.CancelScope(shield=True):
                            await self._teardown(close_loop)
        finally:
            self.phase = "closed"
            self._done.set()

    async def _teardown(self, close_loop: Closer) -> None:
        self.phase = "closing"
        grace = self.agent.options.close_grace
        try:
            if not await close_loop():
                # The loop did not stop in time (a tool ignores cancellation): cancel every
                # task of the agent's fiber, then wait for the loop to exit before flushing,
                # or its closing turn/end would miss the store (rule L1).
                if self.fiber.state == "open":
                    self.fiber.nursery.cancel_scope.cancel(reason="agent close_grace expired")
                await self.agent.wait_idle()
            # Its jobs die while its id is still live, so a same-id successor (which can
            # only appear after the detach below) never loses a job to this teardown. An
            # agent that never went live (a create that lost a same-id race) owns no job:
            # the jobs of that id belong to the winner.
            if self._registered:
                await self.runtime.shell.kill_owned(self.agent.id)
            if self._detach_session is not None:
                with trio.move_on_after(grace) as flush_scope:
                    await self.runtime.sessions.flush(self.session)
                if flush_scope.cancelled_caught:
                    raise TimeoutError(
                        f"agent {self.agent.id!r}: the session was not flushed within {grace}s"
                    )
        except Exception as exc:
            self._errors.append(exc)
        finally:
            self._unregister()
            self._detach()
            try:
                await self.fiber.aclose()
            except Exception as exc:
                self._errors.append(exc)
            self.owner._discard(self.aclose)  # pyright: ignore[reportPrivateUsage]

    async def aclose(self) -> None:
        self._close_requested.set()
        if not self._serving:
            self.phase = "closed"
            self._done.set()
        if self._task is not None and runs_inside(self._task):
            # Called from inside the agent (a tool closing its own agent): it cannot wait
            # for its own end. The teardown goes on; the caller is cancelled with its turn.
            await trio.lowlevel.checkpoint()
            return
        with trio.CancelScope(shield=True):
            await self._done.wait()
        if self._errors:
            raise ExceptionGroup(f"errors while closing agent {self.agent.id!r}", self._errors)

    # -- publication --------------------------------------------------------------------

    async def start(self) -> None:
        self._serving = True
        try:
            await start_service(self.owner.nursery, self.serve)
        except BaseException:
            self._serving = False
            raise

    def check_live(self) -> None:
        if self._close_requested.is_set():
            raise FiberClosedError(
                f"agent {self.agent.id!r} was closed while it was being created "
                f"(owner fiber {self.owner.name!r} is {self.owner.state})"
            )

    def publish(self) -> None:
        """Enter the session, enter the agent, announce. Synchronous, so nothing can observe
        a half-published agent; a duplicate id raises before anything became visible."""
        self._detach_session = self.runtime.sessions.enter(self.session)
        live = self.runtime._live_agents  # pyright: ignore[reportPrivateUsage]
        assert self.agent.id not in live, "the store admitted a session whose agent is live"
        live[self.agent.id] = self
        self._registered = True
        self.phase = "live"
        self._session_announced = True
        self.runtime.events.emit(SessionCreated(self.session.id))
        self._agent_announced = True
        self.runtime.events.emit(AgentCreated(self.agent.id))

    def _unregister(self) -> None:
        if self._registered:
            live = self.runtime._live_agents  # pyright: ignore[reportPrivateUsage]
            if live.get(self.agent.id) is self:
                del live[self.agent.id]
            self._registered = False
            if self._agent_announced:
                self.runtime.events.emit(AgentClosed(self.agent.id))

    def _detach(self) -> None:
        if self._detach_session is not None:
            self._detach_session()
            self._detach_session = None
            if self._session_announced:
                self.runtime.events.emit(SessionClosed(self.session.id))


class AgentRegistry:
    """Creates, resumes and finds agents. `rt.agents` and `fiber.agents` are registries
    over the same live agents; an agent created through `fiber.agents` is owned by `fiber`
    (closing the fiber closes it), one created through `rt.agents` by the runtime."""

    __slots__ = ("_owner", "_runtime")

    def __init__(self, runtime: Runtime, owner: Fiber) -> None:
        self._runtime = runtime
        self._owner = owner

    @property
    def owner(self) -> Fiber:
        return self._owner

    def get(self, agent_id: str) -> Agent | None:
        life = self._runtime._live_agents.get(agent_id)  # pyright: ignore[reportPrivateUsage]
        return life.agent if life is not None else None

    def list(self) -> list[Agent]:
        return [life.agent for life in self._runtime._live_agents.values()]  # pyright: ignore[reportPrivateUsage]

    async def create(
        self,
        *,
        model: Model,
        tools: Sequence[Tool] = (),
        session_id: str | None = None,
        options: AgentOptions | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> AgentHandle:
        """Create an agent with a new session (`session_id`, or a fresh UUID).

        Raises DuplicateSessionError if the id is live or already stored (resume a stored
        session instead), and FiberClosedError if the owner closes meanwhile.
        """
        self._owner._check_open("create an agent in")  # pyright: ignore[reportPrivateUsage]
        sid = session_id if session_id is not None else str(uuid.uuid4())
        store = self._runtime.sessions
        self._reject_live(sid)
        if await store.exists(sid):
            raise DuplicateSessionError(
                f"session {sid!r} already exists in {store!r}; resume it with "
                "agents.resume(session_id, ...) or choose another id"
            )
        session = Session(sid, new_header(meta))
        return await self._publish(session, model, tools, options)

    async def resume(
        self,
        session_id: str,
        *,
        model: Model,
        tools: Sequence[Tool] = (),
        options: AgentOptions | None = None,
    ) -> AgentHandle:
        """Resume a stored session. A turn a crash left open is closed `interrupted` first
        (rule L6). Raises SessionNotFoundError, or DuplicateSessionError if it is live."""
        self._owner._check_open("resume an agent in")  # pyright: ignore[reportPrivateUsage]
        self._reject_live(session_id)
        stored = await self._runtime.sessions.restore(session_id)
        session = Session(session_id, stored.header, stored.records)
        return await self._publish(session, model, tools, options)

    def _reject_live(self, sid: str) -> None:
        if sid in self._runtime.sessions.live_ids:
            raise DuplicateSessionError(
                f"session {sid!r} is live; close its agent before creating or resuming it again"
            )

    async def _publish(
        self,
        session: Session,
        model: Model,
        tools: Sequence[Tool],
        options: AgentOptions | None,
    ) -> AgentHandle:
        owner = self._owner
        owner._check_open("create an agent in")  # pyright: ignore[reportPrivateUsage]
        agent = Agent(
            session=session, model=model, tools=tools, options=options, events=self._runtime.events
        )
        life = self._runtime.lifecycle_class(self._runtime, owner, agent)
        # The owner co-owns the teardown before any resource exists, so an owner close that
        # lands anywhere below also tears down what was prepared (rule L4).
        owner._push(f"agent {agent.id}", life.aclose)  # pyright: ignore[reportPrivateUsage]
        try:
            await life.start()
            life.check_live()
            life.publish()
        except BaseException:
            with trio.CancelScope(shield=True):
                try:
                    await life.aclose()
                except Exception:
                    logger.exception("rolling back agent %r failed", agent.id)
            raise
        return AgentHandle(life)
