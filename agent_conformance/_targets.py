"""What the conformance machines need of the implementation they check: the factories a target
is given as, and the surface of what the agent and runtime factories yield.

No Hypothesis here, so `agent_conformance` can export these without importing it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from trio_agents import (
    AgentOptions,
    AgentRegistry,
    AgentStatus,
    CancelCause,
    EventBus,
    Fiber,
    Message,
    Model,
    OpenAICompatibleModel,
    Plugin,
    Session,
    SessionStore,
    ShellExecutor,
    Tool,
)

__all__ = [
    "AgentFactory",
    "AgentSurface",
    "FunctionToolFactory",
    "McpOpener",
    "ModelFactory",
    "RuntimeFactory",
    "RuntimeSurface",
    "ShellFactory",
    "builtin_model",
]


@runtime_checkable
class AgentSurface(Protocol):
    """What the agent machine drives: an `Agent`, or anything with its public surface. The
    semantics are those of the contract's agent rules; an optional `pending` (a tuple of
    `(message id, kind)` pairs) is checked when present."""

    @property
    def id(self) -> str:
        """The agent's id, which is its session's id."""
        ...

    @property
    def session(self) -> Session:
        """The agent's session: its durable records."""
        ...

    @property
    def status(self) -> AgentStatus:
        """IDLE, RUNNING or CLOSED (rules A1, A9)."""
        ...

    def send(self, content: str) -> str:
        """Queue a prompt: one send, one turn (A1, A2). Never blocks."""
        ...

    def steer(self, content: str) -> str:
        """Steer the running turn, or send when there is none (A3). Never blocks."""
        ...

    def inject(self, message: Message | str, /) -> str:
        """Context for the next step; never starts a turn (A4). Never blocks. The machine
        injects plain strings (user-role context) and `Message`s of role user and system."""
        ...

    def cancel(self, reason: str, *, cause: CancelCause) -> bool:
        """The one stop primitive: whether it was effective (A5, A6). Never blocks."""
        ...

    async def wait_idle(self) -> None:
        """Wait until the agent settles, or its loop exits if closed (A9). Always a
        checkpoint."""
        ...


@runtime_checkable
class RuntimeSurface(Protocol):
    """What the lifecycle machine drives: a `Runtime`, or anything with its public surface
    over the store it was opened with."""

    @property
    def agents(self) -> AgentRegistry:
        """The registry whose agents the runtime owns (L2)."""
        ...

    @property
    def events(self) -> EventBus:
        """The bus the lifecycle events are emitted on (L3, L5)."""
        ...

    @property
    def sessions(self) -> SessionStore:
        """The store the runtime was opened with."""
        ...

    async def open_child(self, name: str) -> Fiber:
        """A child fiber that owns the agents created through it (L2). Always a
        checkpoint."""
        ...

    async def load(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        """Apply `plugin` in a fiber of its own (F2). Always a checkpoint."""
        ...

    async def reload(self, plugin: Plugin, *, name: str | None = None) -> Fiber:
        """Close the plugin's fiber, then apply it again (F2). Always a checkpoint."""
        ...


AgentFactory = Callable[
    [Model, Sequence[Tool], EventBus, AgentOptions], AbstractAsyncContextManager[AgentSurface]
]
"""Opens an agent: `factory(model, tools, events, options)` is an async context manager
yielding an `AgentSurface`; leaving it closes the agent. A factory that also takes an
`approval=` keyword (an `Approval`) is given one in the agent machine's asking examples."""

RuntimeFactory = Callable[[SessionStore], AbstractAsyncContextManager[RuntimeSurface]]
"""Opens a runtime over a store: `factory(store)` is an async context manager yielding a
`RuntimeSurface`; leaving it closes every agent."""

ShellFactory = Callable[[str], ShellExecutor]
"""`factory(cwd)` makes the executor under test, with `cwd` as its default working
directory; the machine runs it as `rt.shell` of a built-in runtime. The runtime and its bash
tools take a `ShellExecutor`, so the target is one (typically a subclass), not a protocol."""

FunctionToolFactory = Callable[..., Tool]
"""Makes a Tool of a typed function, with `function_tool`'s signature: `make(function, *,
name=None, description=None)`. The function machine's target."""

ModelFactory = Callable[..., Model]
"""Makes the model adapter under test for an OpenAI-compatible endpoint: `make(base_url, *,
api_key, max_retries)` returns a `Model` that streams from `{base_url}/chat/completions`,
sends `api_key` (None: none) and retries up to `max_retries` times. The model machine's
target; its retries should wait little (the machine's endpoint asks for a millisecond). A
maker that also takes `max_wait` (seconds, the longest wait a retry keeps) gets its waits
checked: once per run the machine passes 30 and asks for waits of 0.4 s and 1 s (E3)."""


def builtin_model(
    base_url: str, *, api_key: str | None, max_retries: int, max_wait: float = 0.05
) -> Model:
    """The built-in adapter, `OpenAICompatibleModel`, as the model machine's default target:
    retries without backoff, a Retry-After honoured up to `max_wait` (50 ms but where the
    machine checks the wait itself)."""
    return OpenAICompatibleModel(
        "conformance-model",
        base_url=base_url,
        api_key=api_key,
        max_retries=max_retries,
        backoff=0.0,
        max_wait=max_wait,
    )


McpOpener = Callable[..., AbstractAsyncContextManager[Sequence[Tool]]]
"""Opens the tools of MCP servers, with `open_mcp_tools`'s signature: `opener(servers, *,
base, cwd, start_timeout, close_grace)` is an async context manager yielding the tools (a
sequence of `Tool`); leaving it closes every server. The MCP machine's target."""


def takes_keyword(target: Callable[..., object], name: str) -> bool:
    """Whether `target` can be called with the keyword argument `name` (an option a target
    may or may not take, such as an agent factory's `approval`)."""
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in parameters
    )
