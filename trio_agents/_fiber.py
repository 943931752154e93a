"""Fibers: nursery-owning scopes that own tasks, resources, agents and child fibers.

A fiber stands in for the harness's cordis fiber. It is served by one task in its parent's
nursery; that task opens the fiber's nursery and, when the fiber is closed, unwinds it:
child fibers first (newest first), then the fiber's own disposers strictly LIFO, one after
another, continuing past failures, which are collected into one ExceptionGroup (rule F1).

Cancellation is not disposal: the serving task is shielded, so cancelling the scope around
a runtime does not tear fibers down in the middle of their disposers; only `aclose()` does.
A context manager entered with `enter_async_context` is held by its own task inside the
fiber, so it is entered and exited by the same task even when it opens nurseries or cancel
scopes, whoever calls `aclose()`.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

import trio

from ._errors import AlreadyRunningError, FiberClosedError
from ._nursery import report_started, runs_inside, start_service

if TYPE_CHECKING:
    from ._registry import AgentRegistry
    from ._runtime import Runtime

__all__ = ["AgentFiber", "Fiber", "Plugin", "Root", "require_open"]

logger = logging.getLogger("trio_agents.fiber")

T = TypeVar("T")
Disposer = Callable[[], Awaitable[object]]
FiberState = Literal["new", "open", "closing", "closed"]
_disposer_keys = itertools.count()


class Plugin(Protocol):
    """What `Runtime.load` and `Runtime.reload` take: any object with
    `async def apply(self, fiber) -> None` (rule F2). No subclassing is needed.

    Everything `apply` starts or registers through `fiber` belongs to that fiber and goes
    away when it closes. If `apply` raises, the fiber is closed and the error propagates.
    """

    async def apply(self, fiber: Fiber, /) -> None:
        """Set the plugin up in `fiber`: start its tasks in `fiber.nursery`, register its
        cleanups (`callback`, `push_async_callback`, `enter_async_context`), create its
        agents through `fiber.agents`. What it does not attach to `fiber` outlives it.

        `Runtime.load` calls it in a fresh child fiber; `Runtime.reload` calls it again after
        the old fiber has unwound, so it must cope with being applied more than once. If it
        raises, the fiber is closed (undoing what it attached) and the error propagates.
        Like every async function here it must always checkpoint.
        """
        ...


class Root(Protocol):
    """What a fiber asks of its root (the runtime, which implements it): the agent registry
    that gives agents to an owner. Declared here so a fiber never imports the registry."""

    def agents_for(self, owner: Fiber, /) -> AgentRegistry:
        """The registry whose agents are owned by `owner`."""
        ...


def require_open(fiber: Fiber, verb: str) -> None:
    """Raise FiberClosedError unless `fiber` is open; `verb` says what was refused, e.g.
    "create an agent in"."""
    if fiber.state != "open":
        raise FiberClosedError(
            f"cannot {verb} fiber {fiber.name!r}: it is {fiber.state}; "
            "use a fiber that is still open"
        )


class Fiber:
    """A scope that owns a nursery, an exit stack, child fibers and agents.

    name: labels the fiber in reprs, logs and error messages.
    """

    __slots__ = (
        "_agents",
        "_children",
        "_close_requested",
        "_closed",
        "_disposers",
        "_errors",
        "_nursery",
        "_parent",
        "_runtime",
        "_state",
        "_task",
        "name",
    )

    def __init__(self, name: str, runtime: Runtime, parent: Fiber | None) -> None:
        self._init_state(name, runtime, parent)
        self._close_requested = trio.Event()
        self._closed = trio.Event()

    def _init_state(self, name: str, runtime: Runtime, parent: Fiber | None) -> None:
        # Invariants: `_state` only moves forward (new -> open -> closing -> closed); the
        # nursery exists exactly from "open" on; `_children` holds the child fibers not yet
        # closed, oldest first; `_disposers` only shrinks once the state is "closing".
        self.name = name
        self._runtime = runtime
        self._parent = parent
        self._state: FiberState = "new"
        self._children: list[Fiber] = []
        # Keyed, in push order: unwinding pops the newest (LIFO), and an agent closed by its
        # handle forgets its entry in O(1) however many agents its owner holds.
        self._disposers: dict[int, tuple[str, Disposer]] = {}
        self._nursery: trio.Nursery | None = None
        self._errors: list[Exception] = []
        self._agents: AgentRegistry | None = None
        self._task: trio.lowlevel.Task | None = None

    def __repr__(self) -> str:
        return f"<Fiber {self.name!r} {self._state}>"

    # -- what a fiber offers ------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        """The runtime this fiber belongs to (the runtime's own is itself)."""
        return self._runtime

    @property
    def state(self) -> FiberState:
        """`new`, `open`, `closing` or `closed`. Only an open fiber accepts tasks, disposers,
        children and agents."""
        return self._state

    @property
    def nursery(self) -> trio.Nursery:
        """The fiber's nursery: tasks started here are cancelled when the fiber closes,
        after its disposers have run. A task that crashes makes the fiber unwind. Raises
        FiberClosedError unless the fiber is open."""
        self._check_open("use the nursery of")
        assert self._nursery is not None
        return self._nursery

    @property
    def agents(self) -> AgentRegistry:
        """The agent registry, with this fiber as the owner of the agents it creates."""
        if self._agents is None:
            root: Root = self._runtime
            self._agents = root.agents_for(self)
        return self._agents

    async def enter_async_context(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter `cm` now; exit it when the fiber unwinds (LIFO with its other disposers).

        `cm` is entered and exited by a task of its own in the fiber, so it may open
        nurseries or cancel scopes. Always a checkpoint. Raises FiberClosedError unless the
        fiber is open; an error from entering `cm` propagates here, one from exiting it is
        among the errors of `aclose`.
        """
        self._check_open("enter a context in")
        holder = _Holder(cm)
        # Registered first: if this call is cancelled while the holder is still entering,
        # the fiber's unwinding still releases it (and does not wait forever for it).
        self._push(f"exit {cm!r}", holder.release)
        return cast(T, await start_service(self.nursery, holder.hold))

    def push_async_callback(self, fn: Callable[..., Awaitable[object]], *args: Any) -> int:
        """Await `fn(*args)` when the fiber unwinds (LIFO with its other disposers); an error
        it raises is among the errors of `aclose`. Returns a key for `discard`. Never blocks.
        Raises FiberClosedError unless the fiber is open."""
        self._check_open("register a callback on")
        disposer = functools.partial(fn, *args) if args else fn
        return self._push(getattr(fn, "__qualname__", repr(fn)), disposer)

    def callback(self, fn: Callable[..., object], *args: Any) -> int:
        """Call `fn(*args)` when the fiber unwinds (LIFO with its other disposers); an error
        it raises is among the errors of `aclose`. Returns a key for `discard`. Never blocks.
        Raises FiberClosedError unless the fiber is open."""
        self._check_open("register a callback on")

        async def call() -> None:
            fn(*args)

        return self._push(getattr(fn, "__qualname__", repr(fn)), call)

    def discard(self, key: int) -> None:
        """Forget a callback that has not run yet (its resource was released some other way,
        e.g. an agent closed by its handle), so it does not pile up until the fiber closes.
        An unknown or already-run key is ignored. Never blocks."""
        self._disposers.pop(key, None)

    @asynccontextmanager
    async def fiber(self, name: str) -> AsyncGenerator[Fiber, None]:
        """A child fiber for the duration of the block; it closes before this fiber's own
        disposers if this fiber closes first.

        Entering is a checkpoint. Leaving closes the child as `aclose` does (a cancel-shielded
        checkpoint), and raises what that raises. Entering raises FiberClosedError unless this
        fiber is open.
        """
        child = await self.open_child(name)
        try:
            yield child
        finally:
            await child.aclose()

    async def open_child(self, name: str) -> Fiber:
        """Open a child fiber that lives until it, or this fiber, is closed. Children close
        newest first, before this fiber's own disposers. Always a checkpoint. Raises
        FiberClosedError unless this fiber is open."""
        self._check_open("open a child of")
        child = Fiber(name, self._runtime, self)
        # Registered before the await: a close of this fiber that lands meanwhile closes the
        # child too, instead of leaving it open behind a parent that has gone.
        self._children.append(child)
        try:
            await start_service(self.nursery, child.serve)
        except BaseException:
            if child.state == "new":  # its task never ran: nothing to close
                self._children.remove(child)
                child._state = "closed"
                child._closed.set()
            raise
        return child

    async def aclose(self) -> None:
        """Close the fiber and wait until it has unwound. Idempotent: every caller waits for
        the same unwinding and sees the same errors. Shielded: a cancelled caller still
        waits, and the unwinding goes on in the fiber's own task regardless.

        Always a checkpoint (a cancel-shielded one). Called from one of the fiber's own
        tasks, it cannot wait for its own end: it returns after a plain checkpoint, and the
        unwinding goes on. Raises an ExceptionGroup of the errors the unwinding collected
        from children and disposers (each runs even when an earlier one failed).
        """
        self._close_requested.set()
        if self._task is not None and runs_inside(self._task):
            # Called from one of this fiber's own tasks: it cannot wait for its own end.
            # The unwinding goes on; the caller is cancelled when the nursery is.
            await trio.lowlevel.checkpoint()
            return
        with trio.CancelScope(shield=True):
            await self._closed.wait()
        if self._errors:
            raise ExceptionGroup(f"errors while closing fiber {self.name!r}", self._errors)

    # -- serving and unwinding ------------------------------------------------------------

    async def serve(
        self, *, task_status: trio.TaskStatus[Fiber] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The fiber's task. Its parent starts it with `await nursery.start(fiber.serve)`.

        It runs, shielded, until the fiber is closed and unwound: cancelling the parent's
        scope does not unwind it, only `aclose` does. Always a checkpoint (a cancel-shielded
        one). Raises RuntimeError if the fiber was served before.
        """
        if self._state != "new":
            raise AlreadyRunningError(
                f"{self!r} is already served; start a fiber's serve() once, or open a new one"
            )
        self._task = trio.lowlevel.current_task()
        try:
            with trio.CancelScope(shield=True):
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self._state = "open"
                    if not report_started(task_status, self):
                        self._close_requested.set()  # nobody got this fiber: close it
                    try:
                        await self._close_requested.wait()
                    finally:
                        # Reached on close, or if a task of this fiber crashed: unwind anyway.
                        self._state = "closing"
                        with trio.CancelScope(shield=True):
                            await self._unwind()
                        nursery.cancel_scope.cancel(reason=f"fiber {self.name!r} closed")
        finally:
            self._state = "closed"
            if self._parent is not None and self in self._parent._children:
                self._parent._children.remove(self)
            self._closed.set()

    async def _unwind(self) -> None:
        """Close the children, newest first, then run the disposers, newest first, collecting
        their errors. Seam: a double may change the unwinding order."""
        while self._children:  # a child removes itself from the list once it has closed
            child = self._children[-1]
            try:
                await child.aclose()
            except Exception as exc:
                self._errors.append(exc)
            if self._children and self._children[-1] is child:
                self._children.pop()
        while self._disposers:
            _, (label, disposer) = self._disposers.popitem()
            try:
                await disposer()
            except Exception as exc:
                logger.debug("fiber %r: disposer %s raised %r", self.name, label, exc)
                self._errors.append(exc)

    # -- helpers ------------------------------------------------------------------------

    def _push(self, label: str, disposer: Disposer) -> int:
        """Register a disposer; returns the key that `discard` forgets it by."""
        key = next(_disposer_keys)
        self._disposers[key] = (label, disposer)
        return key

    def _check_open(self, verb: str) -> None:
        require_open(self, verb)


class AgentFiber(Fiber):
    """An agent's own fiber. It has no task of its own: the agent's lifecycle task opens
    its nursery, runs the agent's loop in it, and unwinds it last in the teardown. One task
    per agent instead of three keeps an idle agent small (D46).

    Closing it is closing its agent: `aclose()` asks the lifecycle, which unwinds this
    fiber at the end of the agent's teardown (rule L1).
    """

    __slots__ = ("_close_owner",)

    def __init__(self, name: str, runtime: Runtime, close_owner: Disposer) -> None:
        # No events of its own (its closing is its lifecycle's), unlike a served fiber.
        self._init_state(name, runtime, None)
        self._close_owner = close_owner

    def host(self, nursery: trio.Nursery, task: trio.lowlevel.Task) -> None:
        self._nursery, self._task = nursery, task
        self._state = "open"

    async def serve(
        self, *, task_status: trio.TaskStatus[Fiber] = trio.TASK_STATUS_IGNORED
    ) -> None:
        raise AlreadyRunningError(
            f"{self!r} is already served by its agent's lifecycle task; do not serve it"
        )

    async def aclose(self) -> None:
        await self._close_owner()

    def release_owner(self, report: Disposer) -> None:
        """The agent's teardown is complete: `aclose()` now only runs `report`, and this
        fiber no longer holds on to its lifecycle."""
        self._close_owner = report

    async def unwind_hosted(self) -> list[Exception]:
        """Unwind children and disposers, then cancel the nursery's other tasks. Called by
        the hosting task, shielded; returns the errors instead of raising them."""
        if self._state == "open":
            self._state = "closing"
            try:
                await self._unwind()
            finally:
                if self._nursery is not None:
                    self._nursery.cancel_scope.cancel(reason=f"fiber {self.name!r} closed")
        self._state = "closed"
        return self._errors


class _Holder:
    """Holds an async context manager open in a task of its own, so that it is entered and
    exited by the same task, and reports an error from its exit to whoever releases it."""

    def __init__(self, cm: AbstractAsyncContextManager[Any]) -> None:
        self._cm = cm
        self._began = False
        self._release = trio.Event()
        self._done = trio.Event()
        self._error: BaseException | None = None

    async def hold(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        self._began = True
        try:
            with trio.CancelScope(shield=True):
                async with self._cm as value:
                    if report_started(task_status, value):
                        await self._release.wait()
        except Exception as exc:
            if not self._release.is_set():
                raise  # failed while entering: `start` re-raises it to the caller
            self._error = exc
        finally:
            self._done.set()

    async def release(self) -> None:
        self._release.set()
        if not self._began:
            # The holder task never ran (starting it failed): nothing was entered.
            await trio.lowlevel.checkpoint()
            return
        await self._done.wait()
        if self._error is not None:
            raise self._error
