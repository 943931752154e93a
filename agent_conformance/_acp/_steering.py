"""The ACP machine's steering and queueing (rules P21-P23), on an agent that advertises the
unstable capability `agentCapabilities._meta.unstable_session_inject` (the proposal
`session/inject`, agentclientprotocol/agent-client-protocol#1261; design D534).

One step: a prompt whose model call is held; while it is held, a prompt steered into its
turn and one queued behind it, each by `session/inject` or by the method the capability
names for it (`methods.steer`, `methods.queue`); then either the held call is released
(the turn goes on) or the prompt is cancelled. What it checks:

- P21: released, the turn's next model request, made before the prompt is answered, holds
  the steered prompt;
- P22: released, the queued prompt reaches the model only after that turn's last reply, as a
  turn of its own;
- P23: each steered or queued prompt gets a receipt with its `messageId` and, once, its
  outcome (the notification the capability names): `answered` with a stop reason, or
  `dropped` with a reason; after a cancel, neither reaches the model and both are dropped
  by the time the cancelled prompt has answered (a short grace allowed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from .._machine import ConformanceMachine, rule
from . import _wire as wire
from ._client import AgentProcess, Answer
from ._endpoint import Hold, Say, ScriptedEndpoint
from ._properties import INJECTED_NEVER_LOST, QUEUED_RUNS_NEXT, STEER_REACHES_TURN

__all__ = ["CAPABILITY", "OUTCOME_GRACE", "Steering"]

CAPABILITY = "unstable_session_inject"
OUTCOME_GRACE = 2.0  # seconds an outcome may trail what settled it (an answer, a turn's end)


class Steering(ConformanceMachine):
    """The P21-P23 rule of `AcpMachine`, whose state it uses."""

    steering: Mapping[str, Any] | None
    """What `initialize` advertised under the capability, or None."""

    if TYPE_CHECKING:  # of `AcpMachine`
        agent: AgentProcess
        log: list[str]

        @property
        def endpoint(self) -> ScriptedEndpoint: ...

        def _live(self) -> list[Any]: ...
        def _pick(self, index: int) -> Any: ...
        def _token(self, session: Any) -> str: ...
        def _unanswered(self, agent: AgentProcess, what: str) -> NoReturn: ...
        def _expect_cancelled(
            self, session: Any, token: str, answer: Answer | None, *, release: bool = True
        ) -> None: ...
        async def _send_prompt(
            self,
            session: Any,
            token: str,
            then: bytes = b"",
            blocks: Sequence[dict[str, Any]] = (),
        ) -> int: ...

    @precondition(lambda self: self.steering is not None and bool(self._live()))
    @rule(session=st.integers(0, 2), cancel=st.booleans(), extension=st.booleans())
    def steer_and_queue(self, session: int, cancel: bool, extension: bool) -> None:
        """A held prompt, one prompt steered into its turn and one queued behind it (by
        `session/inject`, or by the capability's own methods when `extension`), then the
        turn released or cancelled."""
        chosen = self._pick(session)
        self.host.call(self._steer_and_queue, chosen, cancel, extension)
        self.log.append("steer-queue-" + ("cancel" if cancel else "release"))

    async def _steer_and_queue(self, session: Any, cancel: bool, extension: bool) -> None:
        agent, endpoint = self.agent, self.endpoint
        first, steered, queued = self._token(session), self._token(session), self._token(session)
        endpoint.scripts[first] = (Hold(f"partial {first} streaming"),)
        endpoint.scripts[steered] = (Say(f"reply {steered} done"),)
        endpoint.scripts[queued] = (Say(f"reply {queued} done"),)
        request_id = await self._send_prompt(session, first)
        await agent.unless_exited(agent.target.timeout, endpoint.held, first)
        steer_id = await self._give(session.id, steered, "steer", extension)
        queue_id = await self._give(session.id, queued, "queue", extension)
        if cancel:
            await agent.notify("session/cancel", {"sessionId": session.id})
            answer = await agent.answer(request_id)
            self._expect_cancelled(session, first, answer)
            for token, mid in ((steered, steer_id), (queued, queue_id)):
                told = await self._outcome(session.id, token, mid)
                _expect(
                    told.get("outcome") == "dropped" and bool(told.get("reason")),
                    f"the prompt {token}, given while the cancelled turn ran, was told {told} "
                    "after session/cancel; expected it dropped with a reason",
                )
                _expect(
                    not endpoint.calls(token) and token not in "".join(endpoint.bodies),
                    f"the prompt {token} reached the model after session/cancel dropped it",
                )
            return
        endpoint.release(first)
        answer = await agent.answer(request_id)
        if answer is None:
            self._unanswered(agent, f"session/prompt {first} (session {session.id})")
        bodies = list(endpoint.bodies)  # what the model was shown before the answer
        STEER_REACHES_TURN.check(
            any(first in body and steered in body for body in bodies),
            lambda: (
                f"the prompt {steered}, steered into the turn of {first} while its model call "
                f"was held, never reached the model before {first} was answered "
                f"({answer.result if answer else None})"
            ),
        )
        # Its turn runs after that one: it may take as long as any turn.
        told = await self._outcome(session.id, queued, queue_id, agent.target.timeout)
        # The turn's last reply answered the steer. Whether the queued prompt's first model
        # request follows it is read from that request's history, not from when the answer
        # arrived: the next turn may well call the model before the answer is written.
        last_reply = f"reply {steered} done"
        holding = [body for body in endpoint.bodies if queued in body]
        QUEUED_RUNS_NEXT.check(
            not holding or last_reply in holding[0],
            lambda: (
                f"the prompt {queued}, queued while the turn of {first} ran, reached the model "
                f"before that turn's last reply ({last_reply!r}): it was merged into that turn"
            ),
        )
        QUEUED_RUNS_NEXT.check(
            bool(endpoint.calls(queued)) and told.get("outcome") == "answered",
            lambda: (
                f"the prompt {queued}, queued behind {first}, did not run as a turn of its own "
                f"after it (its outcome: {told}; model calls for it: "
                f"{len(endpoint.calls(queued))})"
            ),
        )
        for token, mid in ((steered, steer_id), (queued, queue_id)):
            told = await self._outcome(session.id, token, mid)
            _expect(
                told.get("outcome") == "answered" and told.get("stopReason") == "end_turn",
                f"the prompt {token}, whose turn ended, was told {told}; expected it answered "
                "with stopReason end_turn",
            )
        session.turns.append((queued, f"reply {queued} done"))

    async def _give(self, session_id: str, token: str, mode: str, extension: bool) -> str:
        """Steer or queue the prompt `token`; its message id from the receipt (P23)."""
        agent = self.agent
        assert self.steering is not None
        prompt = [{"type": "text", "text": f"{token}: go"}]
        methods = self.steering.get("methods")
        method = wire.dig(methods, mode) if extension else None
        if isinstance(method, str):
            params: dict[str, Any] = {"sessionId": session_id, "prompt": prompt}
        else:
            method = "session/inject"
            params = {"sessionId": session_id, "prompt": prompt, "mode": mode}
        answer = await agent.answer(await agent.start_request(method, params))
        if answer is None:
            self._unanswered(agent, f"{method} {token}")
        mid = wire.dig(answer.result, "messageId") if answer.error is None else None
        INJECTED_NEVER_LOST.check(
            isinstance(mid, str),
            lambda: (
                f"{method} ({mode}) {token} of session {session_id}, on an agent that "
                f"advertises {CAPABILITY}, was answered {answer.error or answer.result}; "
                "expected a receipt with its messageId"
            ),
        )
        assert isinstance(mid, str)
        return mid

    async def _outcome(
        self, session_id: str, token: str, message_id: str, seconds: float = OUTCOME_GRACE
    ) -> Mapping[str, Any]:
        """The one outcome told for `message_id` (P23), waiting up to `seconds` for it."""
        agent = self.agent

        def told() -> list[Mapping[str, Any]]:
            return [
                params
                for _, method, params in agent.notes
                if method == self._outcome_method()
                and params.get("sessionId") == session_id
                and params.get("messageId") == message_id
            ]

        await agent.wait_until(seconds, lambda: bool(told()))
        found = told()
        INJECTED_NEVER_LOST.check(
            len(found) == 1,
            lambda: (
                f"the prompt {token} (messageId {message_id}) of session {session_id} was "
                + ("never told an outcome" if not found else f"told {len(found)} outcomes")
                + f" ({self._outcome_method()})"
            ),
        )
        return found[0]

    def _outcome_method(self) -> str:
        method = (self.steering or {}).get("outcome")
        return method if isinstance(method, str) else "_trio-agents/prompt_outcome"


def _expect(holds: bool, message: str) -> None:
    """P23 holds, or fails with `message` (made either way: it is cheap, and a loop's
    values are bound at once)."""
    INJECTED_NEVER_LOST.check(holds, lambda: message)
