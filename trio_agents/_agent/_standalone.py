"""`open_agent`: a standalone agent whose loop this context owns, for code that needs no
runtime (no registry, no store: its session stays in memory unless you pass one)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager

from .._model._seam import Model
from .._nursery import service_nursery
from .._store._session import Session
from .._tool._seam import Tool
from ._agent import Agent
from ._approval import Approval
from ._events import EventBus
from ._options import AgentOptions

__all__ = ["open_agent"]


@asynccontextmanager
async def open_agent(
    model: Model,
    *,
    tools: Sequence[Tool] = (),
    options: AgentOptions | None = None,
    session: Session | str | None = None,
    events: EventBus | None = None,
    agent_class: type[Agent] | None = None,
    approval: Approval | None = None,
) -> AsyncGenerator[Agent, None]:
    """A standalone agent whose loop runs in a nursery owned by this context.

    Leaving the block closes the agent: the running turn ends `closed` and the loop has
    exited before the block is left. `agent_class` is for subclasses of `Agent` (test
    doubles). `approval` makes the agent ask before the calls its policy gates. `session`
    is a Session, a new session's id, or None for a fresh UUID.

    Entering and leaving are checkpoints. A loop that does not stop within the agent's
    `close_grace` (a tool ignoring cancellation) is cancelled. An exception from the block
    propagates as itself; one from the loop (a PersistenceError) propagates in an
    ExceptionGroup. Entering raises ValueError for two tools of one name or an empty session
    id.
    """
    if session is None:
        session = Session(str(uuid.uuid4()))
    elif isinstance(session, str):
        session = Session(session)
    cls = agent_class if agent_class is not None else Agent
    agent = cls(
        session=session,
        model=model,
        tools=tools,
        options=options,
        events=events,
        approval=approval,
    )
    async with service_nursery() as nursery:
        close = await nursery.start(agent.run)
        try:
            yield agent
        finally:
            if not await close():
                nursery.cancel_scope.cancel(reason="agent did not stop within close_grace")
