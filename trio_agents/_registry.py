"""The agent registry, agent handles, and the one teardown every owner of an agent joins.

Creating or resuming an agent is a transaction (rule L3): prepare privately, enter the
session (the store rejects a duplicate live id), enter the agent, announce. A loser, or a
create that races its owner's close (L4), runs the same teardown as a normal close and
leaves nothing behind.

Each agent has one task, its lifecycle task, in its owner fiber's nursery. That task opens
the agent's own fiber's nursery, runs the agent's loop in it, and when the loop has exited
performs the teardown of rule L1:

    stop the loop (turn ends `closed`)  ->  its exit  ->  kill and reap its shell jobs
    ->  flush the session  ->  unregister the agent (AgentClosed)
    ->  detach the session (SessionClosed)  ->  unwind the agent's own fiber

The handle holder, the owner fiber and the runtime all reach it through `Lifecycle.aclose`,
which is memoized: the first call starts it, every call waits for the same end (L2).

The registry does not know the runtime: the runtime builds one `Services` (the live-agent
table and the store, shell and event bus every lifecycle uses) and hands it to each
registry, so imports run one way (fiber -> registry -> runtime).
"""

from __future__ import annotations

import functools
import logging
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import trio

from ._agent._agent import Agent
from ._agent._approval import Approval
from ._agent._events import AgentClosed, AgentCreated, EventBus, SessionClosed, SessionCreated
from ._agent._options import AgentOptions
from ._agent._parts import check_meta, check_parts
from ._agent._turn import Closer, claim_lost
from ._errors import (
    FiberClosedError,
    FlushTimeoutError,
    PersistenceError,
    SessionExistsError,
    SessionLiveError,
    StoreBrokenError,
)
from ._fiber import AgentFiber, Fiber, require_open
from ._model._seam import Model
from ._nursery import report_started, runs_inside, start_service
from ._shell._executor import ShellExecutor
from ._store._base import SessionStore, new_header
from ._store._session import Session
from ._tool._seam import Tool

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["AgentHandle", "AgentRegistry", "Lifecycle", "Services"]

logger = logging.getLogger("trio_agents.registry")

Phase = Literal["preparing", "live", "closing", "closed"]


class AgentHandle:
    """The capability to close one agent. `async with handle:` closes it on exit."""

    __slots__ = ("_life",)

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    @property
    def agent(self) -> Agent:
        """The agent this handle closes."""
        return self._life.agent

    @property
    def closed(self) -> bool:
        """Whether the agent's teardown is complete."""
        return self._life.phase == "closed"

    @property
    def fiber(self) -> Fiber:
        """The agent's own fiber: what it owns (its loop, whatever its tools attach to it)
        unwinds last in its teardown, after the session has detached."""
        return self._life.fiber

    async def aclose(self) -> None:
        """Close the agent and wait until its teardown is complete. Memoized: every caller,
        however many and in whatever order, waits for the same teardown. Shielded: a
        cancelled caller still waits (the teardown is bounded by `close_grace`).

        Always a checkpoint (a cancel-shielded one). Called from inside the agent (a tool
        closing its own agent) it cannot wait for its own end: it starts the close and
        returns after a plain checkpoint. Raises an ExceptionGroup of what failed in the
        teardown (e.g. a TimeoutError when the session was not flushed within `close_grace`);
        every later step of the teardown ran regardless.
        """
        await self._life.aclose()

    async def __aenter__(self) -> AgentHandle:
        """The handle itself. Always a checkpoint."""
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """`await self.aclose()`, whatever the block raised; see `aclose` (a checkpoint)."""
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AgentHandle {self.agent.id!r} {self._life.phase}>"


class Services:
    """What every registry of one runtime shares: the live agents by id, and the services
    their lifecycles use (rule F3: plain typed attributes). Built by the runtime."""

    __slots__ = ("events", "lifecycle_class", "live", "sessions", "shell")

    def __init__(
        self,
        sessions: SessionStore,
        events: EventBus,
        shell: ShellExecutor,
        lifecycle_class: type[Lifecycle],
    ) -> None:
        self.sessions = sessions
        self.events = events
        self.shell = shell
        # How one agent is published and torn down: a seam for test doubles of the runtime
        # (the conformance suite's known-bad runtimes replace single steps of it).
        self.lifecycle_class = lifecycle_class
        # Invariant: an id is here exactly while its agent is published and not yet
        # unregistered by its teardown (rules L3, L5).
        self.live: dict[str, Lifecycle] = {}


class Lifecycle:
    """One agent's resources, publication state and memoized teardown.

    Invariants: `phase` only moves forward (preparing -> live -> closing -> closed);
    `_close_requested` never goes back to False, and once True the loop has been told to stop
    or will be as soon as it starts; `_registered` is True exactly while `services.live`
    maps the agent's id to this lifecycle; `_detach_session` is set exactly while the session
    is entered in the store; `_done` is set once, when the teardown is complete.
    """

    __slots__ = (
        "_agent_announced",
        "_close_requested",
        "_closer",
        "_detach_session",
        "_done",
        "_errors",
        "_loop_exited",
        "_loop_failed_to_persist",
        "_nursery",
        "_registered",
        "_serving",
        "_session_announced",
        "_task",
        "agent",
        "disposer_key",
        "fiber",
        "owner",
        "phase",
        "services",
        "session",
    )

    def __init__(self, services: Services, owner: Fiber, agent: Agent) -> None:
        self.services = services
        self.owner = owner
        self.agent = agent
        self.session = agent.session
        self.phase: Phase = "preparing"
        self.fiber = AgentFiber(f"agent {agent.id}", owner.runtime, self.aclose)
        self._serving = False
        self._task: trio.lowlevel.Task | None = None
        self._nursery: trio.Nursery | None = None
        self._close_requested = False
        self._closer: Closer | None = None  # the loop's, once it has started
        self._loop_exited = False
        self._done = trio.Event()
        self._errors: list[Exception] = []
        self._loop_failed_to_persist = False  # the loop ended with a PersistenceError
        self.disposer_key: int | None = None  # its entry in the owner's disposers
        self._detach_session: Callable[[], None] | None = None
        self._registered = False
        self._session_announced = False
        self._agent_announced = False

    # -- the lifecycle task -------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The agent's one task: it hosts the agent's fiber, runs the loop in it, and tears
        down when the loop has exited, so the teardown cannot start before that exit."""
        self._task = trio.lowlevel.current_task()
        try:
            async with trio.open_nursery() as nursery:
                # Only aclose() ends an agent: the owner's cancellation does not reach here.
                nursery.cancel_scope.shield = True
                self._nursery = nursery
                self.fiber.host(nursery, self._task)
                if not report_started(task_status, None):
                    self._close_requested = True  # the create was cancelled: roll back
                try:
                    await self.agent.run(task_status=self)
                except Exception as exc:
                    # A session whose claim another process took ends its agent alone: one
                    # line, and the error for whoever closes the agent; the runtime goes on
                    # (design D492). Any other failure of the loop still fails the runtime.
                    lost = claim_lost(exc)
                    if lost is None:
                        self._loop_failed_to_persist = isinstance(exc, PersistenceError)
                        raise
                    logger.error("agent %r closed: %s", self.agent.id, lost)
                    self._errors.append(lost)
                finally:
                    # Also when a task of the agent's fiber crashed: unregister and detach
                    # anyway, so nothing is left half-closed (rule L5).
                    self._loop_ended(nursery)
                    with trio.CancelScope(shield=True):
                        await self._teardown()
        finally:
            self._finish()

    def started(self, value: Closer | None = None) -> None:
        """The agent's loop hands over its closer as it starts (the `task_status` protocol
        of `Agent.run`), before its first checkpoint: a close requested earlier stops it
        now."""
        self._closer = value
        if self._close_requested:
            self._stop_loop()

    def _finish(self) -> None:
        self.phase = "closed"
        self._done.set()
        # The agent's fiber closes the agent through this lifecycle; closed, it only reports
        # how the close went. Letting go of the lifecycle breaks the cycle lifecycle ->
        # fiber -> lifecycle, so a closed agent is freed without the cycle collector.
        self.fiber.release_owner(functools.partial(_report_closed, self.agent.id, self._errors))

    def _request_close(self) -> None:
        """Stop the loop (its turn ends `closed`) and bound how long it may take. Seam: a
        double may change what a close request does at once."""
        if self._close_requested:
            return
        self._close_requested = True
        if self._closer is not None:
            self._stop_loop()
        # else the loop has not started yet: it is stopped as it starts (`started`).

    def _stop_loop(self) -> None:
        if self._closer is None:
            return  # the loop has not started: `started` stops it as it does
        self._closer.begin()
        # Past close_grace (a tool ignores cancellation) every task of the agent's fiber is
        # cancelled; the teardown still waits for the loop, or its closing turn/end would
        # miss the store (rule L1).
        if self._nursery is not None and not self._loop_exited:
            scope = self._nursery.cancel_scope
            scope.deadline = min(
                scope.deadline, trio.current_time() + self.agent.options.close_grace
            )

    def _loop_ended(self, nursery: trio.Nursery) -> None:
        self._loop_exited = True
        scope = nursery.cancel_scope
        if not scope.cancel_called:
            scope.deadline = math.inf  # the fiber's own tasks end after its disposers
        elif self._close_requested and trio.current_time() >= scope.deadline:
            logger.error(
                "agent %r did not stop within close_grace=%ss; a tool is ignoring cancellation",
                self.agent.id,
                self.agent.options.close_grace,
            )

    async def _teardown(self) -> None:
        """Close the agent once its loop has stopped: kill its jobs, flush its session, then
        unregister and detach it. Seam: a double may change the steps or their order."""
        self.phase = "closing"
        self._close_requested = True
        grace = self.agent.options.close_grace
        try:
            # Its jobs die while its id is still live, so a same-id successor (which can
            # only appear after the detach below) never loses a job to this teardown. An
            # agent that never went live (a create that lost a same-id race) owns no job:
            # the jobs of that id belong to the winner.
            if self._registered:
                await self.services.shell.kill_owned(self.agent.id)
            if self._detach_session is not None:
                with trio.move_on_after(grace) as flush_scope:
                    await self.services.sessions.flush(self.session)
                if flush_scope.cancelled_caught:
                    raise FlushTimeoutError(
                        f"agent {self.agent.id!r}: the session was not flushed within "
                        f"close_grace={grace}s; check the store, or give a longer close_grace"
                    )
        except Exception as exc:
            # The flush of a session given up repeats the loss the loop already reported, and
            # so does that of a store already broken when the loop's commit failed (D499).
            repeated = (claim_lost(exc) and any(claim_lost(e) for e in self._errors)) or (
                isinstance(exc, StoreBrokenError) and self._loop_failed_to_persist
            )
            if not repeated:
                self._errors.append(exc)
        finally:
            self._unregister()
            self._detach()
            self._errors.extend(await self.fiber.unwind_hosted())
            if self.disposer_key is not None:
                self.owner.discard(self.disposer_key)

    async def aclose(self) -> None:
        self._request_close()
        if not self._serving:
            self._finish()
        if self._task is not None and runs_inside(self._task):
            # Called from inside the agent (a tool closing its own agent): it cannot wait
            # for its own end. The teardown goes on; the caller is cancelled with its turn.
            await trio.lowlevel.checkpoint()
            return
        with trio.CancelScope(shield=True):
            await self._done.wait()
        _raise_close_errors(self.agent.id, self._errors)

    # -- publication --------------------------------------------------------------------

    async def start(self) -> None:
        self._serving = True
        try:
            await start_service(self.owner.nursery, self.serve)
        except BaseException:
            # Its task may have started before the start failed (its creator was cancelled
            # as it started): then the teardown is under way, and closing must wait for it.
            if self._task is None:
                self._serving = False
            raise

    def check_live(self) -> None:
        if self._close_requested:
            raise FiberClosedError(
                f"agent {self.agent.id!r} was closed while it was being created "
                f"(owner fiber {self.owner.name!r} is {self.owner.state})"
            )

    def publish(self) -> None:
        """Enter the session, enter the agent, announce. Synchronous, so nothing can observe
        a half-published agent; a duplicate id raises before anything became visible."""
        self._detach_session = self.services.sessions.enter(self.session)
        live = self.services.live
        assert self.agent.id not in live, "the store admitted a session whose agent is live"
        live[self.agent.id] = self
        self._registered = True
        self.phase = "live"
        self._session_announced = True
        self.services.events.emit(SessionCreated(self.session.id))
        self._agent_announced = True
        self.services.events.emit(AgentCreated(self.agent.id))

    def _unregister(self) -> None:
        """Remove the agent from the live agents and announce AgentClosed, once. Seam: a double
        may change the unregistering and its event."""
        if self._registered:
            live = self.services.live
            if live.get(self.agent.id) is self:
                del live[self.agent.id]
            self._registered = False
            if self._agent_announced:
                self.services.events.emit(AgentClosed(self.agent.id))

    def _detach(self) -> None:
        """Take the session out of its store and announce SessionClosed, once. Seam: a double
        may change the detaching and its event."""
        if self._detach_session is not None:
            self._detach_session()
            self._detach_session = None
            if self._session_announced:
                self.services.events.emit(SessionClosed(self.session.id))


async def _report_closed(agent_id: str, errors: list[Exception]) -> None:
    """`aclose()` of an agent whose teardown is complete: a checkpoint, then its errors."""
    with trio.CancelScope(shield=True):
        await trio.lowlevel.checkpoint()
    _raise_close_errors(agent_id, errors)


def _raise_close_errors(agent_id: str, errors: list[Exception]) -> None:
    if errors:
        raise ExceptionGroup(f"errors while closing agent {agent_id!r}", errors)


class AgentRegistry:
    """Creates, resumes and finds agents. `rt.agents` and `fiber.agents` are registries
    over the same live agents; an agent created through `fiber.agents` is owned by `fiber`
    (closing the fiber closes it), one created through `rt.agents` by the runtime."""

    __slots__ = ("_owner", "_services")

    def __init__(self, services: Services, owner: Fiber) -> None:
        self._services = services
        self._owner = owner

    @property
    def owner(self) -> Fiber:
        """The fiber that owns the agents created or resumed through this registry."""
        return self._owner

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with that id, whoever owns it, or None. An agent is found from its
        publication (`SessionCreated`, `AgentCreated`) until its teardown unregisters it
        (`AgentClosed`). Never blocks."""
        life = self._services.live.get(agent_id)
        return life.agent if life is not None else None

    def list(self) -> list[Agent]:
        """Every live agent of the runtime, whoever owns it, in the order they went live (a
        new list). Never blocks."""
        return [life.agent for life in self._services.live.values()]

    async def create(
        self,
        *,
        model: Model,
        tools: Sequence[Tool] = (),
        session_id: str | None = None,
        options: AgentOptions | None = None,
        meta: Mapping[str, Any] | None = None,
        approval: Approval | None = None,
    ) -> AgentHandle:
        """Create an agent with a new session (`session_id`, or a fresh UUID).

        `meta` is added to the session's header (e.g. `{"cwd": ...}`); `approval` makes the
        agent ask before the calls its policy gates (one Approval per agent). The agent is owned by
        this registry's owner and live, with its loop running, when this returns; close it
        with the handle, or by closing its owner. Always a checkpoint.

        Raises SessionLiveError if the id is live, SessionExistsError if it is stored (resume it
        instead), both DuplicateSessionErrors, and FiberClosedError if the owner is not open or
        closes meanwhile (nothing of the agent is left behind then). ValueError for two tools of one
        name or an empty `session_id`.
        """
        require_open(self._owner, "create an agent in")
        # The other parts are checked by Agent() before anything is made; `meta` goes to the
        # header, which no one else checks.
        check_meta(meta)
        sid = session_id if session_id is not None else str(uuid.uuid4())
        store = self._services.sessions
        self._reject_live(sid)
        if await store.exists(sid):
            raise SessionExistsError(
                f"session {sid!r} already exists in {store!r}; resume it with "
                "agents.resume(session_id, ...) or choose another id"
            )
        session = Session(sid, new_header(meta))
        return await self._publish(session, model, tools, options, approval)

    async def resume(
        self,
        session_id: str,
        *,
        model: Model,
        tools: Sequence[Tool] = (),
        options: AgentOptions | None = None,
        approval: Approval | None = None,
    ) -> AgentHandle:
        """Resume a stored session. A turn a crash left open is closed `interrupted` first
        (rule L6). Raises SessionNotFoundError, or SessionLiveError if it is live. The
        session's "always" approval answers hold again under `approval` (rule A17).

        Like `create` otherwise: the agent is owned by this registry's owner and live when
        this returns. Always a checkpoint. Also raises FiberClosedError if the owner is not
        open or closes meanwhile, CorruptSessionError for a damaged stored session.
        """
        require_open(self._owner, "resume an agent in")
        # Before the store restores (and may repair) the session: Agent() checks too late.
        check_parts(model=model, tools=tools, options=options, approval=approval)
        self._reject_live(session_id)
        stored = await self._services.sessions.restore(session_id)
        session = Session(session_id, stored.header, stored.records)
        return await self._publish(session, model, tools, options, approval)

    def _reject_live(self, sid: str) -> None:
        if sid in self._services.sessions.live_ids:
            raise SessionLiveError(
                f"session {sid!r} is live; close its agent before creating or resuming it again"
            )

    async def _publish(
        self,
        session: Session,
        model: Model,
        tools: Sequence[Tool],
        options: AgentOptions | None,
        approval: Approval | None,
    ) -> AgentHandle:
        owner = self._owner
        require_open(owner, "create an agent in")
        services = self._services
        agent = Agent(
            session=session,
            model=model,
            tools=tools,
            options=options,
            events=services.events,
            approval=approval,
        )
        life = services.lifecycle_class(services, owner, agent)
        # The owner co-owns the teardown before any resource exists, so an owner close that
        # lands anywhere below also tears down what was prepared (rule L4).
        life.disposer_key = owner.push_async_callback(life.aclose)
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
