"""The library used wrongly, as users do (design D383): each mistake is one error at the
call that names the argument, and nothing stored is lost or damaged by it."""

from __future__ import annotations

import datetime
import enum
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import pytest
import trio

from trio_agents import (
    Agent,
    AgentOptions,
    MemoryStore,
    Runtime,
    SandboxPolicy,
    ShellExecutor,
    SqliteStore,
    ToolCall,
    ToolContext,
    ToolResult,
    open_agent,
    open_runtime,
)
from trio_agents.testing import EchoTool, ScriptedModel, reply, tool_step


class NotJson:
    def __repr__(self) -> str:
        return "<NotJson>"


class Level(enum.IntEnum):
    HIGH = 2


class WrongResultTool:
    """A tool that builds its ToolResult from a value that is not text."""

    name = "wrong"
    description = "answers with an object"
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        await trio.lowlevel.checkpoint()
        return ToolResult(NotJson())  # type: ignore[arg-type]


async def one_turn(rt: Runtime, sid: str, model: ScriptedModel, tools: list[Any]) -> Agent:
    """A new agent of session `sid` that has taken one turn, `go`."""
    handle = await rt.agents.create(model=model, tools=tools, session_id=sid)
    handle.agent.send("go")
    await handle.agent.wait_idle()
    return handle.agent


async def assert_reads_back_whole(path: pathlib.Path, sids: list[str]) -> None:
    """Each session resumes from the store at `path` with its last turn ended, and the
    store lists none of its sessions as damaged."""
    async with open_runtime(path) as rt:
        for sid in sids:
            handle = await rt.agents.resume(sid, model=ScriptedModel([]))
            assert handle.agent.session.records[-1].type == "turn/end"
            await handle.aclose()
        assert all(info.damage is None for info in await rt.sessions.list_sessions())


@pytest.mark.realtime  # SQLite runs in a thread
@pytest.mark.parametrize(
    ("value", "named"),
    [(datetime.date(2026, 1, 2), "date"), (b"x", "bytes"), (NotJson(), "NotJson"), ({1, 2}, "set")],
)
async def test_meta_that_cannot_be_stored_is_refused_by_create(
    value: object, named: str, tmp_path: pathlib.Path
) -> None:
    async with open_runtime(tmp_path / "s.sqlite3") as rt:
        with pytest.raises(TypeError, match=rf"^meta: {named} .* cannot be stored"):
            await rt.agents.create(model=ScriptedModel([]), meta={"when": value})
        assert await rt.sessions.list_sessions() == []


@pytest.mark.realtime  # SQLite runs in a thread
async def test_a_value_that_cannot_be_stored_ends_its_turn_and_every_session_goes_on(
    tmp_path: pathlib.Path,
) -> None:
    # It once failed the store's commit: StoreBrokenError, and another agent's turn lost.
    path = tmp_path / "s.sqlite3"
    async with open_runtime(path) as rt:
        good = await rt.agents.create(model=ScriptedModel([reply("fine")]), session_id="good")
        bad_call = ScriptedModel([tool_step(("echo", {"text": b"raw"})), reply("never")])
        bad = await one_turn(rt, "bad", bad_call, [EchoTool()])
        end = bad.session.records[-1]
        assert end.type == "turn/end"
        assert end.data["reason"]["kind"] == "error"
        assert "bytes b'raw' cannot be stored" in end.data["reason"]["message"]
        good.agent.send("hi")
        await good.agent.wait_idle()
        assert good.agent.session.records[-1].data["reason"]["kind"] == "completed"
        level = ScriptedModel(
            [tool_step(("echo", {"text": "x", "level": Level.HIGH})), reply("ok")]
        )
        enumed = await one_turn(rt, "enum", level, [EchoTool()])
        assert enumed.session.records[-1].data["reason"]["kind"] == "completed"
    await assert_reads_back_whole(path, ["good", "bad", "enum"])


@pytest.mark.realtime  # SQLite runs in a thread
async def test_a_tool_result_that_is_not_text_is_the_tools_error_and_reads_back_whole(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    async with open_runtime(path) as rt:
        model = ScriptedModel([tool_step(("wrong", {})), reply("done")])
        agent = await one_turn(rt, "t", model, [WrongResultTool()])
        (result,) = [r for r in agent.session.records if r.type == "tool/result"]
        assert result.data["is_error"] is True
        assert "ToolResult content must be a str, got NotJson" in result.data["content"]
    await assert_reads_back_whole(path, ["t"])


def test_tool_calls_and_results_check_their_fields() -> None:
    with pytest.raises(TypeError, match="ToolCall call_id must be a str, got 7"):
        ToolCall(7, "echo", {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolCall name must be a str"):
        ToolCall("c1", None, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ToolCall arguments must be a mapping"):
        ToolCall("c1", "echo", ["x"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolResult content must be a str, got int 123"):
        ToolResult(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolResult is_error must be True or False"):
        ToolResult("x", is_error="no")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"writable": "//"}, "SandboxPolicy writable must be a sequence of strings, not one"),
        ({"hidden": "/etc/hostname"}, "SandboxPolicy hidden must be a sequence of strings"),
        ({"read_only": ("cache",)}, "SandboxPolicy read_only: 'cache' must be absolute"),
        (
            {"hidden": ("secrets",)},
            "SandboxPolicy hidden: 'secrets' must be absolute or start with ~/",
        ),
        ({"writable": ("~/x",)}, "SandboxPolicy writable: '~/x' must be absolute"),
        ({"writable": (5,)}, "SandboxPolicy writable must hold strings, got 5"),
        ({"network": "no"}, "SandboxPolicy network must be True or False, got 'no'"),
        ({"allow_unsandboxed": 1}, "SandboxPolicy allow_unsandboxed must be True or False"),
        ({"bwrap": ""}, "SandboxPolicy bwrap must be a path or None"),
        ({"timeout": "10"}, "ShellExecutor timeout must be a number, got '10'"),
        ({"grace": True}, "ShellExecutor grace must be a number, got True"),
        ({"max_output_bytes": 1.5}, "ShellExecutor max_output_bytes must be an integer"),
        ({"max_timeout": 0}, "ShellExecutor max_timeout must be positive and finite, got 0"),
        ({"pass_env": "PATH"}, "ShellExecutor pass_env must be a sequence of strings, not one"),
        ({"env": [("A", "b")]}, "ShellExecutor env must be a mapping"),
        ({"sandbox": "none"}, "ShellExecutor sandbox must be a SandboxPolicy or None"),
    ],
)
def test_a_sandbox_policy_or_shell_that_would_not_mean_what_it_says_is_refused(
    kwargs: dict[str, Any], says: str
) -> None:
    # A policy is checked because a mistake weakens it silently; an executor's numbers,
    # because they failed later as bare comparison errors.
    make = SandboxPolicy if says.startswith("SandboxPolicy") else ShellExecutor
    with pytest.raises((TypeError, ValueError), match=f"^{re.escape(says)}"):
        make(**kwargs)


def test_a_sandbox_policy_takes_lists_as_tuples_and_home_paths_where_they_are_hidden() -> None:
    policy = SandboxPolicy(writable=["/srv"], hidden=["~/.netrc", "/etc/x"])  # type: ignore[arg-type]
    assert policy.writable == ("/srv",)
    assert policy.hidden == ("~/.netrc", "/etc/x")


class NoStream:
    def __repr__(self) -> str:
        return "<NoStream>"


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"model": NoStream()}, "model must be a Model, an object with a `stream(request)`"),
        ({"model": None}, "model must be a Model"),
        ({"tools": "echo"}, "tools must be a sequence of tools, got 'echo'"),
        ({"tools": EchoTool()}, "tools must be a sequence of tools"),
        ({"tools": iter([EchoTool()])}, "tools must be a sequence, not an iterator"),
        ({"tools": ["echo"]}, "a tool must have a str `name`, got 'echo'"),
        ({"options": {"max_steps": 3}}, "options must be an AgentOptions, got {'max_steps': 3}"),
        ({"approval": "ask"}, "approval must be an Approval"),
        ({"meta": [1, 2]}, "meta must be a mapping"),
    ],
)
async def test_create_refuses_parts_of_the_wrong_shape_before_the_store_sees_them(
    kwargs: dict[str, Any], says: str
) -> None:
    store = MemoryStore()
    parts: dict[str, Any] = {"model": ScriptedModel([]), **kwargs}
    async with open_runtime(store) as rt:
        with pytest.raises(TypeError, match=f"^{re.escape(says)}"):
            await rt.agents.create(session_id="s", **parts)
        if "meta" not in parts:  # resume takes no meta: the header is stored
            with pytest.raises(TypeError, match=f"^{re.escape(says)}"):
                await rt.agents.resume("s", **parts)
        # Nothing was made: the id is free.
        handle = await rt.agents.create(model=ScriptedModel([]), session_id="s")
        await handle.aclose()


async def test_open_agent_checks_the_same_parts() -> None:
    with pytest.raises(TypeError, match=r"^options must be an AgentOptions"):
        async with open_agent(model=ScriptedModel([]), options={}):  # type: ignore[arg-type]
            pass
    async with open_agent(model=ScriptedModel([]), options=AgentOptions(max_steps=2)):
        pass


@pytest.mark.realtime  # SQLite runs in a thread
async def test_a_store_opened_on_a_directory_says_so(tmp_path: pathlib.Path) -> None:
    for readonly in (False, True):
        with pytest.raises(Exception, match=f"{tmp_path} is a directory") as info:
            async with SqliteStore(tmp_path, readonly=readonly).running():
                pass
        assert "give the path of a store file" in str(info.value)
