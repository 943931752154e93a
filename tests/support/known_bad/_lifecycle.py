"""Known-bad runtimes: each is the real runtime with one seeded defect in publication,
teardown, fibers or plugins."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

import trio

from trio_agents import (
    AgentHandle,
    AgentOptions,
    AlreadyLoadedError,
    ConfiguredAgents,
    Fiber,
    Plugin,
    Runtime,
    SessionStore,
    ShellExecutor,
    open_runtime,
)
from trio_agents._agent._events import AgentCreated, Event, EventBus, SessionCreated
from trio_agents._registry import AgentRegistry, Lifecycle

from ._seeded import Seeded

# -- runtimes with one defect in publication or teardown -----------------------------------


class _AcloseBeforeLoopExit(Lifecycle):
    """(c) Closing unregisters and detaches at once, without waiting for the loop to exit."""

    def _request_close(self) -> None:
        super()._request_close()
        self._unregister()
        self._detach()  # the loop writes its turn/end after the detach


class _DetachBeforeFlush(Lifecycle):
    """(d) The session is detached before the loop's closing turn/end is flushed."""

    async def _teardown(self) -> None:
        self._detach()
        await super()._teardown()


class _LoserLeftRegistered(Lifecycle):
    """(g) The agent is registered before the session enters the store, and a loser of a
    same-id race is not unregistered."""

    def publish(self) -> None:
        self.services.live[self.agent.id] = self  # registered first: a loser is, too
        self._detach_session = self.services.sessions.enter(self.session)  # pyright: ignore[reportPrivateUsage]
        self._registered = True  # pyright: ignore[reportPrivateUsage]
        self.phase = "live"
        self._session_announced = True  # pyright: ignore[reportPrivateUsage]
        self.services.events.emit(SessionCreated(self.session.id))
        self._agent_announced = True  # pyright: ignore[reportPrivateUsage]
        self.services.events.emit(AgentCreated(self.agent.id))


class _TeardownSkipsFlush(Lifecycle):
    """The teardown kills the jobs, unregisters and detaches, but never flushes the
    session: the closing turn/end stays in the store's write-behind buffer."""

    async def _teardown(self) -> None:
        self.phase = "closing"
        self._close_requested = True  # pyright: ignore[reportPrivateUsage]
        try:
            if self._registered:  # pyright: ignore[reportPrivateUsage]
                await self.services.shell.kill_owned(self.agent.id)
        except Exception as exc:
            self._errors.append(exc)  # pyright: ignore[reportPrivateUsage]
        finally:
            self._unregister()
            self._detach()
            self._errors.extend(await self.fiber.unwind_hosted())  # pyright: ignore[reportPrivateUsage]
            if self.disposer_key is not None:
                self.owner.discard(self.disposer_key)


class _CloseNotShielded(Lifecycle):
    """`aclose` waits for the teardown without shielding the wait: a caller that is
    cancelled returns at once, before the agent has closed."""

    async def aclose(self) -> None:
        self._request_close()  # pyright: ignore[reportPrivateUsage]
        if not self._serving:  # pyright: ignore[reportPrivateUsage]
            self._finish()  # pyright: ignore[reportPrivateUsage]
        await self._done.wait()  # pyright: ignore[reportPrivateUsage]


class _SecondCloseReturnsEarly(Lifecycle):
    """A close that finds a close already under way returns at once ("someone else is
    closing it") instead of waiting for that teardown."""

    async def aclose(self) -> None:
        if self._close_requested:  # pyright: ignore[reportPrivateUsage]
            await trio.lowlevel.checkpoint()
            return
        await super().aclose()


class _AnnouncedBeforeEntered(Lifecycle):
    """SessionCreated is announced before the session enters the store: a listener of it
    finds the session not live (and a loser of a same-id race has announced it)."""

    def publish(self) -> None:
        self._session_announced = True  # pyright: ignore[reportPrivateUsage]
        self.services.events.emit(SessionCreated(self.session.id))
        self._detach_session = self.services.sessions.enter(self.session)  # pyright: ignore[reportPrivateUsage]
        self.services.live[self.agent.id] = self
        self._registered = True  # pyright: ignore[reportPrivateUsage]
        self.phase = "live"
        self._agent_announced = True  # pyright: ignore[reportPrivateUsage]
        self.services.events.emit(AgentCreated(self.agent.id))


class _CreateIgnoresOwnerClose(Lifecycle):
    """A create does not check, once its agent has started, whether the owner was closed
    meanwhile: it publishes an agent whose owner has already let it go."""

    def check_live(self) -> None:
        pass


class _SilentAtShutdown(Lifecycle):
    """While the runtime closes, agents are unregistered and detached without AgentClosed
    and SessionClosed ("nobody is listening any more")."""

    def _unregister(self) -> None:
        if self.owner.runtime.state == "closing":
            self._agent_announced = False  # pyright: ignore[reportPrivateUsage]
        super()._unregister()

    def _detach(self) -> None:
        if self.owner.runtime.state == "closing":
            self._session_announced = False  # pyright: ignore[reportPrivateUsage]
        super()._detach()


def runtime_factory_for(lifecycle: type[Lifecycle]):  # type: ignore[no-untyped-def] # pyright: ignore
    class BadRuntime(Runtime):
        lifecycle_class = lifecycle

    def factory(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
        return open_runtime(store, runtime_class=BadRuntime)

    factory.__name__ = lifecycle.__name__.strip("_")
    return factory


aclose_before_loop_exit = runtime_factory_for(_AcloseBeforeLoopExit)
detach_before_flush = runtime_factory_for(_DetachBeforeFlush)
loser_left_registered = runtime_factory_for(_LoserLeftRegistered)
teardown_skips_flush = runtime_factory_for(_TeardownSkipsFlush)
close_not_shielded = runtime_factory_for(_CloseNotShielded)
second_close_returns_early = runtime_factory_for(_SecondCloseReturnsEarly)
announced_before_entered = runtime_factory_for(_AnnouncedBeforeEntered)
create_ignores_owner_close = runtime_factory_for(_CreateIgnoresOwnerClose)
silent_at_shutdown = runtime_factory_for(_SilentAtShutdown)


# -- runtimes with one defect in fibers, plugins or services --------------------------------


class _DefectiveFiber(Fiber):
    """A fiber whose children are of its own class (the real `open_child` makes plain
    fibers, so the defect is carried down by re-classing each child)."""

    __slots__ = ()

    async def open_child(self, name: str) -> Fiber:
        child = await super().open_child(name)
        child.__class__ = type(self)
        return child


class _FifoFiber(_DefectiveFiber):
    """Disposers run first-in first-out: the oldest is popped instead of the newest."""

    __slots__ = ()

    async def _unwind(self) -> None:
        while self._children:
            child = self._children[-1]
            try:
                await child.aclose()
            except Exception as exc:
                self._errors.append(exc)
            if self._children and self._children[-1] is child:
                self._children.pop()
        while self._disposers:
            key = next(iter(self._disposers))
            _, disposer = self._disposers.pop(key)
            try:
                await disposer()
            except Exception as exc:
                self._errors.append(exc)


class _FirstErrorOnly(_DefectiveFiber):
    """`aclose` raises the first error the unwinding collected, alone, and drops the rest."""

    __slots__ = ()

    async def aclose(self) -> None:
        try:
            await super().aclose()
        except ExceptionGroup as group:
            raise group.exceptions[0] from None


class _FiberCloseNotShielded(_DefectiveFiber):
    """`aclose` waits for the unwinding without a shield: a cancelled caller returns
    before the fiber has unwound."""

    __slots__ = ()

    async def aclose(self) -> None:
        self._close_requested.set()
        await self._closed.wait()
        if self._errors:
            raise ExceptionGroup(f"errors while closing fiber {self.name!r}", self._errors)


class _FiberRuntime(Runtime):
    child_fiber: ClassVar[type[Fiber]] = Fiber

    async def open_child(self, name: str) -> Fiber:
        child = await super().open_child(name)
        child.__class__ = self.child_fiber
        return child


def fiber_factory_for(fiber: type[Fiber]):  # type: ignore[no-untyped-def] # pyright: ignore
    class BadRuntime(_FiberRuntime):
        child_fiber = fiber

    def factory(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
        return open_runtime(store, runtime_class=BadRuntime)

    factory.__name__ = fiber.__name__.strip("_")
    return factory


def runtime_class_factory(runtime: type[Runtime]):  # type: ignore[no-untyped-def] # pyright: ignore
    def factory(store: SessionStore) -> AbstractAsyncContextManager[Runtime]:
        return open_runtime(store, runtime_class=runtime)

    factory.__name__ = runtime.__name__.strip("_")
    return factory


class _ReloadDoesNotWait(Runtime):
    """`reload` starts closing the old fiber and applies the plugin again at once, in
    parallel with the unwinding, instead of after it."""

    async def reload(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        entry = self._plugins.pop(id(plugin), None)
        if entry is not None:
            self.nursery.start_soon(entry[1].aclose)
        return await self.load(plugin, name=name)


class _FailedApplyNotUndone(Runtime):
    """`load` lets the error of a failing `apply` propagate without closing its fiber:
    what apply attached stays."""

    async def load(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        if id(plugin) in self._plugins:
            raise AlreadyLoadedError(f"plugin {plugin!r} is already loaded")
        label = name or getattr(plugin, "name", None) or type(plugin).__name__
        fiber = await self.open_child(f"plugin {label}")
        await plugin.apply(fiber)
        self._plugins[id(plugin)] = (plugin, fiber)
        fiber.callback(self._forget, plugin, fiber)
        return fiber


class _LoadedPluginNotRefused(Runtime):
    """`load` looks for the plugin among the loaded plugins' fibers, never finds it, and
    applies a loaded plugin a second time."""

    async def load(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        if any(loaded is plugin for loaded in self._plugins):  # the keys are ids, not plugins
            raise AlreadyLoadedError(f"plugin {plugin!r} is already loaded")
        self._plugins.pop(id(plugin), None)
        return await super().load(plugin, name=name)


class _FiberAgentsOwnedByRuntime(Runtime):
    """`fiber.agents` hands out a registry whose agents the root fiber owns, not the fiber."""

    def agents_for(self, owner: Fiber) -> AgentRegistry:
        return super().agents_for(self)


class _OptionsLostAtResume(AgentRegistry):
    """A registry whose `resume` leaves out the options it is given (a resumed agent, its
    author thought, takes up what its session says)."""

    __slots__ = ()

    async def resume(
        self, session_id: str, *, options: AgentOptions | None = None, **parts: Any
    ) -> AgentHandle:
        return await super().resume(session_id, **parts)


class _ResumesWithoutOptions(Runtime):
    """(F2) `fiber.agents.resume` drops its `options`: a configured agent applied again
    comes back without its system prompt and limits."""

    def agents_for(self, owner: Fiber) -> AgentRegistry:
        return _OptionsLostAtResume(self._services, owner)  # pyright: ignore[reportPrivateUsage]


class _MintedIdsForgotten(Runtime):
    """(F2) Loading a ConfiguredAgents clears the ids it minted (a fresh plugin state per
    apply, it seems): a config without a session id gets a new session at every apply."""

    async def load(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        if isinstance(plugin, ConfiguredAgents):
            plugin._minted.clear()  # pyright: ignore[reportPrivateUsage]
        return await super().load(plugin, name=name)


class _BusStopsAtRaisingListener(EventBus):
    """(A11) One `try` around the whole delivery instead of one per listener: a listener that
    raises is logged, and the listeners after it, and the events queued behind, miss it."""

    __slots__ = ()

    def emit(self, event: Event) -> None:
        queue = self._queue  # pyright: ignore[reportPrivateUsage]
        queue.append(event)
        if self._delivering:  # pyright: ignore[reportPrivateUsage]
            return
        self._delivering = True
        try:
            while queue:
                current = queue.popleft()
                for listener in tuple(self._listeners):  # pyright: ignore[reportPrivateUsage]
                    listener(current)
        except Exception:
            queue.clear()
        finally:
            self._delivering = False


class _BusStopsAtRaisingRuntime(Runtime):
    def __init__(
        self, sessions: SessionStore, events: EventBus, shell: ShellExecutor | None = None
    ) -> None:
        super().__init__(sessions, _BusStopsAtRaisingListener(), shell)


bus_stops_at_raising_listener = runtime_class_factory(_BusStopsAtRaisingRuntime)


disposers_run_fifo = fiber_factory_for(_FifoFiber)
first_error_only = fiber_factory_for(_FirstErrorOnly)
fiber_close_not_shielded = fiber_factory_for(_FiberCloseNotShielded)
reload_does_not_wait = runtime_class_factory(_ReloadDoesNotWait)
failed_apply_not_undone = runtime_class_factory(_FailedApplyNotUndone)
loaded_plugin_not_refused = runtime_class_factory(_LoadedPluginNotRefused)
fiber_agents_owned_by_runtime = runtime_class_factory(_FiberAgentsOwnedByRuntime)
minted_ids_forgotten = runtime_class_factory(_MintedIdsForgotten)
resumes_without_options = runtime_class_factory(_ResumesWithoutOptions)

SEEDED = (
    Seeded(
        "minted-ids-forgotten", minted_ids_forgotten, "lifecycle", "configured-resumes-sessions"
    ),
    Seeded(
        "resumes-without-options",
        resumes_without_options,
        "lifecycle",
        "configured-resumes-sessions",
    ),
    Seeded(
        "c-aclose-before-loop-exit",
        aclose_before_loop_exit,
        "lifecycle",
        "closing-turn-end-durable",
    ),
    Seeded("d-detach-before-flush", detach_before_flush, "lifecycle", "teardown-order"),
    Seeded("g-loser-left-registered", loser_left_registered, "lifecycle", "race-loser-rolls-back"),
    Seeded("teardown-skips-flush", teardown_skips_flush, "lifecycle", "closing-turn-end-durable"),
    Seeded("close-not-shielded", close_not_shielded, "lifecycle", "teardown-shielded"),
    Seeded(
        "second-close-returns-early",
        second_close_returns_early,
        "lifecycle",
        "owners-join-one-teardown",
    ),
    Seeded(
        "announced-before-entered", announced_before_entered, "lifecycle", "nothing-half-published"
    ),
    Seeded(
        "create-ignores-owner-close",
        create_ignores_owner_close,
        "lifecycle",
        "close-race-leaves-nothing",
    ),
    Seeded("silent-at-shutdown", silent_at_shutdown, "lifecycle", "close-events-once"),
    Seeded(
        "bus-stops-at-raising-listener",
        bus_stops_at_raising_listener,
        "lifecycle",
        "bus-skips-raising-listener",
    ),
    Seeded("disposers-run-fifo", disposers_run_fifo, "lifecycle", "fiber-unwind-order"),
    Seeded("first-error-only", first_error_only, "lifecycle", "fiber-unwind-errors"),
    Seeded(
        "fiber-close-not-shielded", fiber_close_not_shielded, "lifecycle", "fiber-close-shielded"
    ),
    Seeded("reload-does-not-wait", reload_does_not_wait, "lifecycle", "plugin-reload-waits"),
    Seeded(
        "failed-apply-not-undone",
        failed_apply_not_undone,
        "lifecycle",
        "plugin-failed-apply-undone",
    ),
    Seeded(
        "loaded-plugin-not-refused", loaded_plugin_not_refused, "lifecycle", "plugin-load-refused"
    ),
    Seeded(
        "fiber-agents-owned-by-runtime",
        fiber_agents_owned_by_runtime,
        "lifecycle",
        "services-are-attributes",
    ),
)
