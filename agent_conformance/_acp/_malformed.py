"""The ACP machine's malformed frames (rule P5): a line that is not JSON, one whose only
fault is a `NaN` (RFC 8259 has no such number, Python's parser reads one), a frame without
an id whose method is not a string (JSON-RPC 2.0's own example of an invalid request), an
unknown method, bad params, an unknown session. Each gets a JSON-RPC error, with its id
when one can be read and id null otherwise, and the agent keeps serving."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any, Literal, get_args

from hypothesis import strategies as st

from .._machine import rule
from . import _wire as wire
from ._client import AgentProcess, Answer
from ._listing import SessionListing
from ._properties import MALFORMED_ANSWERED, MALFORMED_SURVIVES

__all__ = ["MALFORMED", "NULL_ERROR_WAIT", "Malformed", "MalformedFrames"]

NULL_ERROR_WAIT = 2.0  # real seconds: a parse error is answered at once, or never
Malformed = Literal[
    "not-json", "not-json-number", "method-not-string", "unknown-method", "bad-params",
    "unknown-session",
]  # fmt: skip
MALFORMED: tuple[Malformed, ...] = get_args(Malformed)


class MalformedFrames(SessionListing):
    """The P5 rule of `AcpMachine`, whose state it uses: `agent`, `tokens`, `log`."""

    if TYPE_CHECKING:  # of `AcpMachine`
        tokens: itertools.count[int]

        def _raise_found(self, agent: AgentProcess) -> None: ...

    # Several kinds a step (D475): a frame costs a line and an answer, while a step of
    # one kind left most examples without the kind an agent mishandles.
    @rule(kinds=st.lists(st.sampled_from(MALFORMED), min_size=1, unique=True))
    def malformed(self, kinds: list[Malformed]) -> None:
        """Malformed frames, one after another: each gets a JSON-RPC error and the agent
        keeps serving."""
        for kind in kinds:
            self.host.call(self._malformed, kind)
            self.log.append(f"malformed-{kind}")

    async def _malformed(self, kind: Malformed) -> None:
        agent = self.agent
        request_id: int | str | None = None
        answer: Answer | None
        if kind in ("not-json", "method-not-string"):
            # No id can be read (a cut line; a notification whose method is not a string,
            # JSON-RPC 2.0's own example): the error has id null.
            before = len(agent.null_errors)
            await agent.send(
                b'{"jsonrpc": "2.0", "id": "broken", "method": "session/new"\n'
                if kind == "not-json"
                else b'{"jsonrpc": "2.0", "method": 1, "params": "bar"}\n'
            )
            got = await agent.wait_until(
                min(agent.target.timeout, NULL_ERROR_WAIT), lambda: len(agent.null_errors) > before
            )
            answer = agent.null_errors[-1] if got else None
        elif kind == "not-json-number":
            answer = await self._not_json_number(agent)
        else:
            request_id = f"malformed-{next(self.tokens)}"
            if kind == "unknown-method":
                data = wire.frame(id=request_id, method="no/such_method", params={})
            elif kind == "bad-params":
                data = wire.frame(id=request_id, method="session/prompt", params={"prompt": 7})
            else:
                params: dict[str, Any] = {"sessionId": "no-such-session", "prompt": []}
                data = wire.frame(id=request_id, method="session/prompt", params=params)
            agent.expect(request_id, f"a malformed request ({kind})")
            await agent.send(data)
            answer = await agent.answer(request_id)
        if answer is None:
            # Whether it still serves decides which rule broke: a dead agent answers nothing,
            # and how slowly a loaded machine lets it die must not change the verdict.
            self._raise_found(agent)
            await self._still_serving(agent, kind)
            MALFORMED_ANSWERED.fail(
                f"a malformed frame ({kind}) got no JSON-RPC error within the timeout"
                + (" (none with id null)" if request_id is None else f" (id {request_id!r})")
            )
        MALFORMED_ANSWERED.check(
            answer.error is not None,
            lambda: (
                f"a malformed frame ({kind}) was answered with a result: "
                + wire.cut_value(answer.result)
            ),
        )
        await self._still_serving(agent, kind)

    async def _not_json_number(self, agent: AgentProcess) -> Answer | None:
        """A session/new whose params hold `NaN`, which JSON (RFC 8259) does not have: the
        line is not JSON, so it gets an error, with id null (or its id, read leniently),
        never a session."""
        request_id = f"malformed-{next(self.tokens)}"
        agent.expect(request_id, "a line holding NaN")
        before = len(agent.null_errors)
        params = json.dumps({"cwd": str(agent.workdir), "mcpServers": []})
        line = (
            f'{{"jsonrpc": "2.0", "id": "{request_id}", "method": "session/new", '
            f'"params": {params[:-1]}, "_meta": {{"n": NaN}}}}}}\n'
        )
        await agent.send(line.encode())
        await agent.wait_until(
            min(agent.target.timeout, NULL_ERROR_WAIT),
            lambda: len(agent.null_errors) > before or agent.answered(request_id),
        )
        if agent.answered(request_id):
            return await agent.answer(request_id)
        return agent.null_errors[-1] if len(agent.null_errors) > before else None

    async def _still_serving(self, agent: AgentProcess, kind: Malformed) -> None:
        ping = await agent.start_request("_trio_agents/ping", {})
        MALFORMED_SURVIVES.held()
        if await agent.answer(ping) is None:
            self._raise_found(agent)
            if agent.output_ended:
                await agent.wait_exit(agent.target.timeout)
            MALFORMED_SURVIVES.fail(
                f"after a malformed frame ({kind}) the next request got no answer; "
                f"{agent.describe_exit()}"
            )
