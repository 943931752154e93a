"""Rules A14-A18: asking before acting. Every test runs on the autojump MockClock (those over
SQLite on the real clock, which its worker thread needs); the approver is a `HeldApprover`
the test answers, so every interleaving below is chosen, not hoped for."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from agent_conformance._approver import HeldApprover
from trio_agents import (
    AgentOptions,
    Approval,
    ApprovalPolicy,
    ApprovalRequest,
    CancelRequested,
    Decision,
    Event,
    EventBus,
    MemoryStore,
    ModelChunk,
    ModelRequest,
    Session,
    SqliteStore,
    ToolContext,
    ToolStarted,
    open_agent,
    open_runtime,
)
from trio_agents._store._record_shape import shape_problem
from trio_agents.testing import ScriptedModel, reply, tool_step


class GatedCommits(MemoryStore):
    """Stores records at once, but counts them committed only through `flush`, which waits
    while `gate` is set to an unset Event (as tests/test_write_ahead.py's does)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: trio.Event | None = None
        self.commits = 0
        self._done: dict[str, int] = {}

    def _committed_all(self, session: Session) -> bool:
        return self._done.get(session.id, 0) >= len(session)

    async def flush(self, session: Session) -> None:
        target = len(session)
        self.commits += 1
        if self.gate is not None:
            await self.gate.wait()
        else:
            await trio.lowlevel.checkpoint()
        self._done[session.id] = max(self._done.get(session.id, 0), target)


class Probe:
    """A tool that counts its calls and takes `seconds` of trio time."""

    description = "counts its calls"
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    def __init__(self, name: str = "probe", seconds: float = 0.0) -> None:
        self.name = name
        self.seconds = seconds
        self.calls: list[str] = []

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        self.calls.append(context.call_id)
        await trio.sleep(self.seconds)
        return f"{self.name} ran"


def of(records: Any, kind: str) -> list[dict[str, Any]]:
    return [dict(r.data) for r in records if r.type == kind]


def kinds(records: Any) -> list[str]:
    return [r.type for r in records]


def asking(approver: Any, policy: Any = None) -> Approval:
    return Approval(policy if policy is not None else ApprovalPolicy(), approver)


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


# -- A14: a gated call runs only once allowed; each decision is recorded ----------------


async def test_a14_an_allowed_call_runs_after_its_approval_record() -> None:
    approver, probe, bus = HeldApprover(), Probe(), EventBus()
    events: list[Event] = []
    bus.connect(events.append)
    model = ScriptedModel([tool_step(("probe", {"x": 1}))])
    async with open_agent(
        model, tools=[probe], events=bus, session="s", approval=asking(approver)
    ) as agent:
        agent.send("go")
        await settle()
        (request,) = approver.requests
        call_id = request.call_id
        assert request == ApprovalRequest("s", call_id, 1, 1, "probe", {"x": 1})
        assert probe.calls == []
        assert not any(isinstance(e, ToolStarted) for e in events)
        approver.answer(Decision("allow_once", by="user"))
        await agent.wait_idle()
        assert probe.calls == [call_id]
        (approval,) = of(agent.session.records, "tool/approval")
        assert approval.keys() == {"call_id", "tool", "decision", "by", "at"}
        assert (approval["call_id"], approval["decision"], approval["by"]) == (
            call_id,
            "allow_once",
            "user",
        )
        order = kinds(agent.session.records)
        assert order.index("tool/call") < order.index("tool/approval") < order.index("tool/result")
        started = [e for e in events if isinstance(e, ToolStarted)]
        assert started == [ToolStarted("s", 1, 1, call_id, "probe")]
        assert of(agent.session.records, "turn/end")[-1]["reason"] == {"kind": "completed"}


async def test_a14_a_rejected_call_never_runs_and_the_turn_goes_on() -> None:
    approver, probe = HeldApprover(), Probe()
    model = ScriptedModel([tool_step(("probe", {})), reply("fine"), tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], approval=asking(approver)) as agent:
        agent.send("go")
        await settle()
        approver.answer(Decision("reject_once", by="user", note="not now"))
        await agent.wait_idle()
        assert probe.calls == []
        (result,) = of(agent.session.records, "tool/result")
        assert result["is_error"] is True
        assert result["rejected"] is True
        assert "interrupted" not in result
        assert result["content"] == (
            "the user rejected the call to 'probe'; it did not run (not now)"
        )
        # The model read the rejection and answered: the turn went on to its next step.
        assert len(model.requests) == 2
        assert model.requests[1].messages[-1].content == result["content"]
        assert of(agent.session.records, "turn/end")[-1]["reason"] == {"kind": "completed"}
        # A "once" answer holds once: the next call of the tool is asked again.
        agent.send("again")
        await settle()
        assert len(approver.requests) == 2
        approver.answer(Decision("allow_once"))
        await agent.wait_idle()
        assert len(probe.calls) == 1


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        (RuntimeError("the editor went away"), "it failed: RuntimeError: the editor went away"),
        ("yes", "it answered a str, not a Decision"),
        (None, "it answered a NoneType, not a Decision"),
    ],
)
async def test_a14_an_approver_that_raises_or_answers_junk_rejects_the_call(
    answer: object, note: str
) -> None:
    approver, probe = HeldApprover(), Probe()
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], approval=asking(approver)) as agent:
        agent.send("go")
        await settle()
        approver.answer(answer)
        await agent.wait_idle()
        assert probe.calls == []
        (approval,) = of(agent.session.records, "tool/approval")
        assert (approval["decision"], approval["by"], approval["note"]) == (
            "reject_once",
            "approver",
            note,
        )
        (result,) = of(agent.session.records, "tool/result")
        assert result["rejected"] is True
        assert of(agent.session.records, "turn/end")[-1]["reason"] == {"kind": "completed"}


class RaisingPolicy:
    remembers = True

    def __init__(self, verdict: object) -> None:
        self._verdict = verdict

    def verdict(self, request: ApprovalRequest) -> Any:
        if isinstance(self._verdict, BaseException):
            raise self._verdict
        return self._verdict


@pytest.mark.parametrize(
    ("policy", "note"),
    [
        (RaisingPolicy(KeyError("mode")), "the policy failed: KeyError: 'mode'"),
        (RaisingPolicy("maybe"), "the policy answered 'maybe'"),
        (ApprovalPolicy(ask=frozenset(), reject=frozenset({"probe"})), "the policy does not "
         "allow it"),
    ],
)  # fmt: skip
async def test_a14_a_policy_that_rejects_fails_or_answers_junk_rejects_without_asking(
    policy: Any, note: str
) -> None:
    approver, probe = HeldApprover(), Probe()
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], approval=asking(approver, policy)) as agent:
        agent.send("go")
        await agent.wait_idle()
        assert approver.requests == []
        assert probe.calls == []
        (approval,) = of(agent.session.records, "tool/approval")
        assert (approval["decision"], approval["by"], approval["note"]) == (
            "reject_once",
            "policy",
            note,
        )
        assert of(agent.session.records, "tool/result")[0]["rejected"] is True


async def test_a14_a_call_the_policy_allows_runs_unasked_and_unrecorded() -> None:
    approver, probe, other = HeldApprover(), Probe(), Probe("other")
    policy = ApprovalPolicy(ask=frozenset({"other"}))
    model = ScriptedModel([tool_step(("probe", {}), ("other", {}))])
    async with open_agent(model, tools=[probe, other], approval=asking(approver, policy)) as agent:
        agent.send("go")
        await settle()
        assert len(probe.calls) == 1
        assert other.calls == []
        assert [r.tool for r in approver.requests] == ["other"]
        approver.answer(Decision("allow_once"))
        await agent.wait_idle()
        assert [a["tool"] for a in of(agent.session.records, "tool/approval")] == ["other"]


async def test_a14_the_concurrent_calls_of_one_step_are_each_asked_and_recorded() -> None:
    approver, probe = HeldApprover(), Probe()
    model = ScriptedModel([tool_step(("probe", {"n": 1}), ("probe", {"n": 2}), ("probe", {}))])
    async with open_agent(model, tools=[probe], approval=asking(approver)) as agent:
        agent.send("go")
        await settle()
        first, second, third = approver.pending
        approver.answer(Decision("reject_once"), second)
        await settle()
        approver.answer(Decision("allow_once"), third)
        await settle()
        assert probe.calls == [third]
        approver.answer(Decision("allow_once"), first)
        await agent.wait_idle()
        approvals = of(agent.session.records, "tool/approval")
        assert [(a["call_id"], a["decision"]) for a in approvals] == [
            (second, "reject_once"),
            (third, "allow_once"),
            (first, "allow_once"),
        ]
        results = {r["call_id"]: r for r in of(agent.session.records, "tool/result")}
        assert results[second]["rejected"] is True
        assert results[first]["content"] == results[third]["content"] == "probe ran"


async def test_a14_the_approval_is_committed_before_the_tool_starts() -> None:
    store, approver, probe = GatedCommits(), HeldApprover(), Probe()
    session = Session("s")
    store.enter(session)
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(
        model, tools=[probe], session=session, approval=asking(approver)
    ) as agent:
        agent.send("go")
        await settle()
        assert approver.pending  # the calls' commit passed (no gate yet)
        store.gate = gate = trio.Event()
        commits = store.commits
        approver.answer(Decision("allow_once"))
        await settle()
        # Allowed, and the approval is recorded, but not committed: the tool waits.
        assert of(session.records, "tool/approval")[0]["decision"] == "allow_once"
        assert store.commits == commits + 1
        assert probe.calls == []
        gate.set()
        await agent.wait_idle()
        assert len(probe.calls) == 1


# -- A15: a cancel while a decision is pending ------------------------------------------


async def test_a15_a_cancel_while_a_decision_is_pending_ends_the_wait_at_once() -> None:
    approver, probe = HeldApprover(), Probe()
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], approval=asking(approver)) as agent:
        agent.send("go")
        await settle()
        (call_id,) = approver.pending
        assert agent.cancel("stop", cause="parent")
        await agent.wait_idle()
        assert approver.cancelled == [call_id]
        assert of(agent.session.records, "tool/approval") == []
        (result,) = of(agent.session.records, "tool/result")
        assert result["interrupted"] is True
        reason = of(agent.session.records, "turn/end")[-1]["reason"]
        assert reason == {"kind": "aborted", "reason": "stop", "cause": "parent"}
        assert probe.calls == []


async def test_a15_a_close_while_a_decision_is_pending_ends_the_wait() -> None:
    approver, probe = HeldApprover(), Probe()
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], approval=asking(approver)) as agent:
        agent.send("go")
        await settle()
        (call_id,) = approver.pending
    # Leaving the block closed the agent while the approver was asked.
    assert approver.cancelled == [call_id]
    records = agent.session.records
    assert of(records, "tool/approval") == []
    assert of(records, "tool/result")[0]["interrupted"] is True
    assert of(records, "turn/end")[-1]["reason"] == {"kind": "closed"}
    assert probe.calls == []


@pytest.mark.parametrize("decision_first", [True, False], ids=["decision-first", "cancel-first"])
@pytest.mark.parametrize("outcome", ["allow_once", "reject_always", "cancel"])
async def test_a15_a_decision_racing_a_cancel_is_ignored(
    decision_first: bool, outcome: Any
) -> None:
    approver, probe = HeldApprover(), Probe()
    approval = asking(approver)
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], approval=approval) as agent:
        agent.send("go")
        await settle()

        def answer() -> None:
            approver.answer(Decision(outcome))

        def cancel() -> None:
            assert agent.cancel("stop")

        # Both before the approver's task runs again: as two tasks of one scheduler batch
        # would, in the order chosen here.
        for op in (answer, cancel) if decision_first else (cancel, answer):
            op()
        await agent.wait_idle()
        assert of(agent.session.records, "tool/approval") == []
        assert of(agent.session.records, "tool/result")[0]["interrupted"] is True
        reason = of(agent.session.records, "turn/end")[-1]["reason"]
        assert reason == {"kind": "aborted", "reason": "stop", "cause": "user"}
        assert probe.calls == []
        assert approval.remembered == {}  # an ignored "always" is not remembered either


# -- A16: a `cancel` decision ------------------------------------------------------------


async def test_a16_a_cancel_decision_ends_the_turn_aborted_like_cancel() -> None:
    approver, probe, bus = HeldApprover(), Probe(), EventBus()
    events: list[Event] = []
    bus.connect(events.append)
    model = ScriptedModel([tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], events=bus, approval=asking(approver)) as agent:
        agent.send("go")
        await settle()
        queued = agent.send("queued")
        approver.answer(Decision("cancel", by="user"))
        await agent.wait_idle()
        records = agent.session.records
        (approval,) = of(records, "tool/approval")
        assert (approval["decision"], approval["by"]) == ("cancel", "user")
        assert of(records, "tool/result")[0]["interrupted"] is True
        reason = of(records, "turn/end")[-1]["reason"]
        assert reason == {"kind": "aborted", "reason": "approval cancelled", "cause": "user"}
        cancels = [e for e in events if isinstance(e, CancelRequested)]
        assert cancels == [CancelRequested(agent.id, "user", "approval cancelled")]
        assert of(records, "prompt/dropped") == [{"ids": (queued,), "reason": "cancelled"}]
        assert probe.calls == []
        assert len(of(records, "turn/start")) == 1


# -- A17: "always" answers ---------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["allow_always", "reject_always"])
async def test_a17_an_always_answer_holds_for_the_tool_for_the_rest_of_the_session(
    outcome: Any,
) -> None:
    approver, probe, other = HeldApprover(), Probe(), Probe("other")
    model = ScriptedModel(
        [tool_step(("probe", {})), tool_step(("probe", {}), ("other", {})), reply("done")]
    )
    async with open_agent(model, tools=[probe, other], approval=asking(approver)) as agent:
        agent.send("go")
        await settle()
        approver.answer(Decision(outcome, by="user"))
        await settle()
        # The second step: probe is decided by the remembered answer, other is asked.
        assert [r.tool for r in approver.requests] == ["probe", "other"]
        approver.answer(Decision("allow_once"))
        await agent.wait_idle()
        approvals = of(agent.session.records, "tool/approval")
        # The remembered answer is recorded as its call starts, other's once answered.
        assert [(a["tool"], a["decision"], a["by"]) for a in approvals] == [
            ("probe", outcome, "user"),
            ("probe", outcome, "remembered"),
            ("other", "allow_once", "approver"),
        ]
        if outcome == "reject_always":
            last = [r for r in of(agent.session.records, "tool/result") if r.get("rejected")][-1]
            assert last["content"] == (
                "a standing decision of this session rejected the call to 'probe'; it did not "
                "run (an earlier answer for this tool in this session)"
            )
        ran = 2 if outcome == "allow_always" else 0
        assert len(probe.calls) == ran
        assert len(other.calls) == 1


def test_a17_a_stored_approval_without_its_tool_is_damage_not_a_crash_on_resume() -> None:
    # Records are checked as they are read (D164): resuming never meets a tool/approval it
    # cannot take the tool's answer from.
    whole = {"call_id": "c", "tool": "bash", "decision": "allow_always", "by": "user"}
    assert shape_problem("tool/approval", whole) is None
    assert shape_problem("tool/approval", {**whole, "tool": None}) == "its 'tool' is not text"
    assert shape_problem("tool/approval", {"call_id": "c"}) == "it has no 'tool'"


async def test_a17_a_policy_that_does_not_remember_asks_every_time() -> None:
    approver, probe = HeldApprover(), Probe()
    policy = ApprovalPolicy(remembers=False)
    model = ScriptedModel([tool_step(("probe", {})), tool_step(("probe", {}))])
    async with open_agent(model, tools=[probe], approval=asking(approver, policy)) as agent:
        agent.send("go")
        await settle()
        approver.answer(Decision("allow_always"))
        await settle()
        assert len(approver.requests) == 2
        approver.answer(Decision("allow_once"))
        await agent.wait_idle()
        assert len(probe.calls) == 2


async def _answer_always_then_resume(store: Any) -> None:
    approver, probe = HeldApprover(), Probe()
    async with open_runtime(store) as rt:
        model = ScriptedModel([tool_step(("probe", {})), reply("ok")])
        handle = await rt.agents.create(
            model=model, tools=[probe], session_id="s", approval=asking(approver)
        )
        handle.agent.send("go")
        with trio.fail_after(10):
            await approver.until_asked()
        approver.answer(Decision("allow_always", by="user"))
        await handle.agent.wait_idle()
        await handle.aclose()
        again = HeldApprover()
        model = ScriptedModel([tool_step(("probe", {})), reply("ok")])
        handle = await rt.agents.resume("s", model=model, tools=[probe], approval=asking(again))
        handle.agent.send("again")
        await handle.agent.wait_idle()
        assert again.requests == []
        assert len(probe.calls) == 2
        last = of(handle.agent.session.records, "tool/approval")[-1]
        assert (last["decision"], last["by"]) == ("allow_always", "remembered")


async def test_a17_a_resumed_session_remembers_its_always_answers_memory_store() -> None:
    await _answer_always_then_resume(MemoryStore())


@pytest.mark.realtime
async def test_a17_a_resumed_session_remembers_its_always_answers_sqlite(
    tmp_path: pathlib.Path,
) -> None:
    await _answer_always_then_resume(SqliteStore(tmp_path / "s.db"))


# -- A18: the wait does not count against step_timeout -----------------------------------


class SlowModel:
    """Takes `seconds` of trio time, then asks for one call of `probe`; after that, text."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        step = tool_step(("probe", {})) if self.calls == 1 else reply("done")
        await trio.sleep(self.seconds if self.calls == 1 else 0)
        for item in step.items:
            yield item  # type: ignore[misc]  # a scripted step holds chunks only here


async def test_a18_waiting_for_a_decision_does_not_count_against_step_timeout() -> None:
    approver, probe = HeldApprover(), Probe(seconds=5.0)
    options = AgentOptions(step_timeout=10.0)
    model = SlowModel(seconds=4.0)
    async with open_agent(
        model, tools=[probe], options=options, approval=asking(approver)
    ) as agent:
        agent.send("go")
        await settle()
        await trio.sleep(1000.0)  # a person takes their time: far past the step's 10 s
        assert approver.pending
        approver.answer(Decision("allow_once"))
        await agent.wait_idle()
        # 4 s of model and 5 s of tool: 9 s of the step's 10.
        assert probe.calls
        assert of(agent.session.records, "turn/end")[-1]["reason"] == {"kind": "completed"}


async def test_a18_the_steps_own_time_before_and_after_the_wait_still_counts() -> None:
    approver, probe = HeldApprover(), Probe(seconds=7.0)
    options = AgentOptions(step_timeout=10.0)
    model = SlowModel(seconds=4.0)
    async with open_agent(
        model, tools=[probe], options=options, approval=asking(approver)
    ) as agent:
        agent.send("go")
        await settle()
        start = trio.current_time()
        await trio.sleep(1000.0)
        approver.answer(Decision("allow_once"))
        await agent.wait_idle()
        # 4 s of model, then the tool is cut 6 s into its 7: at 10 s of the step's own time.
        assert trio.current_time() - start == pytest.approx(1000.0 + 6.0)
        reason = of(agent.session.records, "turn/end")[-1]["reason"]
        assert reason == {"kind": "aborted", "reason": "step-timeout", "cause": "timeout"}
        assert of(agent.session.records, "tool/result")[0]["interrupted"] is True


async def test_a18_the_clock_stops_while_any_call_of_the_step_waits() -> None:
    # D181: one clock per step. A call that runs while another waits for a person is not
    # timed meanwhile; once no call waits, the clock runs on from where it stopped.
    approver, fast, asked = HeldApprover(), Probe(seconds=50.0), Probe("asked")
    policy = ApprovalPolicy(ask=frozenset({"asked"}))
    options = AgentOptions(step_timeout=10.0)
    model = ScriptedModel([tool_step(("probe", {}), ("asked", {}))])
    async with open_agent(
        model, tools=[fast, asked], options=options, approval=asking(approver, policy)
    ) as agent:
        agent.send("go")
        await settle()
        await trio.sleep(60.0)  # probe has finished its 50 s while `asked` waited
        approver.answer(Decision("allow_once"))
        await agent.wait_idle()
        assert of(agent.session.records, "turn/end")[-1]["reason"] == {"kind": "completed"}
        assert len(fast.calls) == len(asked.calls) == 1
