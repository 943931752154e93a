"""A `session/prompt` once the server has admitted it: sent to the session's agent (at once,
or after its resource links are read), then settled into what the prompt is answered: a stop
reason, or the error that stands in for one.

The server admits a prompt synchronously as it reads it and sends what `settle` returns; in
between, nothing here sends a frame, so the order of the frames stays the server's (every
update of the turn is queued before the answer, design D30).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .._errors import AgentClosedError, TrioAgentsError
from .._store._base import SessionStore
from .._util import describe
from . import _jsonrpc as rpc
from . import _mapping as m
from . import _prompt as p
from ._resources import ClientRead, read_resource
from ._session_state import PromptState, SessionState

__all__ = ["send_prompt", "settle"]

logger = logging.getLogger("trio_agents.acp")


def send_prompt(session: SessionState, prompt: PromptState, text: str) -> None:
    """Queue `text` as the prompt's message to the session's agent, noting where its turn's
    records start. Raises JsonRpcError (internal) when the agent is closed."""
    agent = session.handle.agent
    prompt.first_record = len(agent.session)
    try:
        prompt.message_id = agent.send(text)
    except AgentClosedError as exc:
        raise rpc.JsonRpcError.internal(f"prompt was not queued: {exc}") from None
    # Its outcome (its turn's end, or its drop) ends the wait for its answer (D532).
    session.outcomes.watch(prompt.message_id)


async def settle(
    session: SessionState,
    prompt: PromptState,
    store: SessionStore,
    client_read: Callable[[SessionState], ClientRead | None],
    sent: Callable[[], None] | None = None,
) -> dict[str, Any] | rpc.JsonRpcError:
    """Send the prompt if its links had to be read first (each through `client_read` of the
    session, if that gives a reader; then `sent()`, if given), wait until its agent has
    settled and `store` has committed every record of its turn (rule L9), and return its
    answer (its stop reason,
    and the tokens its model calls used when they said), or the error to answer instead.
    Frees the session's prompt slot. Always a checkpoint.

    The commit is the store's batch: prompts settling together share it."""
    agent = session.handle.agent
    try:
        if prompt.message_id is None:
            text = await _read_links(session, prompt, client_read)
            if prompt.cancel_requested:
                # Cancelled (or the connection closed) while its links were read: it never
                # reaches the agent.
                return {"stopReason": "cancelled"}
            try:
                send_prompt(session, prompt, text)
            except rpc.JsonRpcError as exc:
                return exc
            if sent is not None:
                sent()
        await _over(session, prompt)
        try:
            committer = agent.session.committer
            if committer is None or not committer.committed():
                # Idle promises the finished turns durable (rule L7): a flush is only
                # needed for what a store could not commit, or was appended since, or for
                # a session already detached from its store (no committer to ask). Skipping
                # it spares a schedule point, which lets the answer share the turn's last
                # update's write (D372).
                await store.flush(agent.session)
        except TrioAgentsError as exc:
            # The turn ran but is not stored: never acknowledge it as a stop reason.
            logger.error("the turn of session %s was not stored: %s", session.id, exc)
            detail = f"the turn ended but was not stored: {describe(exc)}"
            return rpc.JsonRpcError(rpc.INTERNAL_ERROR, detail)
    finally:
        session.prompt = None
    assert prompt.message_id is not None
    records = agent.session.records_since(prompt.first_record)
    reason = m.stop_reason(records, prompt.message_id, cancel_requested=prompt.cancel_requested)
    if isinstance(reason, rpc.JsonRpcError):
        return reason
    usage = m.turn_usage(records)
    return {"stopReason": reason} | ({"usage": usage} if usage is not None else {})


async def _read_links(
    session: SessionState,
    prompt: PromptState,
    client_read: Callable[[SessionState], ClientRead | None],
) -> str:
    read: dict[str, str] = {}
    for part in prompt.parts:
        if isinstance(part, p.Link) and part.uri not in read:
            read[part.uri] = await read_resource(
                session, part.uri, through_client=client_read(session)
            )
    return p.compose(prompt.parts, read)


async def _over(session: SessionState, prompt: PromptState) -> None:
    """Wait until the prompt's turn has ended or it was dropped: its outcome (D532); or, as
    a backstop for an end the records do not show (its agent closed before its turn
    started), until its agent settles. Prompts queued behind it do not hold its answer."""
    async with trio.open_nursery() as nursery:

        async def first(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(first, prompt.over.wait)
        nursery.start_soon(first, session.handle.agent.wait_idle)
