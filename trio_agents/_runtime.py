"""The runtime: the root fiber, and the services every agent shares (rule F3: plain typed
attributes, no string-keyed locator)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._errors import AlreadyLoadedError
from ._events import EventBus
from ._fiber import Fiber
from ._nursery import service_nursery, start_service
from ._registry import _Lifecycle  # pyright: ignore[reportPrivateUsage]
from ._shell import ShellExecutor
from ._store import SessionStore
from ._store_sqlite import SqliteStore, default_store_path

__all__ = ["Runtime", "open_runtime"]

logger = logging.getLogger("trio_agents.runtime")


class Runtime(Fiber):
    """The root fiber. Closing it closes every fiber and every agent (the provider, L2)."""

    # How one agent is published and torn down; a seam for test doubles of the runtime
    # (the conformance suite's known-bad runtimes replace single steps of it).
    lifecycle_class: type[_Lifecycle]

    def __init__(
        self, sessions: SessionStore, events: EventBus, shell: ShellExecutor | None = None
    ) -> None:
        super().__init__("runtime", self, None)
        self.sessions = sessions
        self.events = events
        self.shell = shell if shell is not None else ShellExecutor()
        self._live_agents: dict[str, _Lifecycle] = {}
        self._plugins: dict[int, tuple[Any, Fiber]] = {}

    async def load(self, plugin: Any, *, name: str | None = None) -> Fiber:
        """Apply `plugin` in a child fiber of its own (rule F2) and return that fiber.

        If `apply` raises, the fiber is closed (undoing whatever apply did) and the error
        propagates.
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

    async def reload(self, plugin: Any, *, name: str | None = None) -> Fiber:
        """Close the plugin's fiber, awaiting its complete unwinding, then apply it again."""
        entry = self._plugins.get(id(plugin))
        if entry is not None:
            await entry[1].aclose()
        return await self.load(plugin, name=name)

    def plugin_fiber(self, plugin: Any) -> Fiber | None:
        entry = self._plugins.get(id(plugin))
        return entry[1] if entry is not None else None

    def _forget(self, plugin: Any, fiber: Fiber) -> None:
        entry = self._plugins.get(id(plugin))
        if entry is not None and entry[1] is fiber:
            del self._plugins[id(plugin)]


@asynccontextmanager
async def open_runtime(
    store: SessionStore | str | os.PathLike[str] | None = None,
    *,
    shell: ShellExecutor | None = None,
    runtime_class: type[Runtime] = Runtime,
) -> AsyncGenerator[Runtime, None]:
    """The root fiber and its services, for the duration of the block.

    `store` is a SessionStore, a path (a SqliteStore there), or None (a SqliteStore at
    `default_store_path()`). `shell` is the ShellExecutor agents' bash tools use (None: a
    local one with default settings). Leaving the block closes every fiber and agent, in
    order, shielded from cancellation, then the shell executor (silencing its notices, then
    killing and reaping every job left), then the store. `runtime_class` is for subclasses of
    `Runtime` (test doubles).
    """
    if isinstance(store, SessionStore):
        sessions = store
    else:
        sessions = SqliteStore(store if store is not None else default_store_path())
    async with service_nursery() as (nursery, body):
        runtime = runtime_class(sessions, EventBus(), shell)
        await start_service(nursery, runtime.serve)
        try:
            # The store is the first thing the root fiber owns, so it is the last to go.
            await runtime.enter_async_context(sessions.running())
            # Entered after the store, so it closes before the store and after every agent
            # (agents are pushed later): their own jobs are gone before it closes.
            await runtime.enter_async_context(runtime.shell.running())
            yield runtime
        except BaseException as exc:
            body.exception = exc
            try:
                await runtime.aclose()
            except Exception:
                logger.exception("closing the runtime failed while %r propagated", exc)
            raise
        try:
            await runtime.aclose()
        except BaseException as exc:
            body.exception = exc
            raise


Runtime.lifecycle_class = _Lifecycle
