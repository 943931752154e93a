"""The lifecycle state machine: random programs of create, resume, send, cancel, release,
close by handle / by owner fiber / by runtime restart, plugin reload, and same-id races.

After every rule (with everything settled) the registry, the store's live set, the emitted
lifecycle events and a small model of which sessions are live and stored must agree; no
agent may be half-published; and every closed session that started a turn must end, durably,
with a `turn/end` and a valid history.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Hashable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar

import trio
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, run_state_machine_as_test

from .._configured import AgentConfig, ConfiguredAgents
from .._errors import DuplicateSessionError, SessionNotFoundError
from .._events import AgentClosed, AgentCreated, Event, SessionClosed, SessionCreated
from .._fiber import Fiber
from .._registry import AgentHandle
from .._runtime import Runtime, open_runtime
from .._status import AgentStatus
from .._store import MemoryStore, SessionStore
from ._history import history_problems
from ._host import TrioHost
from ._machine import ConformanceMachine, machine_for, rule
from ._properties import Property
from ._scripted import ScriptedModel
from ._targets import RuntimeFactory, RuntimeSurface

__all__ = ["PROPERTIES", "LifecycleMachine", "RuntimeFactory", "check_lifecycle_conformance"]

PROPERTIES: tuple[Property, ...] = ()
"""The properties this machine checks, each of one rule of the contract."""

IDS = ("a", "b", "c")
OWNERS = ("runtime", "f1", "f2")
PLUGIN_ID = "plugin-agent"
LIFECYCLE_EVENTS = (SessionCreated, AgentCreated, AgentClosed, SessionClosed)


def builtin_runtime_factory(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
    return open_runtime(store)


def _event_id(event: Event) -> str:
    return str(getattr(event, "agent_id", getattr(event, "session_id", "")))


class LifecycleMachine(ConformanceMachine):
    """Subclass and set `factory` to check another runtime over the same store.

    What a subclass's rules and checks can use:

    host: the TrioHost the runtime runs in.
    store: the MemoryStore every runtime of the example uses, across restarts.
    events: every event the runtimes emitted, in order.
    handles: the handles of the live agents the rules created or resumed, by id.
    owner_of: each live id's owner: `runtime`, a fiber's name, or `plugin`.
    stored: the ids whose session has at least one record.
    ever_live: every id that was ever live.
    fibers: the open child fibers `f1` and `f2`, by name.
    models: the ScriptedModel each live id's agent was made with, by id.
    plugin: the ConfiguredAgents plugin, which owns the agent `plugin-agent`.
    rt: the runtime under test (None while it is restarted).

    stats: counts examples and checked steps; give a subclass its own dict to count one run.
    histories: fingerprints of the distinct event histories produced.
    """

    factory: ClassVar[RuntimeFactory] = staticmethod(builtin_runtime_factory)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()

    def __init__(self) -> None:
        super().__init__(TrioHost())
        self.store = MemoryStore()
        self.events: list[Event] = []
        self.handles: dict[str, AgentHandle] = {}
        self.owner_of: dict[str, str] = {}  # live id -> "runtime" | fiber name | "plugin"
        self.stored: set[str] = set()  # ids whose session has at least one record
        self.ever_live: set[str] = set()
        self.fibers: dict[str, Fiber] = {}
        plugin_model = ScriptedModel(hold_all=True)
        # The model each live id's agent was made with (the machine made them all).
        self.models: dict[str, ScriptedModel] = {PLUGIN_ID: plugin_model}
        self.plugin = ConfiguredAgents(AgentConfig("plugin", plugin_model, session_id=PLUGIN_ID))
        self.rt: RuntimeSurface | None = None

    # -- runtime service ----------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """Open the runtime, its fibers `f1` and `f2`, and load the plugin."""
        self._start_runtime()

    def _start_runtime(self) -> None:
        self.rt = self._start_service(self._runtime)
        self.host.settle()

    @asynccontextmanager
    async def _runtime(self) -> AsyncGenerator[RuntimeSurface, None]:
        async with type(self).factory(self.store) as rt:
            rt.events.connect(self.events.append)
            for name in ("f1", "f2"):
                self.fibers[name] = await rt.open_child(name)
            await rt.load(self.plugin)
            self.owner_of[PLUGIN_ID] = "plugin"
            self.ever_live.add(PLUGIN_ID)
            yield rt

    def _history(self) -> Hashable:
        return tuple((type(e).__name__, _event_id(e)) for e in self.events)

    def _check_closing(self) -> None:
        self._stop_runtime()
        self.check()

    def _stop_runtime(self) -> None:
        self._stop_service()
        self.owner_of.clear()
        self.handles.clear()
        self.fibers.clear()
        self.rt = None

    # -- rules ---------------------------------------------------------------------------

    @rule(sid=st.sampled_from(IDS), owner=st.sampled_from(OWNERS))
    def create(self, sid: str, owner: str) -> None:
        """Create `sid` under `owner`: it must succeed exactly when the id is neither live
        nor stored."""
        expected_ok = sid not in self.owner_of and sid not in self.stored
        outcome = self.host.call(self._attach, "create", sid, owner)
        assert outcome == ("ok" if expected_ok else "duplicate"), (
            f"create({sid!r}) gave {outcome}; live={sorted(self.owner_of)} "
            f"stored={sorted(self.stored)}"
        )
        self.host.settle()

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)), owner=st.sampled_from(OWNERS))
    def resume(self, sid: str, owner: str) -> None:
        """Resume `sid` under `owner`: refused while live, not found unless stored."""
        if sid in self.owner_of:
            expected = "duplicate"
        elif sid in self.stored:
            expected = "ok"
        else:
            expected = "not found"
        outcome = self.host.call(self._attach, "resume", sid, owner)
        assert outcome == expected, f"resume({sid!r}) gave {outcome}, expected {expected}"
        self.host.settle()

    async def _attach(self, verb: str, sid: str, owner: str) -> str:
        assert self.rt is not None
        registry = self.rt.agents if owner == "runtime" else self.fibers[owner].agents
        model = ScriptedModel(hold_all=True)
        try:
            if verb == "create":
                handle = await registry.create(model=model, session_id=sid)
            else:
                handle = await registry.resume(sid, model=model)
        except DuplicateSessionError:
            return "duplicate"
        except SessionNotFoundError:
            return "not found"
        self.handles[sid] = handle
        self.models[sid] = model
        self.owner_of[sid] = owner
        self.ever_live.add(sid)
        return "ok"

    @rule(sid=st.sampled_from(IDS))
    def create_race(self, sid: str) -> None:
        """Two creates of one id in the same scheduler batch: exactly one may win."""
        expected_winner = sid not in self.owner_of and sid not in self.stored
        outcomes = self.host.call(self._race, sid)
        winners = outcomes.count("ok")
        assert winners == (1 if expected_winner else 0), f"create race on {sid!r}: {outcomes}"
        self.host.settle()

    async def _race(self, sid: str) -> list[str]:
        results: list[str] = []

        async def one() -> None:
            results.append(await self._attach("create", sid, "runtime"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one)
            nursery.start_soon(one)
        return results

    def _live_agent(self, sid: str) -> Any:
        assert self.rt is not None
        return self.rt.agents.get(sid)

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)))
    def send(self, sid: str) -> None:
        """Send a prompt to the live agent `sid`, if there is one."""
        agent = self._live_agent(sid)
        if agent is None:
            return
        self.host.run_sync(agent.send, "hello")
        self.stored.add(sid)  # turn/start is its first record, at the latest
        self.host.settle()

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)))
    def release(self, sid: str) -> None:
        """Let the held model call of a running agent `sid` go on."""
        agent = self._live_agent(sid)
        if agent is None or agent.status is not AgentStatus.RUNNING:
            return
        model = self.models[sid]
        if model.held:
            self.host.run_sync(model.release)
            self.host.settle()

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)))
    def cancel(self, sid: str) -> None:
        """Cancel the live agent `sid`, if there is one."""
        agent = self._live_agent(sid)
        if agent is not None:
            self.host.run_sync(agent.cancel)
            self.host.settle()

    @rule(sid=st.sampled_from(IDS))
    def close_by_handle(self, sid: str) -> None:
        """Close `sid` through its handle, twice (the second call is the same teardown)."""
        handle = self.handles.pop(sid, None)
        if handle is None:
            return
        self.host.call(handle.aclose)
        self.host.call(handle.aclose)  # memoized: a second call is the same teardown
        del self.owner_of[sid]
        self.host.settle()

    @rule(sid=st.sampled_from(IDS))
    def close_by_handle_and_owner_at_once(self, sid: str) -> None:
        """The handle and the owning fiber close concurrently: one teardown, both return."""
        handle = self.handles.get(sid)
        owner = self.owner_of.get(sid)
        if handle is None or owner not in ("f1", "f2"):
            return
        assert owner is not None
        self.host.call(self._close_concurrently, sid, handle, owner)
        self._forget_owned_by(owner)
        self.host.call(self._reopen_fiber, owner)
        self.host.settle()

    async def _close_concurrently(self, sid: str, handle: AgentHandle, owner: str) -> None:
        returned: list[str] = []

        async def close(name: str, aclose: Callable[[], Any]) -> None:
            await aclose()
            # Whoever returns, returns after the one teardown completed (rule L2).
            assert self.rt is not None
            assert self.rt.agents.get(sid) is None, f"{name} returned before {sid} unregistered"
            assert sid not in self.store.live_ids, f"{name} returned before {sid} detached"
            returned.append(name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(close, "handle", handle.aclose)
            nursery.start_soon(close, "handle again", handle.aclose)
            nursery.start_soon(close, "owner fiber", self.fibers[owner].aclose)
        assert sorted(returned) == ["handle", "handle again", "owner fiber"]

    @rule(owner=st.sampled_from(("f1", "f2")))
    def close_fiber(self, owner: str) -> None:
        """Close the fiber `owner`, which closes its agents, then open it again."""
        self.host.call(self.fibers[owner].aclose)
        self._forget_owned_by(owner)
        self.host.call(self._reopen_fiber, owner)
        self.host.settle()

    async def _reopen_fiber(self, owner: str) -> None:
        assert self.rt is not None
        self.fibers[owner] = await self.rt.open_child(owner)

    def _forget_owned_by(self, owner: str) -> None:
        for sid in [s for s, o in self.owner_of.items() if o == owner]:
            del self.owner_of[sid]
            self.handles.pop(sid, None)

    @rule()
    def reload_plugin(self) -> None:
        """Reload the plugin: its agent closes and resumes the same session."""
        assert self.rt is not None
        self.host.call(self.rt.reload, self.plugin)
        self.owner_of[PLUGIN_ID] = "plugin"
        self.host.settle()

    @rule()
    def restart_runtime(self) -> None:
        """Close the runtime (every agent), check, and open a new one over the same store."""
        self._stop_runtime()
        self.check()
        self._start_runtime()

    # -- invariants ----------------------------------------------------------------------

    def _verify(self) -> None:
        """The registry, the store's live set and the model agree on what is live; every
        live agent is registered and not closed; each id's lifecycle events come in whole
        cycles; every closed session ends, durably, with a valid history."""
        live = set(self.owner_of)
        store_live = set(self.store.live_ids)
        registry = {a.id for a in self.rt.agents.list()} if self.rt is not None else set[str]()
        assert registry == store_live == live, (
            f"registry {sorted(registry)}, store live set {sorted(store_live)}, "
            f"expected live {sorted(live)}"
        )
        if self.rt is not None:
            for sid in live:
                agent = self.rt.agents.get(sid)
                assert agent is not None
                assert agent.status is not AgentStatus.CLOSED, f"{sid} is registered but closed"
                assert self.store.get(sid) is agent.session, f"{sid}: store holds another session"
        self._check_events(live)
        self._check_closed_sessions(live)

    def _check_events(self, live: set[str]) -> None:
        for sid in self.ever_live:
            kinds = [
                type(e).__name__
                for e in self.events
                if isinstance(e, LIFECYCLE_EVENTS) and _event_id(e) == sid
            ]
            cycle = ["SessionCreated", "AgentCreated", "AgentClosed", "SessionClosed"]
            lives = len(kinds) // 4 + (1 if len(kinds) % 4 else 0)
            expected = cycle * (lives - 1) + (cycle[:2] if sid in live else cycle)
            if lives == 0:
                expected = []
            assert kinds == expected, f"lifecycle events of {sid!r}: {kinds}"

    def _check_closed_sessions(self, live: set[str]) -> None:
        for sid in self.stored - live:
            records = self.host.call(self.store.load, sid).records
            if any(r.type == "turn/start" for r in records):
                assert records[-1].type == "turn/end", (
                    f"closed session {sid!r} ends with {records[-1].type}, not turn/end"
                )
            problems = history_problems(records, allow_open_turn=False)
            assert not problems, f"closed session {sid!r}: {problems}"


def check_lifecycle_conformance(
    factory: RuntimeFactory | None = None, *, settings: Settings | None = None
) -> None:
    """Run the lifecycle machine against `factory` (default: `open_runtime`).

    Raises the shrunk failing program's error on the first violation. Plain function, no
    pytest needed: call it from any test runner.
    """
    run_state_machine_as_test(machine_for(LifecycleMachine, factory), settings=settings)
