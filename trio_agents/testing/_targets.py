"""What the conformance machines need of the implementation they check: the factories a target
is given as, and the surface of what the agent and runtime factories yield.

No Hypothesis here, so `trio_agents.testing` can export these without importing it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from .._agent import CancelCause
from .._events import EventBus
from .._fiber import Fiber
from .._model import Model
from .._options import AgentOptions
from .._registry import AgentRegistry
from .._session import Session
from .._shell import ShellExecutor
from .._status import AgentStatus
from .._store import SessionStore
from .._tool import Tool

__all__ = ["AgentFactory", "AgentSurface", "RuntimeFactory", "RuntimeSurface", "ShellFactory"]


@runtime_checkable
class AgentSurface(Protocol):
    """What the agent machine drives: an `Agent`, or anything with its public surface. The
    semantics are those of the contract's agent rules; an optional `pending` (a tuple of
    `(message id, kind)` pairs) is checked when present."""

    @property
    def id(self) -> str: ...

    @property
    def session(self) -> Session: ...

    @property
    def status(self) -> AgentStatus: ...

    def send(self, content: str) -> str: ...

    def steer(self, content: str) -> str: ...

    def inject(self, content: str, /) -> str: ...

    def cancel(self, reason: str, *, cause: CancelCause) -> bool: ...

    async def wait_idle(self) -> None: ...


@runtime_checkable
class RuntimeSurface(Protocol):
    """What the lifecycle machine drives: a `Runtime`, or anything with its public surface
    over the store it was opened with."""

    @property
    def agents(self) -> AgentRegistry: ...

    @property
    def events(self) -> EventBus: ...

    @property
    def sessions(self) -> SessionStore: ...

    async def open_child(self, name: str) -> Fiber: ...

    async def load(self, plugin: Any, *, name: str | None = None) -> Fiber: ...

    async def reload(self, plugin: Any, *, name: str | None = None) -> Fiber: ...


AgentFactory = Callable[
    [Model, Sequence[Tool], EventBus, AgentOptions], AbstractAsyncContextManager[AgentSurface]
]
"""Opens an agent: `factory(model, tools, events, options)` is an async context manager
yielding an `AgentSurface`; leaving it closes the agent."""

RuntimeFactory = Callable[[SessionStore], AbstractAsyncContextManager[RuntimeSurface]]
"""Opens a runtime over a store: `factory(store)` is an async context manager yielding a
`RuntimeSurface`; leaving it closes every agent."""

ShellFactory = Callable[[str], ShellExecutor]
"""`factory(cwd)` makes the executor under test, with `cwd` as its default working
directory; the machine runs it as `rt.shell` of a built-in runtime. The runtime and its bash
tools take a `ShellExecutor`, so the target is one (typically a subclass), not a protocol."""
