"""The lifecycle state machine: random programs of create, resume, send, cancel, release,
close by handle / by owner fiber / by runtime restart (alone, or all at once), closes with the
store's flush held open, creates and resumes racing their owner's close, plugin loads and
reloads, fiber disposers, and same-id races.

Listeners look at the registry and the store at every lifecycle event, every closer looks at
them the moment it returns, and after every rule (with everything settled) the registry, the
store's live set, the emitted lifecycle events and a small model of which sessions are live
and stored must agree. Each check is a named property of rules L1-L5 and F1-F3
(`_lifecycle_properties`); the fiber and plugin rules are in `_fiber_rules`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Hashable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar

import trio
from hypothesis import strategies as st
from hypothesis.stateful import initialize

from trio_agents import (
    AgentClosed,
    AgentConfig,
    AgentCreated,
    AgentHandle,
    AgentOptions,
    AgentRegistry,
    AgentStatus,
    ConfiguredAgents,
    DuplicateSessionError,
    Event,
    Fiber,
    Record,
    Runtime,
    Session,
    SessionClosed,
    SessionCreated,
    SessionNotFoundError,
    SessionStore,
    open_runtime,
)
from trio_agents.testing import ScriptedModel, TrioHost

from ._agent_harness import LISTENER_FAILURE, QuietListenerFailures
from ._held_store import HeldStore
from ._history import history_problems
from ._lifecycle_closing import IDS, OWNERS, PLUGIN_ID, ClosingRules, turn_started
from ._lifecycle_properties import (
    BUS_SKIPS_RAISING,
    CLOSE_EVENTS_ONCE,
    CLOSED_GONE,
    CLOSING_TURN_DURABLE,
    CONFIGURED_RESUMES,
    CREATE_OUTCOME,
    NOTHING_HALF_PUBLISHED,
    OWNERS_JOIN,
    PLUGIN_RELOAD_WAITS,
    PROPERTIES,
    RACE_LOSER_ROLLS_BACK,
    RACE_ONE_WINNER,
    RESUME_OUTCOME,
    SERVICES,
    TEARDOWN_ORDER,
    TEARDOWN_SHIELDED,
)
from ._machine import rule
from ._properties import ContractViolation, Property
from ._targets import RuntimeFactory, RuntimeSurface

__all__ = ["PROPERTIES", "LifecycleMachine", "RuntimeFactory"]

MINTED = "minted"  # the label of the plugin's agent configured without a session id
LIFECYCLE_EVENTS = (SessionCreated, AgentCreated, AgentClosed, SessionClosed)
CYCLE = ("SessionCreated", "AgentCreated", "AgentClosed", "SessionClosed")


def builtin_runtime_factory(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
    return open_runtime(store)


def _event_id(event: Event) -> str:
    return str(getattr(event, "agent_id", getattr(event, "session_id", "")))


# The options of the plugin's minted agent: a resume at a reload must keep them (F2).
CONFIGURED_OPTIONS = AgentOptions(max_steps=40, system_prompt="You are the configured agent.")


class LifecycleMachine(ClosingRules):
    """Subclass and set `factory` to check another runtime over the same store.

    What a subclass's rules and checks can use:

    host: the TrioHost the runtime runs in.
    store: the store every runtime of the example uses, across restarts (`_make_store()`).
    held: the store, when it is a `HeldStore` whose writes rules can hold open (else None).
    events: every event the runtimes emitted, in order.
    handles: the handles of the live agents the rules created or resumed, by id.
    owner_of: each live id's owner: `runtime`, a fiber's name, `plugin` or `probe`.
    stored: the ids whose session has at least one record.
    ever_live: every id that was ever live.
    sessions_of: the session of each id's latest life.
    fibers: the open child fibers `f1` and `f2`, by name.
    models: the ScriptedModel each live id's agent was made with, by id.
    plugin: the ConfiguredAgents plugin, which owns the agent `plugin-agent`.
    rt: the runtime under test (None while it is restarted).
    noted: violations seen inside trio tasks (listeners, closers), raised by the next rule.
    probe: the probe plugin of the plugin rules (F2), which attaches one of everything.
    probe_loaded: whether the probe plugin is loaded now.

    stats: counts examples and checked steps; give a subclass its own dict to count one run.
    histories: fingerprints of the distinct event histories produced.
    """

    factory: ClassVar[RuntimeFactory] = staticmethod(builtin_runtime_factory)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()

    def __init__(self) -> None:
        super().__init__(self._new_host())
        self.store = self._make_store()
        self.held = self.store if isinstance(self.store, HeldStore) else None
        self.events: list[Event] = []
        self.handles: dict[str, AgentHandle] = {}
        self.owner_of: dict[str, str] = {}  # live id -> "runtime" | fiber name | "plugin"
        self.stored: set[str] = set()  # ids whose session has at least one record
        self.ever_live: set[str] = set()
        self.sessions_of: dict[str, Session] = {}
        self.fibers: dict[str, Fiber] = {}
        plugin_model = ScriptedModel(hold_all=True)
        # The model each live id's agent was made with (the machine made them all).
        self.models: dict[str, ScriptedModel] = {PLUGIN_ID: plugin_model}
        # A second agent of the plugin, configured without a session id: the plugin mints
        # one at its first apply and must resume that session at every later one.
        self.minted_model = ScriptedModel(hold_all=True)
        self.minted_id: str | None = None
        self.plugin = ConfiguredAgents(
            AgentConfig("plugin", plugin_model, session_id=PLUGIN_ID),
            AgentConfig(MINTED, self.minted_model, options=CONFIGURED_OPTIONS),
        )
        self.rt: RuntimeSurface | None = None
        self.noted: list[ContractViolation] = []
        self._open_rt: RuntimeSurface | None = None  # also while it closes
        self._bus: object = None
        self._checked: dict[str, int] = {}  # closed id -> durable records already checked
        self._after_raising: list[Event] = []  # what a listener after a raising one got
        self._quiet = QuietListenerFailures()
        logging.getLogger("trio_agents.events").addFilter(self._quiet)
        self._init_fiber_rules()

    def _make_store(self) -> SessionStore:
        """The store of the example; a subclass checks another store by overriding it."""
        return HeldStore()

    @staticmethod
    def _new_host() -> TrioHost:
        """The example's host: the autojump clock. A subclass whose store works in threads
        (a database) gives a real clock instead, or the clock would leap while one runs."""
        return TrioHost()

    # -- runtime service ----------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """Open the runtime, its fibers `f1` and `f2`, and load the plugin."""
        self._start_runtime()

    def _start_runtime(self) -> None:
        self.rt = self._start_service(self._runtime)
        self.settle()

    @asynccontextmanager
    async def _runtime(self) -> AsyncGenerator[RuntimeSurface, None]:
        async with type(self).factory(self.store) as rt:
            self._open_rt = rt
            self._bus = rt.events
            rt.events.connect(self._observe)
            # A buggy listener of the user's, then one connected after it (A11).
            rt.events.connect(self._raise_at_lifecycle_events)
            rt.events.connect(self._after_raising.append)
            for name in ("f1", "f2"):
                self.fibers[name] = await rt.open_child(name)
            await rt.load(self.plugin)
            self.owner_of[PLUGIN_ID] = "plugin"
            self.ever_live.add(PLUGIN_ID)
            self._note_minted("loading the plugin into a new runtime")
            yield rt
        # The moment the runtime's block has closed: every agent is closed, durably.
        self.closed_now(set(self.owner_of), "closing the runtime", CLOSED_GONE, rt)

    def _history(self) -> Hashable:
        return tuple((type(e).__name__, _event_id(e)) for e in self.events)

    def _after_close(self) -> None:
        logging.getLogger("trio_agents.events").removeFilter(self._quiet)

    @staticmethod
    def _raise_at_lifecycle_events(event: Event) -> None:
        if isinstance(event, LIFECYCLE_EVENTS):
            raise RuntimeError(f"{LISTENER_FAILURE} at {type(event).__name__}")

    def _check_closing(self) -> None:
        self._stop_runtime()
        self.check()

    def _stop_runtime(self) -> None:
        try:
            self._stop_service()
        finally:
            self.owner_of.clear()
            self.handles.clear()
            self.fibers.clear()
            self.rt = None
            self._runtime_stopped()
        self.raise_noted()

    async def _stop_runtime_and_wait(self) -> None:
        """Close the runtime (leave its block) and wait until it has closed. Always a
        checkpoint."""
        assert self._stop is not None
        self._stop.set()
        await self._stopped.wait()

    # -- what listeners and closers see --------------------------------------------------

    def _observe(self, event: Event) -> None:
        self.events.append(event)
        if not isinstance(event, LIFECYCLE_EVENTS):
            return
        sid = _event_id(event)
        rt = self._open_rt
        assert rt is not None
        name = type(event).__name__
        in_store = self.store.get(sid)
        agent = rt.agents.get(sid)
        if isinstance(event, SessionCreated):
            self.note(
                NOTHING_HALF_PUBLISHED,
                in_store is not None,
                f"a listener of SessionCreated({sid!r}) found the session not live in the store",
            )
        elif isinstance(event, AgentCreated):
            earlier = [type(e).__name__ for e in self.events[:-1] if _event_id(e) == sid]
            self.note(
                NOTHING_HALF_PUBLISHED,
                agent is not None
                and in_store is not None
                and agent.session is in_store
                and earlier[-1:] == ["SessionCreated"],
                f"a listener of AgentCreated({sid!r}) saw registry.get() = {agent!r}, the "
                f"store's live session {in_store!r}, after {earlier[-1:] or 'no'} event",
            )
            if agent is not None:
                self.sessions_of[sid] = agent.session
        elif isinstance(event, AgentClosed):
            self.note(
                TEARDOWN_ORDER,
                agent is None and in_store is not None,
                f"a listener of {name}({sid!r}) saw registry.get() = {agent!r} and the "
                f"session {'live' if in_store is not None else 'detached'} in the store "
                "(unregister comes before the detach)",
            )
        else:
            self.note(
                TEARDOWN_ORDER,
                agent is None and in_store is None,
                f"a listener of {name}({sid!r}) saw registry.get() = {agent!r} and the "
                f"session {'still live' if in_store is not None else 'detached'} in the store",
            )

    def closed_now(
        self, sids: Iterable[str], who: str, prop: Property, rt: RuntimeSurface | None = None
    ) -> None:
        """Note what must hold the moment `who` (a closer of `sids`) returns: each agent is
        unregistered, its session detached, both announced, and its records durable."""
        rt = rt if rt is not None else self._open_rt
        assert rt is not None
        listed = {a.id for a in rt.agents.list()}
        live = self.store.live_ids
        for sid in sorted(sids):
            found = rt.agents.get(sid)
            if not (found is None and sid not in listed and sid not in live):
                self.note(
                    prop,
                    False,
                    f"when {who} returned, {sid!r} was: registry.get() = {found!r}, "
                    f"{'in' if sid in listed else 'not in'} registry.list(), "
                    f"{'in' if sid in live else 'not in'} the store's live set",
                )
            kinds = self._kinds(sid)
            # Whether a closer returned too early (L2, L1) or the events are wrong (L5).
            events_prop = prop if prop in (OWNERS_JOIN, TEARDOWN_SHIELDED) else CLOSE_EVENTS_ONCE
            if kinds.count("AgentClosed") != kinds.count("AgentCreated") or kinds.count(
                "SessionClosed"
            ) != kinds.count("SessionCreated"):
                self.note(
                    events_prop,
                    False,
                    f"when {who} returned, the lifecycle events of {sid!r} were {kinds}",
                )
            self.durable_now(sid, who)

    def durable_now(self, sid: str, who: str) -> None:
        """Note that `sid`'s records are all durable now, if the store lets us see that."""
        session = self.sessions_of.get(sid)
        if self.held is None or session is None:
            return
        durable = self.held.durable(sid)
        records = session.records
        last = durable[-1].type if durable else "nothing"
        self.note(
            CLOSING_TURN_DURABLE,
            len(durable) == len(records) and (last == "turn/end" or not turn_started(records)),
            lambda: (
                f"when {who} returned, {len(durable)} of the {len(records)} records of "
                f"{sid!r} were durable in the store, the last durable one {last}"
            ),
        )

    def _kinds(self, sid: str) -> list[str]:
        return [
            type(e).__name__
            for e in self.events
            if isinstance(e, LIFECYCLE_EVENTS) and _event_id(e) == sid
        ]

    # -- rules ---------------------------------------------------------------------------

    @rule(sid=st.sampled_from(IDS), owner=st.sampled_from(OWNERS))
    def create(self, sid: str, owner: str) -> None:
        """Create `sid` under `owner`: it must succeed exactly when the id is neither live
        nor stored."""
        expected = "ok" if sid not in self.owner_of and sid not in self.stored else "duplicate"
        live = sid in self.owner_of
        outcome = self.call(self._attach, "create", sid, owner)
        CREATE_OUTCOME.check(
            outcome == expected,
            f"create({sid!r}) gave {outcome} while the id was "
            f"{'live' if live else 'stored' if sid in self.stored else 'neither live nor stored'}",
        )
        if outcome == "ok":
            self._check_services_used(sid, owner)
        self.settle()

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)), owner=st.sampled_from(OWNERS))
    def resume(self, sid: str, owner: str) -> None:
        """Resume `sid` under `owner`: refused while live, not found unless stored."""
        if sid in self.owner_of:
            expected, state = "duplicate", "live"
        elif sid in self.stored:
            expected, state = "ok", "stored and not live"
        else:
            expected, state = "not found", "not stored"
        outcome = self.call(self._attach, "resume", sid, owner)
        RESUME_OUTCOME.check(
            outcome == expected, f"resume({sid!r}) gave {outcome} while the id was {state}"
        )
        if outcome == "ok":
            self._check_services_used(sid, owner)
        self.settle()

    def _registry(self, owner: str) -> AgentRegistry:
        assert self.rt is not None
        if owner == "runtime":
            return self.rt.agents
        self._check_registry_owner(owner, self.fibers[owner])
        return self.fibers[owner].agents

    def _check_registry_owner(self, name: str, fiber: Fiber) -> None:
        registry_owner = getattr(fiber.agents, "owner", fiber)
        SERVICES.check(
            registry_owner is fiber,
            lambda: f"{name}.agents gives agents to {registry_owner!r}, not to the fiber {name}",
        )

    async def _attach(self, verb: str, sid: str, owner: str) -> str:
        registry = self._registry(owner)
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
        self._adopt(sid, owner, handle, model)
        return "ok"

    def _adopt(self, sid: str, owner: str, handle: AgentHandle, model: ScriptedModel) -> None:
        self.handles[sid] = handle
        self.models[sid] = model
        self.owner_of[sid] = owner
        self.sessions_of[sid] = handle.agent.session
        self.ever_live.add(sid)

    def _check_services_used(self, sid: str, owner: str) -> None:
        """The agent just created through `owner`'s registry is the one the runtime's
        registry finds, and that registry is its owner's (rule F3)."""
        assert self.rt is not None
        agent = self.handles[sid].agent
        SERVICES.check(
            self.rt.agents.get(sid) is agent and agent in self.rt.agents.list(),
            f"the agent {sid!r} created through {owner}.agents is not the one rt.agents finds",
        )

    @rule(
        sid=st.sampled_from((*IDS, PLUGIN_ID)),
        verbs=st.sampled_from((("create", "create"), ("create", "resume"), ("resume", "resume"))),
        owners=st.tuples(st.sampled_from(OWNERS), st.sampled_from(OWNERS)),
    )
    def create_race(self, sid: str, verbs: tuple[str, str], owners: tuple[str, str]) -> None:
        """Two creates or resumes of one id in the same scheduler batch: exactly one may
        win, and only if one of them could."""
        live, stored = sid in self.owner_of, sid in self.stored
        can_win = not live and (
            ("create" in verbs and not stored) or ("resume" in verbs and stored)
        )
        before = self.rt.agents.get(sid) if self.rt is not None else None
        outcomes = self.call(self._race, sid, verbs, owners)
        RACE_ONE_WINNER.check(
            outcomes.count("ok") == (1 if can_win else 0),
            f"{verbs[0]} and {verbs[1]} of {sid!r} racing gave {outcomes} while the id was "
            f"{'live' if live else 'stored' if stored else 'free'}",
        )
        assert self.rt is not None
        registered = self.rt.agents.get(sid)
        winner = self.handles[sid].agent if "ok" in outcomes else before
        RACE_LOSER_ROLLS_BACK.check(
            registered is winner
            and (winner is None or self.store.get(sid) is winner.session)
            and (winner is None or winner.status is not AgentStatus.CLOSED),
            f"after the race for {sid!r} ({outcomes}) the registry holds {registered!r}, the "
            f"store the session {self.store.get(sid)!r}; the winner is {winner!r}",
        )
        self.settle()

    async def _race(self, sid: str, verbs: tuple[str, str], owners: tuple[str, str]) -> list[str]:
        results: list[str] = []

        async def one(verb: str, owner: str) -> None:
            results.append(await self._attach(verb, sid, owner))

        async with trio.open_nursery() as nursery:
            for verb, owner in zip(verbs, owners, strict=True):
                nursery.start_soon(one, verb, owner)
        return results

    def _live_agent(self, sid: str) -> Any:
        assert self.rt is not None
        return self.rt.agents.get(self.near(sid, self.owner_of))

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)))
    def send(self, sid: str) -> None:
        """Send a prompt to the live agent `sid` (or the next live one: `near`)."""
        agent = self._live_agent(sid)
        if agent is None:
            return
        self.host.run_sync(agent.send, "hello")
        self.stored.add(agent.id)  # turn/start is its first record, at the latest
        self.settle()

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)))
    def release(self, sid: str) -> None:
        """Let the held model call of the running agent `sid` (or `near` it) go on."""
        agent = self._live_agent(sid)
        if agent is None or agent.status is not AgentStatus.RUNNING:
            return
        model = self.models[agent.id]
        if model.held:
            self.host.run_sync(model.release)
            self.settle()

    @rule(sid=st.sampled_from((*IDS, PLUGIN_ID)))
    def cancel(self, sid: str) -> None:
        """Cancel the live agent `sid` (or the next live one: `near`)."""
        agent = self._live_agent(sid)
        if agent is not None:
            self.host.run_sync(agent.cancel)
            self.settle()

    @rule()
    def reload_plugin(self) -> None:
        """Reload the plugin: its agent closes and resumes the same session."""
        assert self.rt is not None
        try:
            self.call(self.rt.reload, self.plugin)
        except ContractViolation:
            raise
        except Exception as exc:
            PLUGIN_RELOAD_WAITS.fail(
                f"reloading the plugin raised {exc!r}: was it applied again while its agent "
                f"{PLUGIN_ID!r} of the old fiber was still there?"
            )
        self.owner_of[PLUGIN_ID] = "plugin"
        self._note_minted("reloading the plugin")
        self.settle()

    def _note_minted(self, after: str) -> None:
        """The plugin's agent configured without an id: live under the id minted at the
        first apply (F2: applying again resumes the same sessions)."""
        sid = self.plugin.session_id(MINTED)
        agent = self.plugin.agent(MINTED)
        first = self.minted_id
        CONFIGURED_RESUMES.check(
            sid is not None and (first is None or sid == first),
            lambda: (
                f"after {after}, the plugin's agent {MINTED!r}, configured without a session "
                f"id, has the session {sid!r}; "
                + (f"its first apply minted {first!r}" if first else "it has none")
            ),
        )
        assert sid is not None
        CONFIGURED_RESUMES.check(
            agent is not None and agent.id == sid,
            lambda: (
                f"after {after}, the plugin's agent({MINTED!r}) is "
                f"{'None' if agent is None else repr(agent.id)}, not the live agent {sid!r}"
            ),
        )
        options = agent.options if agent is not None else None
        CONFIGURED_RESUMES.check(
            options == CONFIGURED_OPTIONS,
            lambda: (
                f"after {after}, the plugin's agent {MINTED!r} has the options {options!r}, "
                f"not those of its config, {CONFIGURED_OPTIONS!r}"
            ),
        )
        self.minted_id = sid
        self.owner_of[sid] = "plugin"
        self.ever_live.add(sid)
        self.models[sid] = self.minted_model

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
        cycles; every closed session ends, durably, with a valid history; the services are
        the same objects."""
        self.raise_noted()
        if self._after_raising != self.events:
            missed = [e for e in self.events if e not in self._after_raising]
            BUS_SKIPS_RAISING.fail(
                f"a listener connected after one that raised received "
                f"{len(self._after_raising)} of {len(self.events)} events; it missed "
                f"{missed[:3]}"
            )
        live = set(self.owner_of)
        store_live = set(self.store.live_ids)
        registry = {a.id for a in self.rt.agents.list()} if self.rt is not None else set[str]()
        CLOSED_GONE.check(
            (registry | store_live) <= live,
            lambda: (
                f"closed ids are still there: registry.list() has "
                f"{sorted(registry - live)}, the store's live set {sorted(store_live - live)}"
            ),
        )
        NOTHING_HALF_PUBLISHED.check(
            live <= registry & store_live,
            lambda: (
                f"live agents {sorted(live - registry)} are not in registry.list(), "
                f"{sorted(live - store_live)} not in the store's live set"
            ),
        )
        if self.rt is not None:
            self._check_live_agents(self.rt, live)
            self._check_services(self.rt)
        self._check_events(live)
        self._check_closed_sessions(live)

    def _check_live_agents(self, rt: RuntimeSurface, live: set[str]) -> None:
        for sid in live:
            agent = rt.agents.get(sid)
            assert agent is not None
            handle = self.handles.get(sid)
            ours = self.store.get(sid) is agent.session
            returned = handle is None or handle.agent is agent
            if agent.status is AgentStatus.CLOSED or not ours or not returned:
                NOTHING_HALF_PUBLISHED.fail(
                    f"the registered agent {sid!r} is {agent.status.value}, its session "
                    f"{'is' if ours else 'is not'} the store's live one, and it "
                    f"{'is' if returned else 'is not'} the agent its create returned"
                )

    def _check_services(self, rt: RuntimeSurface) -> None:
        for name in ("agents", "sessions", "events", "shell"):
            if getattr(rt, name, None) is not getattr(rt, name, None):
                SERVICES.fail(f"rt.{name} is a new object each time it is read")
        SERVICES.check(
            rt.sessions is self.store and rt.events is self._bus,
            lambda: (
                f"rt.sessions is {rt.sessions!r}, not the store the runtime was opened "
                f"with ({self.store!r}), or rt.events is not the bus the events came on"
            ),
        )
        listed = [a.id for a in rt.agents.list()]
        for name, fiber in self.fibers.items():
            self._check_registry_owner(name, fiber)
            if fiber.agents is not fiber.agents or [a.id for a in fiber.agents.list()] != listed:
                SERVICES.fail(
                    f"{name}.agents is a new object each time, or lists other agents than "
                    f"rt.agents ({listed})"
                )

    def _check_events(self, live: set[str]) -> None:
        for sid in self.ever_live:
            kinds = self._kinds(sid)
            lives = len(kinds) // 4 + (1 if len(kinds) % 4 else 0)
            expected = list(CYCLE) * (lives - 1) + list(CYCLE[:2] if sid in live else CYCLE)
            if lives == 0:
                expected = []
            if kinds != expected:
                CLOSE_EVENTS_ONCE.fail(
                    f"the lifecycle events of {sid!r} were {kinds}, "
                    f"while it is {'live' if sid in live else 'closed'}"
                )

    def _check_closed_sessions(self, live: set[str]) -> None:
        for sid in self.stored - live:
            if self.held is not None:
                records: Sequence[Record] = self.held.durable(sid)
                if self._checked.get(sid) == len(records):
                    continue  # checked as it is: nothing was appended since
                self._checked[sid] = len(records)
            else:
                records = self.host.call(self.store.load, sid).records
            if turn_started(records) and records[-1].type != "turn/end":
                CLOSING_TURN_DURABLE.fail(
                    f"the closed session {sid!r} ends, as stored, with {records[-1].type}, "
                    "not with its closing turn/end"
                )
            problems = history_problems(records, allow_open_turn=False)
            if problems:
                CLOSING_TURN_DURABLE.fail(f"the stored history of closed {sid!r}: {problems}")
