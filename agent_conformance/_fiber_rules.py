"""The lifecycle machine's fiber and plugin rules (F1, F2), and what its rules share: checks
made inside trio tasks are noted and raised by the rule, so a violation a listener or a
closer sees is reported as itself.

`close_fiber_with_disposers` stacks drawn async and sync disposers (some raising), child
fibers and a lingering task on a fiber, and closes it with a plain and a cancelled closer;
the probe plugin registers a callback, a slow disposer, a task and an agent through its fiber,
and records what the previous apply's fiber looked like when it is applied again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import trio
from hypothesis import strategies as st

from trio_agents import AgentHandle, AgentStatus, AlreadyLoadedError, Fiber
from trio_agents.testing import ScriptedModel

from ._lifecycle_properties import (
    FIBER_CLOSE_SHIELDED,
    FIBER_CLOSES_AGENTS,
    PLUGIN_FAILED_APPLY,
    PLUGIN_FIBER_OWNS,
    PLUGIN_LOAD_REFUSED,
    PLUGIN_RELOAD_WAITS,
    UNWIND_ERRORS,
    UNWIND_ORDER,
)
from ._machine import ConformanceMachine, rule
from ._properties import ContractViolation, Property

if TYPE_CHECKING:
    from trio_agents import Session, SessionStore

    from ._targets import RuntimeSurface

__all__ = ["DisposerError", "FiberRules"]

DISPOSERS = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=4)
"""Each disposer: (async?, raises?)."""


class DisposerError(Exception):
    """What a drawn disposer raises: its index in push order."""


class _ApplyFailed(Exception):
    """What the probe plugin's apply raises when told to fail."""


class _Probe:
    """A plugin that attaches one of everything to its fiber, and logs it going away."""

    name = "probe"

    def __init__(self, machine: FiberRules) -> None:
        self.machine = machine
        self.fail = False
        self.fiber: Fiber | None = None
        self.log: list[str] = []
        self.handle: AgentHandle | None = None
        self.applies = 0
        # What the previous apply's fiber looked like when apply ran again.
        self.seen_previous: tuple[str, list[str]] | None = None

    async def apply(self, fiber: Fiber) -> None:
        if self.fiber is not None:
            self.seen_previous = (self.fiber.state, list(self.log))
        self.fiber, self.log, self.handle = fiber, [], None
        self.applies += 1
        log = self.log
        fiber.callback(log.append, "callback")
        fiber.push_async_callback(self._slow_dispose, log)
        await fiber.nursery.start(self._linger, log)
        sid = f"probe-{self.applies}"
        self.handle = await fiber.agents.create(model=ScriptedModel(), session_id=sid)
        self.machine.adopt_probe(sid, self.handle)
        if self.fail:
            raise _ApplyFailed(f"the probe's apply number {self.applies} failed, as told")

    async def _slow_dispose(self, log: list[str]) -> None:
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        log.append("disposed")

    async def _linger(self, log: list[str], task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            log.append("task cancelled")

    def gone(self) -> str | None:
        """What of the last apply is still there, or None if everything went away."""
        missing = [w for w in ("callback", "disposed", "task cancelled") if w not in self.log]
        agent = self.handle.agent if self.handle is not None else None
        if agent is not None and agent.status is not AgentStatus.CLOSED:
            missing.append(f"agent {agent.id!r} ({agent.status.value})")
        state = self.fiber.state if self.fiber is not None else "closed"
        if state != "closed":
            missing.append(f"the fiber ({state})")
        return ", ".join(missing) or None


class FiberRules(ConformanceMachine):
    """The fiber and plugin rules of `LifecycleMachine`, and the helpers its rules share.

    probe: the probe plugin of the plugin rules (F2), which attaches one of everything.
    probe_loaded: whether the probe plugin is loaded now.
    """

    rt: RuntimeSurface | None
    store: SessionStore
    fibers: dict[str, Fiber]
    owner_of: dict[str, str]
    handles: dict[str, AgentHandle]
    ever_live: set[str]
    sessions_of: dict[str, Session]
    noted: list[ContractViolation]

    def _init_fiber_rules(self) -> None:
        self.probe = _Probe(self)
        self.probe_loaded = False

    # -- what the rules share ------------------------------------------------------------

    def note(self, prop: Property, holds: bool, happened: str | Callable[[], str]) -> None:
        """A check made inside a trio task (a listener, a closer): a violation is kept and
        raised by the rule, so it is reported as itself, not as a crash of the run."""
        try:
            prop.check(holds, happened)
        except ContractViolation as violation:
            self.noted.append(violation)

    def raise_noted(self) -> None:
        """Raise the first violation a trio task noted, if any."""
        if self.noted:
            raise self.noted[0]

    def call(self, afn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """`host.call`, then raise what was noted meanwhile."""
        try:
            return self.host.call(afn, *args)
        finally:
            self.raise_noted()

    def settle(self) -> None:
        """`host.settle`, then raise what was noted meanwhile."""
        self.host.settle()
        self.raise_noted()

    def closed_now(
        self, sids: Iterable[str], who: str, prop: Property, rt: RuntimeSurface | None = None
    ) -> None:
        """Note what must hold the moment `who`, a closer of `sids`, returns."""
        raise NotImplementedError

    def _forget_owned_by(self, owner: str) -> None:
        """Forget the live ids `owner` owned (it has closed them)."""
        for sid in [s for s, o in self.owner_of.items() if o == owner]:
            del self.owner_of[sid]
            self.handles.pop(sid, None)

    async def _reopen_fiber(self, owner: str) -> None:
        """Open the child fiber `owner` again."""
        assert self.rt is not None
        self.fibers[owner] = await self.rt.open_child(owner)

    def adopt_probe(self, sid: str, handle: AgentHandle) -> None:
        """The probe plugin created `sid` in its fiber."""
        self.owner_of[sid] = "probe"
        self.handles[sid] = handle
        self.ever_live.add(sid)
        self.sessions_of[sid] = handle.agent.session

    def _runtime_stopped(self) -> None:
        """The runtime closed: so did the probe's fiber, with everything it held."""
        if self.probe_loaded:
            self.probe_loaded = False
            gone = self.probe.gone()
            PLUGIN_FIBER_OWNS.check(
                gone is None, f"when the runtime closed, the probe plugin's {gone} outlived it"
            )

    # -- F1: a fiber's unwinding ----------------------------------------------------------

    @rule(
        owner=st.sampled_from(("f1", "f2")),
        disposers=DISPOSERS,
        children=st.integers(0, 2),
        cancelled=st.booleans(),
    )
    def close_fiber_with_disposers(
        self, owner: str, disposers: Sequence[tuple[bool, bool]], children: int, cancelled: bool
    ) -> None:
        """Stack disposers (async or sync, some raising), child fibers and a task on the
        fiber `owner`, close it (also from a cancelled caller), and open it again."""
        log: list[str] = []
        fiber = self.fibers[owner]
        self.call(self._stack, fiber, log, disposers, children)
        expected = [f"child {i}" for i in reversed(range(children))]
        for index, (is_async, _) in reversed(list(enumerate(disposers))):
            expected += [f"start {index}", f"end {index}"] if is_async else [f"sync {index}"]
        expected.append("task cancelled")
        raising = {i for i, (_, raises) in enumerate(disposers) if raises}
        owned = {s for s, o in self.owner_of.items() if o == owner}
        outcomes = self.call(self._close_twice, fiber, log, cancelled)
        self.closed_now(owned, f"fiber {owner}'s aclose()", FIBER_CLOSES_AGENTS)
        UNWIND_ORDER.check(
            log == expected,
            lambda: (
                f"closing {owner} ran {log}; pushed in order (async?, raises?) "
                f"{list(disposers)} after {children} child fiber(s) opened midway, it should run "
                f"{expected}"
            ),
        )
        for who, (seen, error) in outcomes.items():
            ours = _disposer_errors(error)
            if not (
                ours == raising
                and (not raising or isinstance(error, BaseExceptionGroup))
                and seen == len(expected)
            ):
                UNWIND_ERRORS.fail(
                    f"{who} raised {error!r} (disposer errors {sorted(ours)}) after {seen} "
                    f"of the {len(expected)} unwinding steps; disposers {sorted(raising)} raised"
                )
        self._forget_owned_by(owner)
        self.call(self._reopen_fiber, owner)
        self.settle()

    async def _stack(
        self, fiber: Fiber, log: list[str], disposers: Sequence[tuple[bool, bool]], children: int
    ) -> None:
        half = len(disposers) // 2
        for index, (is_async, raises) in enumerate(disposers):
            if index == half:  # children opened midway still close before every disposer
                for i in range(children):
                    child = await fiber.open_child(f"{fiber.name}.{i}")
                    child.callback(log.append, f"child {i}")
            if is_async:
                fiber.push_async_callback(_async_disposer, log, index, raises)
            else:
                fiber.callback(_sync_disposer, log, index, raises)
        await fiber.nursery.start(_linger, log)

    async def _close_twice(
        self, fiber: Fiber, log: list[str], cancelled: bool
    ) -> dict[str, tuple[int, BaseException | None]]:
        outcomes: dict[str, tuple[int, BaseException | None]] = {}

        async def close(who: str, cancel: bool) -> None:
            error: BaseException | None = None
            with trio.CancelScope() as scope:
                if cancel:
                    scope.cancel()
                try:
                    await fiber.aclose()
                except Exception as exc:
                    error = exc
            outcomes[who] = (len(log), error)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(close, "aclose()", False)
            if cancelled:
                nursery.start_soon(close, "a cancelled caller's aclose()", True)
        steps = len(log)
        for who, (seen, _) in outcomes.items():
            FIBER_CLOSE_SHIELDED.check(
                seen == steps,
                f"{who} of fiber {fiber.name!r} returned after {seen} of the {steps} "
                "unwinding steps",
            )
        await close("a later aclose()", False)  # memoized: the same unwinding, the same errors
        return outcomes

    # -- F2: plugins ----------------------------------------------------------------------

    @rule(fail=st.booleans())
    def load_probe(self, fail: bool) -> None:
        """Load the probe plugin (whose apply may raise); loading it while loaded is
        refused and changes nothing."""
        assert self.rt is not None
        probe = self.probe
        if self.probe_loaded:
            fiber = probe.fiber
            error = self.call(self._load, probe)
            PLUGIN_LOAD_REFUSED.check(
                isinstance(error, AlreadyLoadedError) and probe.fiber is fiber,
                f"loading the loaded probe plugin gave {error!r} and "
                f"{'kept' if probe.fiber is fiber else 'applied it again in a new'} fiber",
            )
            PLUGIN_LOAD_REFUSED.check(
                fiber is not None and fiber.state == "open",
                f"after the refused load, the probe's fiber is {fiber.state if fiber else '?'}",
            )
            self.settle()
            return
        probe.fail = fail
        error = self.call(self._load, probe)
        if fail:
            gone = probe.gone()
            PLUGIN_FAILED_APPLY.check(
                isinstance(error, _ApplyFailed) and gone is None,
                f"loading a plugin whose apply raised gave {error!r}, and its {gone} "
                "outlived the failed load",
            )
            self._forget_owned_by("probe")
        else:
            PLUGIN_FAILED_APPLY.check(error is None, f"loading the probe plugin raised {error!r}")
            self.probe_loaded = True
        self.settle()

    async def _load(self, probe: _Probe) -> BaseException | None:
        assert self.rt is not None
        try:
            await self.rt.load(probe)
        except Exception as exc:
            return exc
        return None

    @rule()
    def reload_probe(self) -> None:
        """Reload the probe plugin: it must be applied again only once the old fiber has
        closed completely, and everything the old apply attached is gone."""
        assert self.rt is not None
        probe = self.probe
        was_loaded = self.probe_loaded
        old, old_log, old_handle = probe.fiber, probe.log, probe.handle
        probe.fail = False
        probe.seen_previous = None
        try:
            self.call(self.rt.reload, probe)
        except ContractViolation:
            raise
        except Exception as exc:
            PLUGIN_RELOAD_WAITS.fail(f"reloading the probe plugin raised {exc!r}")
        if was_loaded:
            seen = probe.seen_previous
            PLUGIN_RELOAD_WAITS.check(
                seen is not None
                and seen[0] == "closed"
                and {"callback", "disposed", "task cancelled"} <= set(seen[1]),
                f"the probe plugin was applied again while its old fiber was "
                f"{seen[0] if seen else '?'}, after only {seen[1] if seen else '?'} of it "
                "had gone away",
            )
            agent = old_handle.agent if old_handle is not None else None
            PLUGIN_FIBER_OWNS.check(
                (old is None or old.state == "closed")
                and {"callback", "disposed", "task cancelled"} <= set(old_log)
                and (agent is None or agent.status is AgentStatus.CLOSED),
                f"after the reload the old fiber is {old.state if old else '?'}, of what its "
                f"apply attached {old_log} went away, its agent is "
                f"{agent.status.value if agent else '?'}",
            )
            for sid in [s for s, o in self.owner_of.items() if o == "probe"]:
                if old_handle is not None and sid == old_handle.agent.id:
                    del self.owner_of[sid]
                    self.handles.pop(sid, None)
        self.probe_loaded = True
        self.settle()

    @rule()
    def close_probe(self) -> None:
        """Close the probe plugin's fiber: everything its apply attached goes away."""
        fiber = self.probe.fiber
        if not self.probe_loaded or fiber is None:
            return
        self.call(fiber.aclose)
        gone = self.probe.gone()
        PLUGIN_FIBER_OWNS.check(
            gone is None, f"when the probe plugin's fiber closed, its {gone} outlived it"
        )
        self._forget_owned_by("probe")
        self.probe_loaded = False
        self.settle()


async def _async_disposer(log: list[str], index: int, raises: bool) -> None:
    log.append(f"start {index}")
    for _ in range(3):  # a disposer run alongside another would interleave its steps here
        await trio.lowlevel.checkpoint()
    log.append(f"end {index}")
    if raises:
        raise DisposerError(index)


def _sync_disposer(log: list[str], index: int, raises: bool) -> None:
    log.append(f"sync {index}")
    if raises:
        raise DisposerError(index)


async def _linger(log: list[str], task_status: trio.TaskStatus[None]) -> None:
    task_status.started()
    try:
        await trio.sleep_forever()
    finally:
        log.append("task cancelled")


def _disposer_errors(error: BaseException | None) -> set[int]:
    """The indices of the DisposerErrors in `error`, however deeply grouped."""
    if isinstance(error, DisposerError):
        return {int(error.args[0])}
    if isinstance(error, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", error)
        found: set[int] = set()
        for inner in group.exceptions:
            found |= _disposer_errors(inner)
        return found
    return set()
