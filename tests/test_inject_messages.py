"""`agent.inject(message)`: context arrives as a user or a system message (rule A4), a plain
str being shorthand for user-role context; what the model is sent, and what is stored."""

from __future__ import annotations

import pathlib

import pytest
from trio.testing import wait_all_tasks_blocked

from trio_agents import AgentClosedError, MemoryStore, Message, open_agent, open_runtime
from trio_agents.testing import EchoTool, ScriptedModel, reply, tool_step


def _context(model: ScriptedModel) -> list[Message]:
    return [m for m in model.requests[-1].messages if m.source == "context"]


async def test_a_system_message_reaches_the_model_as_system_context() -> None:
    model = ScriptedModel([reply("ok")])
    async with open_agent(model) as agent:
        agent.inject(Message("system", "the repository is read-only"))
        agent.send("hello")
        await agent.wait_idle()
    assert _context(model) == [Message("system", "the repository is read-only", source="context")]
    context = [r for r in agent.session.records if r.type == "context/message"]
    assert [dict(r.data) for r in context] == [
        {"id": "m1", "content": "the repository is read-only", "role": "system"}
    ]


async def test_a_str_and_a_user_message_are_the_same_user_context() -> None:
    model = ScriptedModel([reply("ok")])
    async with open_agent(model) as agent:
        agent.inject("from a str")
        agent.inject(Message("user", "from a message"))
        agent.send("hello")
        await agent.wait_idle()
    assert _context(model) == [
        Message("user", "from a str", source="context"),
        Message("user", "from a message", source="context"),
    ]
    stored = [dict(r.data) for r in agent.session.records if r.type == "context/message"]
    assert all("role" not in data for data in stored)  # records of user context unchanged


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (Message("assistant", "I did it"), "got role 'assistant'"),
        (Message("tool", "result", call_id="c1"), "got role 'tool'"),
        (Message("user", "with a call id", call_id="c1"), "without tool calls or a call_id"),
    ],
)
async def test_a_message_that_is_not_context_is_refused_and_changes_nothing(
    message: Message, says: str
) -> None:
    async with open_agent(ScriptedModel([])) as agent:
        with pytest.raises(ValueError, match=says):
            agent.inject(message)
        assert agent.pending == ()
        assert len(agent.session.records) == 0


async def test_something_that_is_not_a_message_is_a_type_error() -> None:
    async with open_agent(ScriptedModel([])) as agent:
        with pytest.raises(TypeError, match="takes a Message or a str, got int"):
            agent.inject(3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        with pytest.raises(TypeError, match="content is a str, got int"):
            agent.inject(Message("system", 3))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        assert agent.pending == ()


async def test_system_context_injected_during_a_turn_rides_into_its_next_step() -> None:
    model = ScriptedModel([tool_step(("echo", {"text": "x"})), reply("done")], hold_all=True)
    async with open_agent(model, tools=[EchoTool()]) as agent:
        agent.send("go")
        await wait_all_tasks_blocked()
        agent.inject(Message("system", "the user is watching"))
        model.release()
        await wait_all_tasks_blocked()
        model.release()
        await agent.wait_idle()
    first, second = model.requests
    assert [m for m in first.messages if m.source == "context"] == []
    assert [m for m in second.messages if m.source == "context"] == [
        Message("system", "the user is watching", source="context")
    ]


@pytest.mark.realtime  # SQLite writes in a worker thread
async def test_system_context_survives_a_sqlite_store(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    async with open_runtime(path) as rt:
        handle = await rt.agents.create(model=ScriptedModel([reply("a")]), session_id="s")
        async with handle:
            handle.agent.inject(Message("system", "be brief"))
            handle.agent.send("one")
            await handle.agent.wait_idle()
    model = ScriptedModel([reply("b")])
    async with open_runtime(path) as rt, await rt.agents.resume("s", model=model) as h:
        h.agent.send("two")
        await h.agent.wait_idle()
    assert _context(model) == [Message("system", "be brief", source="context")]


async def test_injecting_a_message_into_a_closed_agent_raises_agent_closed() -> None:
    async with open_agent(ScriptedModel([])) as agent:
        pass
    with pytest.raises(AgentClosedError):
        agent.inject(Message("system", "too late"))


async def test_system_context_is_still_system_after_a_resume() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        async with await rt.agents.create(model=ScriptedModel([reply("a")]), session_id="s") as h:
            h.agent.inject(Message("system", "be brief"))
            h.agent.send("one")
            await h.agent.wait_idle()
        model = ScriptedModel([reply("b")])
        async with await rt.agents.resume("s", model=model) as h:
            h.agent.send("two")
            await h.agent.wait_idle()
    assert _context(model) == [Message("system", "be brief", source="context")]
