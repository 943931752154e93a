"""Rule L8: a prompt that queues behind other work is recorded (`prompt/queued`), and so is
its drop (`prompt/dropped`); an agent over a session whose queued prompts never started
restores them parked, in order, until `wake`, `send` or `steer`.

The crash itself is tests/test_durability_kills.py's; here a session holding what a crash
leaves is built directly, and `open_agent` runs an agent over it.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
import trio.testing

from trio_agents import MemoryStore, Record, Session, open_agent, open_runtime
from trio_agents._store._repair import pending_prompts
from trio_agents.testing import ScriptedModel, reply


def crashed(*queued: tuple[str, str], started: Sequence[str] = ()) -> Session:
    """A session a crash left with turn 1 open and `queued` prompts behind it."""
    records = [Record.of("turn/start", {"turn": 1})]
    records.append(Record.of("user/message", {"id": "m1", "content": "first"}))
    records += [Record.of("prompt/queued", {"id": m, "content": c}) for m, c in queued]
    records.append(Record.of("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}))
    for n, mid in enumerate(started, start=2):
        records.append(Record.of("turn/start", {"turn": n}))
        records.append(Record.of("user/message", {"id": mid, "content": "x"}))
        records.append(Record.of("turn/end", {"turn": n, "reason": {"kind": "completed"}}))
    return Session("s", {}, records)


def delivered(session: Session) -> list[str]:
    return [str(r.data["id"]) for r in session.records if r.type == "user/message"]


def test_pending_prompts_replays_the_queue() -> None:
    records = [
        Record.of("prompt/queued", {"id": "m2", "content": "two"}),
        Record.of("prompt/queued", {"id": "m3", "content": "three"}),
        Record.of("prompt/queued", {"id": "m4", "content": "four"}),
        Record.of("user/message", {"id": "m2", "content": "two"}),
        Record.of("prompt/dropped", {"ids": ["m4", "m9"], "reason": "cancelled"}),
        Record.of("prompt/queued", {"id": "m5", "content": "five"}),
    ]
    assert pending_prompts(records) == [("m3", "three"), ("m5", "five")]
    assert pending_prompts([]) == []


async def test_a_prompt_sent_to_an_idle_agent_starts_at_once_and_is_not_queued() -> None:
    async with open_agent(ScriptedModel()) as agent:
        agent.send("hi")
        await agent.wait_idle()
        assert "prompt/queued" not in [r.type for r in agent.session.records]


async def test_restored_prompts_wait_parked_then_run_first_in_order_on_send() -> None:
    model = ScriptedModel()
    session = crashed(("m2", "two"), ("m3", "three"), ("m4", "four"), started=["m3"])
    async with open_agent(model, session=session) as agent:
        await trio.testing.wait_all_tasks_blocked()
        assert agent.parked
        assert agent.pending == (("m2", "prompt"), ("m4", "prompt"))
        assert agent.status.value == "idle"
        assert model.requests == []
        assert agent.send("new") == "m5"  # ids continue after the queued ones
        assert not agent.parked
        await agent.wait_idle()
        assert delivered(agent.session) == ["m1", "m3", "m2", "m4", "m5"]
        assert not agent.wake()  # nothing is parked any more


async def test_cancel_drops_parked_prompts_and_records_the_drop() -> None:
    session = crashed(("m2", "two"))
    async with open_agent(ScriptedModel(), session=session) as agent:
        assert agent.cancel()
        assert not agent.parked
        assert not agent.wake()
        last = agent.session.records[-1]
        assert (last.type, dict(last.data)) == (
            "prompt/dropped",
            {"ids": ("m2",), "reason": "cancelled"},
        )
    assert pending_prompts(agent.session.records) == []


async def test_an_orderly_close_drops_queued_prompts_and_records_the_drop() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        model = ScriptedModel([reply("held", hold=True)])
        handle = await rt.agents.create(model=model, session_id="s")
        handle.agent.send("first")
        handle.agent.send("two")
        await trio.testing.wait_all_tasks_blocked()
        await handle.aclose()
    stored = (await store.load("s")).records
    dropped = [dict(r.data) for r in stored if r.type == "prompt/dropped"]
    assert dropped == [{"ids": ("m2",), "reason": "closed"}]
    assert pending_prompts(stored) == []


async def test_closing_a_parked_agent_keeps_its_prompts_for_the_next_resume() -> None:
    async with open_agent(ScriptedModel(), session=crashed(("m2", "two"))) as agent:
        await trio.testing.wait_all_tasks_blocked()
        assert agent.parked
    # Closed without being woken: this agent dropped nothing it had taken up.
    assert "prompt/dropped" not in [r.type for r in agent.session.records]
    assert pending_prompts(agent.session.records) == [("m2", "two")]


async def test_wake_runs_the_restored_prompts() -> None:
    async with open_agent(ScriptedModel(), session=crashed(("m2", "two"))) as agent:
        assert agent.wake()
        assert agent.status.value == "running"
        await agent.wait_idle()
        assert delivered(agent.session) == ["m1", "m2"]
        assert pending_prompts(agent.session.records) == []
