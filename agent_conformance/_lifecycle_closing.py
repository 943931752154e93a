"""The lifecycle machine's closing rules (L1, L2, L4): an agent closed through its handle,
its handle and its owner at once, its fiber, or the runtime; with every flush held open by
the store; and creates or resumes racing an owner's close. `LifecycleMachine` mixes them in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import trio
from hypothesis import strategies as st

from trio_agents import AgentHandle, AgentRegistry, AgentStatus
from trio_agents.testing import ScriptedModel

from ._fiber_rules import FiberRules
from ._held_store import HeldStore
from ._lifecycle_properties import (
    CLOSE_RACE,
    CLOSED_GONE,
    CLOSING_TURN_DURABLE,
    FIBER_CLOSES_AGENTS,
    OWNERS_JOIN,
    TEARDOWN_ORDER,
    TEARDOWN_SHIELDED,
)
from ._machine import rule
from ._targets import RuntimeSurface

__all__ = ["IDS", "OWNERS", "PLUGIN_ID", "ClosingRules", "turn_started"]

IDS = ("a", "b", "c")
OWNERS = ("runtime", "f1", "f2")
PLUGIN_ID = "plugin-agent"


def turn_started(records: Iterable[Any]) -> bool:
    """Whether `records` hold a `turn/start`."""
    return any(r.type == "turn/start" for r in records)


class ClosingRules(FiberRules):
    """The closing rules of `LifecycleMachine`; what they need of it is declared here.

    held: the store, when it is a `HeldStore` whose writes rules can hold open (else None).
    """

    held: HeldStore | None
    _open_rt: RuntimeSurface | None

    @staticmethod
    def near(sid: str, among: Iterable[str]) -> str:
        """`sid` if it is `among` the ids, else the next id after it (in sorted order, round
        about) that is: a rule aimed at an id that is not there acts on one that is, so
        few steps are wasted. `sid` itself if there is none."""
        present = sorted(among)
        if not present or sid in present:
            return sid
        return next((s for s in present if s > sid), present[0])

    def _registry(self, owner: str) -> AgentRegistry:
        raise NotImplementedError

    def _start_runtime(self) -> None:
        raise NotImplementedError

    def _stop_runtime(self) -> None:
        raise NotImplementedError

    async def _stop_runtime_and_wait(self) -> None:
        raise NotImplementedError

    @rule(sid=st.sampled_from(IDS), cancelled=st.booleans())
    def close_by_handle(self, sid: str, cancelled: bool) -> None:
        """Close `sid` (or the next id with a handle: `near`) through its handle, from a
        caller already cancelled or not, then again (the second call is the same
        teardown)."""
        sid = self.near(sid, self.handles)
        handle = self.handles.pop(sid, None)
        if handle is None:
            return
        self.call(self._close_handle, sid, handle, cancelled)
        del self.owner_of[sid]
        self.settle()

    async def _close_handle(self, sid: str, handle: AgentHandle, cancelled: bool) -> None:
        if cancelled:
            with trio.CancelScope() as scope:
                scope.cancel()
                await handle.aclose()
            self.closed_now({sid}, "a cancelled caller's aclose()", TEARDOWN_SHIELDED)
        else:
            await handle.aclose()
            self.closed_now({sid}, "aclose()", CLOSED_GONE)
        await handle.aclose()  # memoized: a second call is the same teardown
        self.closed_now({sid}, "a second aclose()", CLOSED_GONE)

    @rule(
        sid=st.sampled_from(IDS),
        runtime_too=st.booleans(),
        order=st.permutations(range(4)),
    )
    def close_by_handle_and_owner_at_once(
        self, sid: str, runtime_too: bool, order: Sequence[int]
    ) -> None:
        """The handle (twice), the owning fiber and the runtime close at once, in the drawn
        order: one teardown, and every closer returns only after it is complete."""
        sid = self.near(sid, self.handles)
        handle = self.handles.get(sid)
        owner = self.owner_of.get(sid)
        if handle is None or owner is None:
            return
        closers: list[tuple[str, set[str], Callable[[], Awaitable[object]]]] = [
            ("the handle's aclose()", {sid}, handle.aclose),
            ("the handle's second aclose()", {sid}, handle.aclose),
        ]
        if owner in self.fibers:
            owned = {s for s, o in self.owner_of.items() if o == owner}
            closers.append((f"fiber {owner}'s aclose()", owned, self.fibers[owner].aclose))
        if runtime_too or owner not in self.fibers:
            closers.append(("closing the runtime", set(self.owner_of), self._stop_runtime_and_wait))
        ordered = [closers[i] for i in order if i < len(closers)]
        self.call(self._close_concurrently, ordered)
        if any(name == "closing the runtime" for name, _, _ in ordered):
            self._stop_runtime()
            self._start_runtime()
            return
        self.handles.pop(sid, None)
        self.owner_of.pop(sid, None)
        if owner in self.fibers:
            self._forget_owned_by(owner)
            self.call(self._reopen_fiber, owner)
        self.settle()

    async def _close_concurrently(
        self, closers: Sequence[tuple[str, set[str], Callable[[], Awaitable[object]]]]
    ) -> None:
        async def close(name: str, sids: set[str], aclose: Callable[[], Awaitable[object]]) -> None:
            await aclose()
            self.closed_now(sids, name, OWNERS_JOIN)

        async with trio.open_nursery() as nursery:
            for name, sids, aclose in closers:
                nursery.start_soon(close, name, sids, aclose)

    @rule(owner=st.sampled_from(("f1", "f2")))
    def close_fiber(self, owner: str) -> None:
        """Close the fiber `owner`, which closes its agents, then open it again."""
        self.call(self._close_fiber, owner)
        self._forget_owned_by(owner)
        self.call(self._reopen_fiber, owner)
        self.settle()

    async def _close_fiber(self, owner: str) -> None:
        owned = {s: self.handles.get(s) for s, o in self.owner_of.items() if o == owner}
        await self.fibers[owner].aclose()
        for sid, handle in owned.items():
            if handle is not None and handle.agent.status is not AgentStatus.CLOSED:
                self.note(
                    FIBER_CLOSES_AGENTS,
                    False,
                    f"when fiber {owner}'s aclose() returned, its agent {sid!r} was "
                    f"{handle.agent.status.value}",
                )
        self.closed_now(owned, f"fiber {owner}'s aclose()", FIBER_CLOSES_AGENTS)

    @rule(
        sid=st.sampled_from((*IDS, PLUGIN_ID)), how=st.sampled_from(("handle", "fiber", "runtime"))
    )
    def close_with_flush_held(self, sid: str, how: str) -> None:
        """Close `sid` (by its handle, its owner fiber, or the runtime) while the store
        holds every flush open: until a flush is let go, nothing after it in the teardown
        may have happened, and aclose must not return (rule L1)."""
        sid = self.near(sid, self.owner_of)
        held, owner = self.held, self.owner_of.get(sid)
        if held is None or owner is None:
            return
        if how == "handle" and sid in self.handles:
            sids, who = {sid}, "aclose()"
            aclose: Callable[[], Awaitable[object]] = self.handles[sid].aclose
        elif how == "fiber" and owner in self.fibers:
            sids = {s for s, o in self.owner_of.items() if o == owner}
            who, aclose = f"fiber {owner}'s aclose()", self.fibers[owner].aclose
        elif how == "runtime":
            sids, who, aclose = (
                set(self.owner_of),
                "closing the runtime",
                self._stop_runtime_and_wait,
            )
        else:
            return
        returned: list[str] = []

        async def closer() -> None:
            await aclose()
            self.closed_now(sids, who, CLOSING_TURN_DURABLE)
            returned.append(who)

        seen = len(held.flushes)
        held.hold("flush")
        self.host.start(closer)
        for _ in range(len(sids) + 1):
            self.settle()
            waiting = held.flushes[seen : seen + held.waiting]
            seen += len(waiting)
            for flush in waiting:
                self._check_held_flush(flush.session_id, flush.records, flush.live, who)
                CLOSING_TURN_DURABLE.check(
                    not returned,
                    f"{who} returned while the flush of {flush.session_id!r} was still held",
                )
            if not waiting:
                break
            held.release()
            held.hold("flush")
        held.release()
        self.settle()
        CLOSING_TURN_DURABLE.check(
            bool(returned), f"{who} did not return after the store let every flush go"
        )
        if how == "runtime":
            self._stop_runtime()
            self._start_runtime()
            return
        for s in sids:
            self.owner_of.pop(s, None)
            self.handles.pop(s, None)
        if how == "fiber":
            self.call(self._reopen_fiber, owner)
        self.settle()

    def _check_held_flush(self, sid: str, records: Sequence[Any], live: bool, who: str) -> None:
        rt = self._open_rt
        assert rt is not None
        agent = rt.agents.get(sid)
        ended = not turn_started(records) or records[-1].type == "turn/end"
        TEARDOWN_ORDER.check(
            ended and live and agent is not None and sid in self.store.live_ids,
            f"while {who} waited for the flush of {sid!r}: the session "
            f"{'ended with turn/end' if ended else 'had an open turn'} when the flush began, "
            f"it was {'live' if sid in self.store.live_ids else 'detached'} in the store and "
            f"registry.get() = {agent!r}",
        )

    @rule(
        sid=st.sampled_from(IDS),
        verb=st.sampled_from(("create", "resume")),
        owner=st.sampled_from(OWNERS),
        delay=st.integers(0, 3),
        in_store=st.booleans(),
    )
    def attach_racing_close(
        self, sid: str, verb: str, owner: str, delay: int, in_store: bool
    ) -> None:
        """A create or resume through `owner` races `owner`'s close: started in the same
        batch (after `delay` checkpoints of the close), or while the create waits in the
        store. It raises or its agent is closed with its owner; nothing is left behind."""
        rt = self.rt
        assert rt is not None
        registry = self._registry(owner)
        # An agent of this id that another owner holds survives the close.
        survivor = self.owner_of.get(sid) not in (None, owner) and owner != "runtime"
        result: list[object] = []

        async def attach() -> None:
            try:
                if verb == "create":
                    result.append(await registry.create(model=ScriptedModel(), session_id=sid))
                else:
                    result.append(await registry.resume(sid, model=ScriptedModel()))
            except Exception as exc:
                result.append(exc)

        aclose = self._stop_runtime_and_wait if owner == "runtime" else self.fibers[owner].aclose

        async def close() -> None:
            for _ in range(delay):
                await trio.lowlevel.checkpoint()
            await aclose()

        if in_store and self.held is not None:
            self.held.hold("read")
            self.host.start(attach)
            self.settle()
            self.host.start(close)
            self.settle()
            self.held.release()
            self.settle()
        else:
            self.call(self._both, attach, close)
        self.settle()
        assert result, "the create racing its owner's close never ended"
        handle = result[0]
        agent = rt.agents.get(sid)
        if isinstance(handle, AgentHandle):
            CLOSE_RACE.check(
                handle.agent.status is AgentStatus.CLOSED,
                f"{verb}({sid!r}) racing the close of {owner} returned an agent that is "
                f"{handle.agent.status.value} after {owner} closed",
            )
            self.ever_live.add(sid)
            self.sessions_of[sid] = handle.agent.session
        gone = agent is None and sid not in self.store.live_ids
        CLOSE_RACE.check(
            gone or survivor,
            f"after {verb}({sid!r}) raced the close of {owner} ({handle!r}), registry.get() = "
            f"{agent!r}, and the id is {'in' if sid in self.store.live_ids else 'not in'} the "
            "store's live set",
        )
        if owner == "runtime":
            self._stop_runtime()
            self._start_runtime()
            return
        self._forget_owned_by(owner)
        self.call(self._reopen_fiber, owner)
        self.settle()

    async def _both(
        self, first: Callable[[], Awaitable[object]], second: Callable[[], Awaitable[object]]
    ) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            nursery.start_soon(second)
