"""The ACP machine's v2 rule (P24-P27): a second connection to the agent, whose `initialize`
asks for protocol 2, and one turn on it per step.

The run's preflight asks once whether the agent speaks v2 (D527): one that answers 1 is
v1-only, the rule is never drawn, and the report says why P25-P27 were not checked. On one
that answers 2, the first step of an example that draws the rule starts a second agent
process (its own directories), asks for protocol 2 and opens a session in a drawn mode; that
connection is held to ACP v2's schema and update kinds (P24) and to rules P25-P27: the
prompt answered with a receipt while its model's stream is held, the receipt's message in
the conversation, the turn told as `running` then `idle` with the stop reason rule P2 gives,
model output only while the state says the turn runs, and a resume from the start that
replays each prompt under its receipt's id, then the state.

Each step is one scenario: a plain turn, one with a resource link, a turn cut at the token
limit, one with a shell tool call, one whose tool call's permission request is allowed or
rejected, a held turn cancelled by `session/cancel` or by `session/close` (after which the
next step opens a new session on the connection), the mode switched, or the session closed
and resumed. The v1 connection of the example is not touched.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, NoReturn, cast, get_args

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from .._machine import ConformanceMachine, rule
from . import _wire as wire
from ._client import AcpTarget, AgentProcess, Answer, Update
from ._endpoint import Cut, Hold, Say, ScriptedEndpoint, Shell, Step
from ._properties import (
    PROPERTIES,
    REQUEST_ANSWERED,
    V2_NEGOTIATED,
    V2_PROPERTIES,
    V2_RECEIPT,
    V2_RESUME_REPLAYS,
    V2_STATE_TRUE,
    V2_TURN_ENDS,
    V2_USER_MESSAGE,
    V2_WIRE,
)

__all__ = ["SCENARIOS", "ProtocolV2", "Scenario", "v1_rules_drawn", "v2_rule_drawn"]

Scenario = Literal[
    "plain", "link", "cut", "tool", "permission-allow", "permission-reject", "cancel",
    "close", "config", "resume",
]  # fmt: skip
SCENARIOS: tuple[Scenario, ...] = get_args(Scenario)
V2_NAMES: Final = frozenset(p.name for p in V2_PROPERTIES)
_NOT_V2: Final = frozenset(p.name for p in PROPERTIES) - V2_NAMES
INITIALIZE: Final = {
    "protocolVersion": 2,
    "info": {"name": "trio-agents-conformance", "version": "1"},
    "capabilities": {},
}
MODEL_OUTPUT: Final = frozenset(
    {"agent_message_chunk", "agent_message", "agent_thought_chunk", "agent_thought"}
)
QUIET = 0.15  # real seconds a cancelled turn's session must stay silent after its idle
_HELD: Final = frozenset({"plain", "link", "cancel", "close"})


@dataclass
class V2Connection:
    """The example's v2 connection: its agent process, and the session its turns run in
    (None before the first, and after a close)."""

    agent: AgentProcess
    session_id: str | None = None
    checked: int = 0  # its updates whose kind was checked (P24)
    receipts: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    """By session, the messageId of each receipt, in order: what a replay must restate."""
    config: list[Mapping[str, Any]] = field(default_factory=list[Mapping[str, Any]])
    """The session's config options, as session/new answered them."""
    closed: str | None = None
    """The session it last closed."""


class ProtocolV2(ConformanceMachine):
    """The v2 rule of `AcpMachine`, whose state and helpers it uses."""

    v2_offered: ClassVar[bool | None] = None
    """Whether the agent answered protocol 2 when the run's preflight asked (None: not
    asked). Known before the search starts, so the rules a search may draw stay the same
    from example to example (Hypothesis requires it)."""
    v2: V2Connection | None
    evidence_of: AgentProcess | None
    """The process a failure's transcript is taken from, when not the v1 connection's."""

    if TYPE_CHECKING:  # of `AcpMachine`
        target: ClassVar[AcpTarget]
        waived: ClassVar[frozenset[str]]
        advertised: ClassVar[dict[str, Any]]
        dir: Path
        log: list[str]
        tokens: itertools.count[int]

        @property
        def endpoint(self) -> ScriptedEndpoint: ...

        def _placeholders(self, directory: Path) -> dict[str, str]: ...
        async def _start_agent(self, agent: AgentProcess) -> None: ...
        def _end_of_input(self, agent: AgentProcess) -> None: ...
        def _raise_found(self, agent: AgentProcess) -> None: ...
        def _unanswered(self, agent: AgentProcess, what: str) -> NoReturn: ...
        def _ask(
            self, agent: AgentProcess, method: str, params: Mapping[str, Any], what: str = ""
        ) -> Answer: ...

    def _v2_drawn(self) -> bool:
        return type(self).v2_offered is not False  # and a v2 property enforced: rule_drawn

    def rule_drawn(self, name: str) -> bool:
        """The v2 rule while a v2 property is enforced; the others (v1's) while any other
        is: `--only P24,P25,P26,P27` checks v2 alone, and no v1 rule is drawn."""
        waived = type(self).waived
        return v2_rule_drawn(waived) if name == "v2_turn" else v1_rules_drawn(waived)

    @precondition(lambda self: self._v2_drawn())
    @rule(scenario=st.sampled_from(SCENARIOS), pick=st.integers(0, 7))
    def v2_turn(self, scenario: Scenario, pick: int = 0) -> None:
        """One turn on the example's v2 connection (opened, and asked for protocol 2, by the
        first such step); `pick` chooses the mode a `config` step switches to."""
        connection = self._v2_connection()
        if connection is None:
            self.log.append("v2-not-offered")
            return
        self.evidence_of = connection.agent
        session_id = self._v2_session(connection)
        if session_id is None:
            self.log.append("v2-session-limit")
            return
        if scenario == "config":
            # A mode switched, then a turn with a tool call in it: every mode's states must
            # be true, one that asks nothing included (P26).
            self._v2_config(connection, session_id, pick)
            self._check_kinds(connection)
            self._v2_prompt(connection, session_id, "tool")
        elif scenario == "resume":
            self._v2_resume(connection, session_id)
        else:
            self._v2_prompt(connection, session_id, scenario)
        self._raise_found(connection.agent)
        self._check_kinds(connection)
        self.evidence_of = None
        self.log.append(f"v2-{scenario}")

    def _v2_prompt(self, connection: V2Connection, session_id: str, scenario: Scenario) -> None:
        token = f"acp-check-{next(self.tokens)}"
        self.endpoint.scripts[token] = _script(scenario, token)
        if scenario == "link":
            (connection.agent.workdir / f"{token}.txt").write_text(f"linked {token}\n")
        try:
            self.host.call(self._v2_turn, connection, session_id, token, scenario)
        finally:
            self.endpoint.release(token)

    # -- the connection ------------------------------------------------------------------

    def probe_v2(self) -> None:
        """Ask for protocol 2 on a second connection, and note whether the agent speaks it
        (the preflight's, once a run)."""
        if v2_rule_drawn(type(self).waived):
            self._v2_connection(probing=True)

    def _v2_connection(self, *, probing: bool = False) -> V2Connection | None:
        if self.v2 is not None:
            return self.v2
        directory = self.dir / "v2"
        agent = AgentProcess(
            type(self).target, self._placeholders(directory), directory, type(self).waived
        )
        agent.asked_version = 2
        self.evidence_of = agent
        self.host.call(self._start_agent, agent)
        self.v2 = V2Connection(agent)
        answer = self._ask(agent, "initialize", INITIALIZE, " asking for protocol 2")
        version = wire.dig(answer.result, "protocolVersion") if answer.error is None else None
        negotiated = type(version) is int and 1 <= version <= 2
        known_broken = not negotiated and V2_NEGOTIATED.name in type(self).waived
        if known_broken:
            version = None  # found broken in an earlier pass: no v2 to check with it
        V2_NEGOTIATED.check(
            negotiated or known_broken,
            lambda: (
                f"initialize asking for protocolVersion 2 was answered "
                f"{answer.error or answer.result}; an agent answers the highest version it "
                "speaks at or below the one asked (1 or 2), never an error"
            ),
        )
        self._raise_found(agent)
        offered = version == 2
        if probing:
            type(self).v2_offered = offered
            type(self).advertised["protocol 2"] = offered
        if not offered:
            # It speaks v1 only: that connection has nothing more to show.
            self.v2 = None
            self._end_of_input(agent)
            self.evidence_of = None
            return None
        return self.v2

    def _v2_session(self, connection: V2Connection) -> str | None:
        """The connection's session: a new one when it has none. An agent that refuses a
        second session/new in one process (a limit, D482) gets the one it closed resumed
        instead; None when it refuses that too."""
        if connection.session_id is not None:
            return connection.session_id
        agent = connection.agent
        answer = self._ask(agent, "session/new", {"cwd": str(agent.workdir), "mcpServers": []})
        session_id = wire.dig(answer.result, "sessionId") if answer.error is None else None
        if not isinstance(session_id, str) and connection.closed is not None:
            closed: dict[str, Any] = {
                "sessionId": connection.closed,
                "cwd": str(agent.workdir),
                "mcpServers": [],
            }
            resumed = self._ask(agent, "session/resume", closed)
            if resumed.error is not None:
                return None  # one session a process, and no resume: nothing more to check
            connection.session_id = connection.closed
            return connection.closed
        if not isinstance(session_id, str):
            V2_NEGOTIATED.fail(
                f"the agent answered protocol 2, then session/new on that connection was "
                f"answered {answer.error or answer.result}; v2's `session` capability "
                "commits it to session/new"
            )
        connection.session_id = session_id
        connection.config = _objects(wire.dig(answer.result, "configOptions"))
        return session_id

    def _v2_config(self, connection: V2Connection, session_id: str, pick: int) -> None:
        """Switch the session's mode (its select option of category `mode`) to the offered
        value `pick` chooses: the turns after it run in that mode, and every frame of the
        switch is v2's (P24). An option of another category (a model) is left alone: the
        session's model must stay the scripted endpoint's."""
        option = next(
            (
                o
                for o in connection.config
                if o.get("type") == "select" and o.get("category") == "mode"
            ),
            None,
        )
        values = _values(option.get("options")) if option is not None else []
        config_id = option.get("configId") if option is not None else None
        if not (values and isinstance(config_id, str)):
            return  # no mode to switch (or not v2's shape: P24 has said so)
        value = values[pick % len(values)]
        params = {"sessionId": session_id, "configId": config_id, "type": "id", "value": value}
        answer = self._ask(connection.agent, "session/set_config_option", params)
        options: object = wire.dig(answer.result, "configOptions") if answer.error is None else None
        if isinstance(options, list):
            connection.config = _objects(cast("object", options))

    def _v2_resume(self, connection: V2Connection, session_id: str) -> None:
        """A turn with a shell tool call (a history with a call in it to replay), then the
        session closed and resumed from the start: the replay restates each of its prompts
        with its receipt's id, then the session's state, before the answer; all of it v2
        (P24)."""
        agent = connection.agent
        self._v2_prompt(connection, session_id, "tool")
        self._check_kinds(connection)
        receipts = connection.receipts.get(session_id, [])
        self._ask(agent, "session/close", {"sessionId": session_id})
        connection.session_id, connection.closed = None, session_id
        start = agent.mark()
        params: dict[str, Any] = {
            "sessionId": session_id,
            "cwd": str(agent.workdir),
            "mcpServers": [],
            "replayFrom": {"type": "start"},
        }
        answer = self._ask(agent, "session/resume", params)
        self._raise_found(agent)
        V2_RESUME_REPLAYS.check(
            answer.error is None,
            lambda: (
                f"session/resume of closed v2 session {session_id} from the start was "
                f"answered {answer.error}; v2's `session` capability commits an agent to "
                "resume"
            ),
        )
        connection.session_id = session_id
        before = [
            u for u in agent.updates if u.session_id == session_id and start < u.seq < answer.seq
        ]
        replayed = {
            u.update.get("messageId")
            for u in before
            if u.update.get("sessionUpdate") in ("user_message", "user_message_chunk")
        }
        missing = [m for m in receipts if m not in replayed]
        V2_RESUME_REPLAYS.check(
            not missing,
            lambda: (
                f"session/resume of v2 session {session_id} from the start answered without "
                f"replaying the user message of {missing} (receipts of its earlier prompts; "
                f"replayed user messages: {sorted(str(m) for m in replayed)})"
            ),
        )
        last_replayed = max((u.seq for u in before if _state(u) == ""), default=start)
        V2_RESUME_REPLAYS.check(
            any(_state(u) and u.seq > last_replayed for u in before),
            lambda: (
                f"session/resume of v2 session {session_id} answered with no state_update "
                "after its replay; resume sends the session's state after any replay and "
                "before its answer"
            ),
        )

    def _check_kinds(self, connection: V2Connection) -> None:
        agent = connection.agent
        known = wire.update_kinds(2)
        fresh, connection.checked = agent.updates[connection.checked :], len(agent.updates)
        for update in fresh:
            V2_WIRE.held()
            kind = update.update.get("sessionUpdate")
            if isinstance(kind, str) and kind not in known and not kind.startswith("_"):
                V2_WIRE.fail(
                    f"a session/update of kind {kind!r} on a v2 connection: v2 has no such "
                    f"update (its kinds: {', '.join(sorted(known))}; an extension's begins "
                    f"with `_`): {wire.cut_value(dict(update.update))}"
                )

    # -- one turn --------------------------------------------------------------------------

    async def _v2_turn(
        self, connection: V2Connection, session_id: str, token: str, scenario: Scenario
    ) -> None:
        agent = connection.agent
        timeout = agent.target.timeout
        start = agent.mark()
        if scenario.startswith("permission"):
            agent.permission_answers[session_id] = [
                "allow" if scenario == "permission-allow" else "reject"
            ]
        prompt: list[dict[str, Any]] = [{"type": "text", "text": f"{token}: go"}]
        if scenario == "link":
            linked = agent.workdir / f"{token}.txt"
            uri = linked.as_uri()
            prompt.append({"type": "resource_link", "uri": uri, "name": linked.name})
        request_id = await agent.start_request(
            "session/prompt", {"sessionId": session_id, "prompt": prompt}
        )
        receipt = await agent.answer(request_id)
        if receipt is None:
            self._raise_found(agent)
            if agent.exited:
                self._unanswered(agent, f"session/prompt {token} (v2 session {session_id})")
            held = " while its model's stream was held" if scenario in _HELD else ""
            V2_RECEIPT.fail(
                f"session/prompt {token} of v2 session {session_id} got no answer within "
                f"{timeout:g} s{held}: a v2 agent answers a prompt with its receipt once it "
                "has accepted it, and tells the turn's end by an idle state_update"
            )
        message_id = self._check_receipt(receipt, token, session_id)
        connection.receipts.setdefault(session_id, []).append(message_id)
        closed: Answer | None = None
        if scenario in _HELD:
            # A release reaches only a stream already held: wait for it first.
            await agent.unless_exited(timeout, self.endpoint.held, token)
        if scenario in ("cancel", "close"):
            if scenario == "cancel":
                await agent.notify("session/cancel", {"sessionId": session_id})
            else:
                close_id = await agent.start_request("session/close", {"sessionId": session_id})
                closed = await agent.answer(close_id)
                connection.session_id, connection.closed = None, session_id
                if closed is None:
                    self._unanswered(agent, f"session/close of v2 session {session_id}")
        else:
            self.endpoint.release(token)
        idle = await _idle_after(agent, session_id, start, timeout)
        if idle is None:
            self._raise_found(agent)
            V2_TURN_ENDS.fail(
                f"no idle state_update of v2 session {session_id} followed prompt {token} "
                f"({scenario}) within {timeout:g} s; a v2 agent reports idle when the "
                "prompt's foreground work ends"
            )
        if scenario in ("cancel", "close"):
            # What a cancelled turn must not send, given the time to arrive (as P2's window).
            await agent.wait_until(QUIET, lambda: False)
        updates = [u for u in agent.updates if u.session_id == session_id and u.seq > start]
        self._check_turn(updates, idle, token, scenario, session_id, closed)
        self._check_inserted(updates, idle, message_id, token, session_id)
        self._check_states(
            updates, idle, token, session_id, cancelled=scenario in ("cancel", "close")
        )

    def _check_receipt(self, receipt: Answer, token: str, session_id: str) -> str:
        result = receipt.result
        message_id = wire.dig(result, "messageId")
        V2_RECEIPT.check(
            receipt.error is None
            and isinstance(message_id, str)
            and bool(message_id)
            and wire.dig(result, "stopReason") is None,
            lambda: (
                f"session/prompt {token} to idle v2 session {session_id} was answered "
                f"{receipt.error or result}; a v2 prompt's answer is its receipt: a "
                "non-empty messageId and no stop reason"
            ),
        )
        return str(message_id)

    def _check_turn(
        self,
        updates: Sequence[Update],
        idle: Update,
        token: str,
        scenario: Scenario,
        session_id: str,
        closed: Answer | None,
    ) -> None:
        states = [_state(u) for u in updates if u.seq < idle.seq]
        V2_TURN_ENDS.check(
            "running" in states or "requires_action" in states,
            lambda: (
                f"prompt {token}'s turn on v2 session {session_id} ended with an idle "
                "with no running (or requires_action) before it; a v2 agent reports "
                "running when foreground work starts"
            ),
        )
        reason = idle.update.get("stopReason")
        if scenario in ("cancel", "close"):
            expected = "cancelled"
            given = True
        else:
            calls = self.endpoint.calls(token)
            expected = "max_tokens" if calls and isinstance(calls[-1].step, Cut) else "end_turn"
            given = reason is not None
        how = {"cancel": "after session/cancel", "close": "after session/close"}.get(
            scenario, "once its model finished"
        )
        V2_TURN_ENDS.check(
            not given or reason == expected,
            lambda: (
                f"prompt {token}'s turn on v2 session {session_id} ended {how} with "
                f"{wire.cut_value(dict(idle.update))}; expected stopReason {expected!r}"
            ),
        )
        if closed is not None:
            V2_TURN_ENDS.check(
                idle.seq < closed.seq,
                lambda: (
                    f"session/close of v2 session {session_id} was answered before the "
                    f"cancelled idle of prompt {token}'s turn; the idle comes first"
                ),
            )

    def _check_inserted(
        self,
        updates: Sequence[Update],
        idle: Update,
        message_id: str,
        token: str,
        session_id: str,
    ) -> None:
        inserted = any(
            u.seq < idle.seq
            and u.update.get("sessionUpdate") in ("user_message", "user_message_chunk")
            and u.update.get("messageId") == message_id
            for u in updates
        )
        V2_USER_MESSAGE.check(
            inserted,
            lambda: (
                f"the receipt of prompt {token} named message {message_id!r}, and no "
                f"user_message of v2 session {session_id} carried it before the turn's idle"
            ),
        )

    def _check_states(
        self,
        updates: Sequence[Update],
        idle: Update,
        token: str,
        session_id: str,
        *,
        cancelled: bool,
    ) -> None:
        V2_STATE_TRUE.held()
        state = "running"
        for update in updates:
            kind = update.update.get("sessionUpdate")
            if kind == "state_update":
                state = _state(update)
                continue
            if kind not in MODEL_OUTPUT:
                continue
            if state == "requires_action":
                V2_STATE_TRUE.fail(
                    f"v2 session {session_id} sent {kind} while its last state was "
                    f"requires_action (prompt {token}); an agent reports running when "
                    f"progress resumes: {wire.cut_value(dict(update.update))}"
                )
            if cancelled and update.seq > idle.seq:
                V2_STATE_TRUE.fail(
                    f"v2 session {session_id} sent {kind} after the cancelled idle of prompt "
                    f"{token}'s turn: {wire.cut_value(dict(update.update))}"
                )


def v1_rules_drawn(waived: frozenset[str]) -> bool:
    """Whether v1's rules are drawn when the properties `waived` are: while one they serve
    (any but v2's) is enforced."""
    return not waived >= _NOT_V2


def v2_rule_drawn(waived: frozenset[str]) -> bool:
    """Whether the v2 rule is drawn when the properties `waived` are (on an agent that
    speaks v2): while a v2 property is enforced."""
    return not waived >= V2_NAMES


def _objects(value: object) -> list[Mapping[str, Any]]:
    """The JSON objects of a JSON list (none when it is not a list)."""
    items = cast("list[object]", value) if isinstance(value, list) else []
    return [cast("Mapping[str, Any]", item) for item in items if isinstance(item, Mapping)]


def _values(options: object) -> list[str]:
    """The values a select option offers, grouped or not."""
    values: list[str] = []
    for entry in _objects(options):
        value: object = entry.get("value")
        if isinstance(value, str):
            values.append(value)
        values.extend(_values(entry.get("options")))  # a group's
    return values


def _script(scenario: Scenario, token: str) -> tuple[Step, ...]:
    reply = f"reply {token} done"
    if scenario in _HELD:
        return (Hold(reply),)
    if scenario == "cut":
        return (Cut(f"reply {token} cut"),)
    if scenario == "tool":
        return (Shell("true"), Say(reply))
    # A permission scenario: a command whose request the client answers.
    return (Shell(f"echo {token}"), Say(reply))


def _state(update: Update) -> str:
    state = update.update.get("state")
    return (
        state
        if update.update.get("sessionUpdate") == "state_update" and isinstance(state, str)
        else ""
    )


def _is_idle_after(update: Update, session_id: str, start: int) -> bool:
    return update.session_id == session_id and update.seq > start and _state(update) == "idle"


async def _idle_after(
    agent: AgentProcess, session_id: str, start: int, seconds: float
) -> Update | None:
    """The first idle state_update of `session_id` after `start`, waiting up to `seconds`."""

    def found() -> Update | None:
        return next((u for u in agent.updates if _is_idle_after(u, session_id, start)), None)

    await agent.wait_until(seconds, lambda: found() is not None)
    REQUEST_ANSWERED.held()
    return found()
