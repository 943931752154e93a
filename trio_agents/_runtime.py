"""The runtime: the root fiber, and the services every agent shares (rule F3: plain typed
attributes, no string-keyed locator)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import trio

from ._agent._events import EventBus
from ._errors import AlreadyLoadedError
from ._fiber import Fiber, Plugin
from ._nursery import service_nursery, start_service
from ._registry import AgentRegistry, Lifecycle, Services
from ._shell._executor import ShellExecutor
from ._store._base import SessionStore
from ._store._postgres import PostgresStore, is_postgres_url
from ._store._sqlite import SqliteStore, default_store_path

__all__ = ["Runtime", "open_runtime"]

logger = logging.getLogger("trio_agents.runtime")


class Runtime(Fiber):
    """The root fiber. Closing it closes every fiber and every agent (the provider, L2).

    `open_runtime` makes one. Its services are plain attributes (rule F3):

    sessions: the `SessionStore` every agent's session lives in.
    events: the `EventBus` every agent and the registry emit on.
    shell: the `ShellExecutor` background jobs run in (the bash tools use it).
    lifecycle_class: how one agent is published and torn down; a seam for test doubles.
    """

    # How one agent is published and torn down; a seam for test doubles of the runtime
    # (the conformance suite's known-bad runtimes replace single steps of it).
    lifecycle_class: type[Lifecycle] = Lifecycle

    def __init__(
        self, sessions: SessionStore, events: EventBus, shell: ShellExecutor | None = None
    ) -> None:
        super().__init__("runtime", self, None)
        executor = shell if shell is not None else ShellExecutor()
        # The one place the services live: the registries read them from here too, so the
        # runtime and its registries can never disagree on them.
        self._services = Services(sessions, events, executor, type(self).lifecycle_class)
        self._plugins: dict[int, tuple[Plugin, Fiber]] = {}

    @property
    def sessions(self) -> SessionStore:
        """The session store every agent of this runtime is kept in."""
        return self._services.sessions

    @property
    def events(self) -> EventBus:
        """The bus every agent and lifecycle event of this runtime is emitted on."""
        return self._services.events

    @property
    def shell(self) -> ShellExecutor:
        """The shell executor the agents' bash tools run in (rules S1-S5)."""
        return self._services.shell

    def agents_for(self, owner: Fiber) -> AgentRegistry:
        """The registry whose agents are owned by `owner`, a fiber of this runtime:
        `owner.agents` is this registry. Raises ValueError for a fiber of another runtime.
        Never blocks."""
        if owner.runtime is not self:
            raise ValueError(
                f"{owner!r} belongs to another runtime; use that runtime's registry (owner.agents)"
            )
        return AgentRegistry(self._services, owner)

    async def load(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        """Apply `plugin` in a child fiber of its own (rule F2) and return that fiber.

        If `apply` raises, the fiber is closed (undoing whatever apply did) and the error
        propagates. The fiber is named after `name`, else the plugin's `name` attribute, else
        its class. Always a checkpoint. Raises ValueError if `plugin` is already loaded, and
        FiberClosedError unless the runtime is open.
        """
        if id(plugin) in self._plugins:
            raise AlreadyLoadedError(
                f"plugin {plugin!r} is already loaded; use reload() to apply it again"
            )
        label = name or getattr(plugin, "name", None) or type(plugin).__name__
        fiber = await self.open_child(f"plugin {label}")
        try:
            await plugin.apply(fiber)
        except BaseException:
            with trio.CancelScope(shield=True):
                await fiber.aclose()
            raise
        self._plugins[id(plugin)] = (plugin, fiber)
        # Forget the plugin when its fiber closes (pushed last, so it runs first).
        fiber.callback(self._forget, plugin, fiber)
        return fiber

    async def reload(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        """Close the plugin's fiber, awaiting its complete unwinding, then apply it again.

        A plugin that is not loaded is just loaded. Always a checkpoint. Raises what closing
        the old fiber (`Fiber.aclose`) or `load` raises; if the close fails, the plugin is
        not applied again.
        """
        entry = self._plugins.get(id(plugin))
        if entry is not None:
            await entry[1].aclose()
        return await self.load(plugin, name=name)

    def plugin_fiber(self, plugin: Plugin) -> Fiber | None:
        """The fiber `plugin` is loaded in, or None if it is not loaded (or its fiber has
        closed). Never blocks."""
        entry = self._plugins.get(id(plugin))
        return entry[1] if entry is not None else None

    def _forget(self, plugin: Plugin, fiber: Fiber) -> None:
        entry = self._plugins.get(id(plugin))
        if entry is not None and entry[1] is fiber:
            del self._plugins[id(plugin)]


def _store_paths(store: SqliteStore) -> tuple[str, ...]:
    """What no command may read: the store (every session's prompts) and its lock files; the
    default store's directory is ours alone, so it goes as a whole (D133)."""
    path = os.path.abspath(store.path)
    files = (path, f"{path}-wal", f"{path}-shm", f"{path}-journal", f"{path}.live")
    own = os.path.dirname(os.path.abspath(default_store_path()))
    return (*files, own) if os.path.dirname(path) == own else files


@asynccontextmanager
async def open_runtime(
    store: SessionStore | str | os.PathLike[str] | None = None,
    *,
    shell: ShellExecutor | None = None,
    runtime_class: type[Runtime] = Runtime,
) -> AsyncGenerator[Runtime, None]:
    """The root fiber and its services, for the duration of the block.

    `store` is a SessionStore, a `postgresql://` URL (a PostgresStore there), a path (a
    SqliteStore there), or None (a SqliteStore at `default_store_path()`). `shell` is the
    ShellExecutor agents' bash tools use (None: a local one with default settings). Leaving
    the block closes every fiber and agent, in order, shielded from cancellation, then the
    shell executor (silencing its notices, then killing and reaping every job left), then the
    store. `runtime_class` is for subclasses of `Runtime` (test doubles).

    Entering is a checkpoint, leaving a cancel-shielded one. Entering raises what opening the
    store or the shell executor raises: TrioAgentsError for a file that is not a session store
    or a store already running, RuntimeError for a shell executor already running. Leaving
    raises an ExceptionGroup of what failed while closing, also when the block was
    cancelled; if the block raised, that exception propagates as itself and closing errors
    are logged instead.
    """
    if isinstance(store, SessionStore):
        sessions = store
    elif isinstance(store, str) and is_postgres_url(store):
        sessions = PostgresStore(store)
    else:
        sessions = SqliteStore(store if store is not None else default_store_path())
    async with service_nursery() as nursery:
        runtime = runtime_class(sessions, EventBus(), shell)
        if isinstance(sessions, SqliteStore):
            runtime.shell.hide(*_store_paths(sessions))
        await start_service(nursery, runtime.serve)
        try:
            # The store is the first thing the root fiber owns, so it is the last to go.
            await runtime.enter_async_context(sessions.running())
            # Entered after the store, so it closes before the store and after every agent
            # (agents are pushed later): their own jobs are gone before it closes.
            await runtime.enter_async_context(runtime.shell.running())
            yield runtime
        except trio.Cancelled:
            # Often the runtime's own failure (an agent's PersistenceError cancels the
            # service nursery), and then closing raises it: it propagates in place of the
            # cancellation, as a failing nursery child's error does (D357).
            await runtime.aclose()
            raise
        except BaseException as exc:
            try:
                await runtime.aclose()
            except Exception:
                logger.exception("closing the runtime failed while %r propagated", exc)
            raise
        await runtime.aclose()
