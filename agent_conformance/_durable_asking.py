"""The durable machine's asking sessions (rules A14, A17): half the sessions it creates ask
before every call, and are resumed asking. A `QueuedApprover` answers each call at once with
an outcome drawn with the model's reply (`release_model`), and `always_then_resume` reaches
A17 across a resume in one rule: an "always" answer, a close, a resume, the tool again.

What the checks read is in `_durable_checks` (`check_remembered`) and the machine's
committed points (an allowing `tool/approval` durable before its call runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import (
    AgentHandle,
    AgentStatus,
    Approval,
    ApprovalPolicy,
    DecisionOutcome,
    Record,
    ToolCall,
)
from trio_agents.testing import GateTool, ScriptedModel, TrioHost, reply, tool_step

from ._approver import QueuedApprover
from ._machine import ConformanceMachine, rule
from ._vocabulary import TOOL_CALL

__all__ = ["ALWAYS", "ANSWERS", "AskingSessions"]

ALWAYS: tuple[DecisionOutcome, ...] = ("allow_always", "reject_always")

# What an asking agent's approver answers, call by call (A14, A17).
ANSWERS: tuple[DecisionOutcome, ...] = (
    "allow_always",
    "reject_always",
    "allow_once",
    "reject_once",
)


class AskingSessions(ConformanceMachine):
    """The durable machine's asking sessions and their rule.

    What it uses of the machine: `host`, `handles`, `models`, `gates`, `trace`, `_calls`,
    `_settle`, `_forget`, `_resume_stored` and `_check_call_ids`.
    """

    handles: dict[str, AgentHandle]
    models: dict[str, ScriptedModel]
    gates: dict[str, GateTool]
    trace: list[str]
    _calls: int

    def __init__(self, host: TrioHost) -> None:
        super().__init__(host)
        self.approvers: dict[str, QueuedApprover] = {}  # of the agents that ask (A14, A17)
        self.asking: set[str] = set()  # the sessions whose agents ask, created and resumed
        # Per session, from which record on its agents remembered "always" answers: a
        # created agent may not (its always-answers are recorded all the same), a resumed
        # one does, and must take up the latest per tool (A17).
        self.policies: dict[str, list[tuple[int, bool]]] = {}

    if TYPE_CHECKING:

        def _settle(self) -> None: ...
        def _forget(self, sid: str, records: Sequence[Record], *, clean: bool) -> None: ...
        def _resume_stored(
            self, sid: str, cancel_first: bool, remembers: bool | None = None
        ) -> None: ...
        def _check_call_ids(
            self, sid: str, asked: Sequence[str], before: set[str], new: Sequence[Record]
        ) -> None: ...

    def _approval(self, sid: str, asks: bool, remembers: bool = True) -> Approval | None:
        """An agent that asks before each call (A14), remembering "always" answers or not
        (A17), answered from the queue `release_model` fills; None for one that does not
        ask."""
        if not asks:
            return None
        approver = self.approvers[sid] = QueuedApprover()
        return Approval(ApprovalPolicy(remembers=remembers), approver)

    def _idle_asking(self) -> list[str]:
        return sorted(
            sid
            for sid, handle in self.handles.items()
            if sid in self.asking
            and handle.agent.status == AgentStatus.IDLE
            and not handle.agent.parked
        )

    @precondition(lambda self: bool(self._idle_asking()))
    @rule(data=st.data(), first=st.sampled_from(ALWAYS), then=st.sampled_from(ALWAYS))
    def always_then_resume(
        self, data: st.DataObject, first: DecisionOutcome, then: DecisionOutcome
    ) -> None:
        """An idle asking agent's turn calls the gate in two steps; its approver answers
        `first`, then `then` (asked only if the agent's policy does not remember); the agent
        is closed, resumed (remembering) and its next step calls the gate again: that call
        must be decided by remembered, with the latest always-answer the session holds
        (A17, checked by `check_remembered` on every settle)."""
        sid = data.draw(st.sampled_from(self._idle_asking()), label="sid")
        self.approvers[sid].answers.extendleft([then, first])
        self.host.run_sync(self.handles[sid].agent.send, "call the gate twice")
        self._settle()
        call_id = f"{sid}-always-{self._calls}"
        self._calls += 2
        steps = [tool_step(ToolCall(f"{call_id}-{n}", "gate", {})) for n in (1, 2)]
        for step in (*steps, None):
            if self.gates[sid].held:
                self.host.run_sync(self.gates[sid].release, "done")
                self._settle()
            if self.models[sid].held:
                self.host.run_sync(self.models[sid].release, step or reply("done"))
                self._settle()
        call_id += "-1"
        handle = self.handles[sid]
        self.host.call(handle.aclose)
        self._forget(sid, handle.agent.session.records, clean=True)
        self.trace.append(f"always {first} {then} {sid}, closed")
        self._settle()
        self._resume_stored(sid, cancel_first=False, remembers=True)
        if self.models[sid].held:
            # The same id as before the close, as a model whose ids restart after a reload
            # sends it: recorded with a suffix (A13).
            session = self.handles[sid].agent.session
            before = {str(r.data["call_id"]) for r in session.records if r.type == TOOL_CALL}
            known = len(session)
            self.host.run_sync(self.models[sid].release, tool_step(ToolCall(call_id, "gate", {})))
            self._settle()
            self._check_call_ids(sid, [call_id], before, session.records[known:])
