"""Known-bad runtimes: each is the real runtime with one seeded defect in publication,
teardown, fibers or durability."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from trio_agents import (
    Runtime,
    SessionStore,
    open_runtime,
)
from trio_agents._registry import Lifecycle

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
        self.services.live[self.agent.id] = self
        super().publish()

    def _unregister(self) -> None:
        if self._registered:  # pyright: ignore[reportPrivateUsage]
            super()._unregister()


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


SEEDED = (
    Seeded("c-aclose-before-loop-exit", aclose_before_loop_exit, "lifecycle", "?"),
    Seeded("d-detach-before-flush", detach_before_flush, "lifecycle", "?"),
    Seeded("g-loser-left-registered", loser_left_registered, "lifecycle", "?"),
)
