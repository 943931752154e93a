"""Agents declared in configuration are owned by the plugin fiber that created them: closing
or reloading the plugin closes them, and applying it again resumes the same sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agents import (
    AgentStatus,
    DuplicateSessionError,
    MemoryStore,
    SqliteStore,
    open_runtime,
)
from trio_agents._configured import AgentConfig, ConfiguredAgents
from trio_agents.testing import ScriptedModel, reply

from .support.helpers import of_type, turn_ends, types


def two_agents() -> ConfiguredAgents:
    return ConfiguredAgents(
        AgentConfig("coder", ScriptedModel()),
        AgentConfig("reviewer", ScriptedModel(), session_id="review-1"),
    )


async def test_agents_are_created_on_load_and_owned_by_the_plugin_fiber() -> None:
    store = MemoryStore()
    plugin = two_agents()
    assert plugin.session_id("coder") is None  # minted on the first apply
    assert plugin.agent("coder") is None
    async with open_runtime(store) as rt:
        fiber = await rt.load(plugin)
        coder_id = plugin.session_id("coder")
        assert coder_id is not None
        assert coder_id.startswith("coder-")
        assert plugin.session_id("reviewer") == "review-1"
        for label in ("coder", "reviewer"):
            sid = plugin.session_id(label)
            assert sid is not None
            agent = plugin.agent(label)
            assert agent is not None
            assert rt.agents.get(sid) is agent
            assert agent.id == sid
        assert store.live_ids == {coder_id, "review-1"}
        assert rt.plugin_fiber(plugin) is fiber
        # The created sessions say which config they came from (stored from the first record).
        reviewer = plugin.agent("reviewer")
        assert reviewer is not None
        reviewer.send("hello")
        await reviewer.wait_idle()
        assert (await store.load("review-1")).header["label"] == "reviewer"


async def test_closing_the_plugin_fiber_closes_its_agents_and_a_new_load_brings_them_back() -> None:
    store = MemoryStore()
    model = ScriptedModel([reply("first"), reply("held", hold=True)])
    plugin = ConfiguredAgents(AgentConfig("solo", model))
    async with open_runtime(store) as rt:
        fiber = await rt.load(plugin)
        first = plugin.agent("solo")
        assert first is not None
        sid = first.id
        first.send("one")
        await first.wait_idle()
        first.send("two")
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1

        await fiber.aclose()

        assert first.status is AgentStatus.CLOSED
        assert plugin.agent("solo") is None
        assert rt.agents.get(sid) is None
        assert store.live_ids == frozenset()
        # The closing turn/end was made durable before the agent was gone.
        stored = await store.load(sid)
        assert [dict(r.data) for r in stored.records if r.type == "turn/end"] == [
            {"turn": 1, "reason": {"kind": "completed"}},
            {"turn": 2, "reason": {"kind": "closed"}},
        ]

        # Code that only knows the label keeps working after the plugin is loaded again.
        await rt.load(plugin)
        again = plugin.agent("solo")
        assert again is not None
        assert again is not first
        assert again.id == sid
        assert rt.agents.get(sid) is again


async def test_reload_resumes_the_same_sessions_and_the_running_turn_ends_closed() -> None:
    store = MemoryStore()
    model = ScriptedModel([reply("before"), reply("held", hold=True), reply("after")])
    plugin = ConfiguredAgents(
        AgentConfig("minted", model),
        AgentConfig("named", ScriptedModel(), session_id="named-1"),
    )
    async with open_runtime(store) as rt:
        first_fiber = await rt.load(plugin)
        ids = {label: plugin.session_id(label) for label in ("minted", "named")}
        before = plugin.agent("minted")
        assert before is not None
        before.send("one")
        await before.wait_idle()
        before.send("two")
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1  # turn 2 is running, inside its model call

        second_fiber = await rt.reload(plugin)

        assert first_fiber.state == "closed"
        assert rt.plugin_fiber(plugin) is second_fiber
        assert {label: plugin.session_id(label) for label in ("minted", "named")} == ids
        after = plugin.agent("minted")
        assert after is not None
        assert after is not before
        assert after.id == before.id
        assert before.status is AgentStatus.CLOSED
        # The session continues: the records from before the reload are all there...
        assert turn_ends(after) == [{"kind": "completed"}, {"kind": "closed"}]
        assert types(after)[: len(before.session)] == types(before)
        # ...and the numbering goes on from them.
        after.send("three")
        await after.wait_idle()
        assert of_type(after, "turn/start") == [{"turn": 1}, {"turn": 2}, {"turn": 3}]
        assert [str(d["id"]) for d in of_type(after, "user/message")] == ["m1", "m2", "m3"]
        assert turn_ends(after)[-1] == {"kind": "completed"}
        named = plugin.agent("named")
        assert named is not None
        assert named.id == "named-1"
    assert store.live_ids == frozenset()


async def test_a_configured_session_id_that_is_stored_is_resumed() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        earlier = await rt.agents.create(model=ScriptedModel(), session_id="kept")
        earlier.agent.send("remember this")
        await earlier.agent.wait_idle()
        await earlier.aclose()

        plugin = ConfiguredAgents(AgentConfig("kept", ScriptedModel(), session_id="kept"))
        await rt.load(plugin)
        agent = plugin.agent("kept")
        assert agent is not None
        assert [str(d["content"]) for d in of_type(agent, "user/message")] == ["remember this"]


async def test_closing_the_runtime_closes_configured_agents() -> None:
    store = MemoryStore()
    plugin = two_agents()
    async with open_runtime(store) as rt:
        fiber = await rt.load(plugin)
        agents = [plugin.agent("coder"), plugin.agent("reviewer")]
    assert fiber.state == "closed"
    for agent in agents:
        assert agent is not None
        assert agent.status is AgentStatus.CLOSED
    assert store.live_ids == frozenset()
    assert plugin.agent("coder") is None


async def test_a_failing_apply_closes_the_agents_it_already_created() -> None:
    store = MemoryStore()
    plugin = ConfiguredAgents(
        AgentConfig("first", ScriptedModel(), session_id="first-1"),
        AgentConfig("taken", ScriptedModel(), session_id="taken-1"),
    )
    async with open_runtime(store) as rt:
        squatter = await rt.agents.create(model=ScriptedModel(), session_id="taken-1")
        with pytest.raises(DuplicateSessionError, match="taken-1"):
            await rt.load(plugin)
        assert rt.plugin_fiber(plugin) is None
        assert rt.agents.get("first-1") is None
        assert store.live_ids == {"taken-1"}
        assert plugin.agent("first") is None
        # Once the id is free, loading succeeds and resumes what the failed apply created.
        await squatter.aclose()
        await rt.load(plugin)
        assert plugin.agent("first") is not None
        assert plugin.agent("taken") is not None


async def test_one_plugin_object_cannot_own_agents_in_two_open_fibers() -> None:
    plugin = ConfiguredAgents(AgentConfig("a", ScriptedModel()))
    async with open_runtime(MemoryStore()) as rt, open_runtime(MemoryStore()) as other:
        await rt.load(plugin)
        with pytest.raises(ValueError, match="already applied"):
            await other.load(plugin)
        assert plugin.agent("a") is rt.agents.get(plugin.session_id("a") or "")


def test_duplicate_labels_are_rejected() -> None:
    with pytest.raises(ValueError, match="two agents are labelled 'same'"):
        ConfiguredAgents(
            AgentConfig("same", ScriptedModel()),
            AgentConfig("other", ScriptedModel()),
            AgentConfig("same", ScriptedModel()),
        )


def test_bad_configs_fail_when_they_are_read() -> None:
    with pytest.raises(ValueError, match="label must be a non-empty str"):
        AgentConfig("", ScriptedModel())
    with pytest.raises(ValueError, match="session_id must be a non-empty str"):
        AgentConfig("x", ScriptedModel(), session_id="")


def test_unknown_labels_are_a_key_error_not_a_missing_agent() -> None:
    plugin = two_agents()
    with pytest.raises(KeyError, match="'coder', 'reviewer'"):
        plugin.agent("codr")
    with pytest.raises(KeyError, match="no agent is labelled 'codr'"):
        plugin.session_id("codr")


@pytest.mark.realtime
async def test_sqlite_a_minted_session_that_never_ran_is_created_again_under_its_id(
    tmp_path: Path,
) -> None:
    # SQLite stores a session with its first record, so one that never ran a turn is not
    # stored: the next apply must create it (under the same id), not try to resume it.
    store = SqliteStore(tmp_path / "s.sqlite3")
    idle_model = ScriptedModel()
    busy_model = ScriptedModel([reply("ok")])
    plugin = ConfiguredAgents(AgentConfig("idle", idle_model), AgentConfig("busy", busy_model))
    async with open_runtime(store) as rt:
        await rt.load(plugin)
        idle_id, busy_id = plugin.session_id("idle"), plugin.session_id("busy")
        assert idle_id is not None
        assert busy_id is not None
        busy = plugin.agent("busy")
        assert busy is not None
        busy.send("hi")
        await busy.wait_idle()
        await rt.reload(plugin)
        assert not await store.exists(idle_id)
        assert plugin.session_id("idle") == idle_id
        idle = plugin.agent("idle")
        assert idle is not None
        assert idle.id == idle_id
        resumed = plugin.agent("busy")
        assert resumed is not None
        assert turn_ends(resumed) == [{"kind": "completed"}]
    # A new runtime over the same file resumes the minted session too.
    async with open_runtime(store) as rt:
        await rt.load(plugin)
        resumed = plugin.agent("busy")
        assert resumed is not None
        assert resumed.id == busy_id
        assert turn_ends(resumed) == [{"kind": "completed"}]
