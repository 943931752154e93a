"""Steering and queueing over ACP (design D530-D533): a prompt given while a turn may run,
by the proposal's `session/inject` (`mode` `queue` or `steer`, behind the unstable
capability `initialize` advertises) or by our extension methods `_trio-agents/steer` and
`_trio-agents/queue`, mapped onto the agent's `steer` and `send`.

The request is answered at once with a receipt, as the proposal answers it: the prompt's
`messageId` and how it was taken (`delivery`: `steering` into the running turn, `queued`
behind other work, `started` a turn of its own). What became of it comes later, once, as
the `_trio-agents/prompt_outcome` notification (`_outcomes`). Admitted synchronously as the
server reads the request, like `session/prompt`, so two of them and a cancel keep the order
the client sent them in (the queue-ordering race steering elsewhere shipped with).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._agent._status import AgentStatus
from .._errors import AgentClosedError
from . import _jsonrpc as rpc
from . import _prompt as p
from ._session_state import SessionState

__all__ = ["INJECT_METHODS", "inject"]

INJECT_METHODS: Mapping[str, str | None] = {
    "session/inject": None,  # the mode is in the params
    "_trio-agents/steer": "steer",
    "_trio-agents/queue": "queue",
}

# A link is not read for a steer or a queued prompt: reading it would let a later request
# overtake this one. The model is told the link, and why it was not read.
_LINK_NOTE = "links in a steered or queued prompt are not read; ask in a prompt of its own"


def inject(session: SessionState, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Give the agent the prompt of `method`'s `params` (checked by `_params`), watch it
    for its outcome, and return the receipt. Raises JsonRpcError (internal) when the agent
    is closed."""
    mode = INJECT_METHODS[method] or str(params["mode"])
    parts = p.blocks(params)
    read = {part.uri: p.resource_note(part.uri, _LINK_NOTE)
            for part in parts if isinstance(part, p.Link)}  # fmt: skip
    text = p.compose(parts, read)
    agent = session.handle.agent
    busy = agent.status is AgentStatus.RUNNING or bool(agent.pending)
    try:
        mid = agent.steer(text) if mode == "steer" else agent.send(text)
    except AgentClosedError as exc:
        raise rpc.JsonRpcError.internal(f"prompt was not taken: {exc}") from None
    session.outcomes.watch(mid)
    kind = next((k for m, k in agent.pending if m == mid), None)
    delivery = "steering" if kind == "steering" else "queued" if busy else "started"
    return {"messageId": mid, "delivery": delivery}
