"""The BashTools plugin on real processes (issue 5, acceptance 2 and 4): the tool schemas, the
access rule S3 (also across a reload of the plugin), and job-done notices S4."""

from __future__ import annotations

import logging
import os
import pathlib

import pytest
import trio

from trio_agents import (
    BashTools,
    ShellRequest,
    Tool,
    ToolContext,
    ToolResult,
)
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.helpers import bash_runtime, of_type

pytestmark = pytest.mark.subprocess


def tool(bash: BashTools, name: str) -> Tool:
    return next(t for t in bash.tools if t.name == name)


async def call(bash: BashTools, name: str, caller: str, **arguments: object) -> ToolResult:
    result = await tool(bash, name)(arguments, ToolContext(caller, "call-1", 1, 1))
    assert isinstance(result, ToolResult)
    return result


async def test_the_three_tools_are_bash_bash_output_bash_kill_with_json_schemas() -> None:
    bash = BashTools()
    assert [t.name for t in bash.tools] == ["bash", "bash_output", "bash_kill"]
    for t in bash.tools:
        assert t.parameters["type"] == "object"
        assert set(t.parameters["required"]) <= set(t.parameters["properties"])
        assert t.description
    assert tool(bash, "bash").parameters["required"] == ["command", "description"]
    assert tool(bash, "bash_output").parameters["required"] == ["job_id"]
    assert tool(bash, "bash_kill").parameters["required"] == ["job_id"]


async def test_bash_runs_in_the_foreground_and_renders_the_exit_status() -> None:
    async with bash_runtime() as (_, bash):
        result = await call(bash, "bash", "A", command="echo hi; exit 3", description="exit 3")
    assert result.is_error  # a non-zero exit is an error result (D210); the model reads it
    assert result.content == "hi\n[exit code: 3]"


async def test_only_a_command_that_exits_0_by_itself_is_not_an_error_result() -> None:
    async with bash_runtime() as (_, bash):
        ok = await call(bash, "bash", "A", command="echo ok", description="exit 0")
        killed = await call(bash, "bash", "A", command="kill -KILL $$", description="die")
        late = await call(bash, "bash", "A", command="sleep 9", description="t", timeout_ms=50)
    assert (ok.content, ok.is_error) == ("ok", False)
    assert (killed.content, killed.is_error) == ("(no output)\n[killed by signal: SIGKILL]", True)
    assert late.is_error
    assert "[timed out after 0.05s]" in late.content, late


async def test_bash_rejects_bad_arguments_without_running_anything() -> None:
    async with bash_runtime() as (rt, bash):
        for arguments in (
            {"command": " ", "description": "blank command"},
            {"command": "true", "description": ""},
            {"command": "true", "description": "bad timeout", "timeout_ms": 0},
            {"command": "true", "description": "bad flag", "run_in_background": "yes"},
        ):
            result = await tool(bash, "bash")(arguments, ToolContext("A", "c", 1, 1))
            assert isinstance(result, ToolResult)
            assert result.is_error, arguments
            assert "invalid" in result.content
        assert rt.shell.jobs() == []


async def test_a_background_job_started_by_bash_is_owned_by_the_calling_agent() -> None:
    async with bash_runtime() as (rt, bash):
        started = await call(
            bash, "bash", "A", command="sleep 1000", description="sleep", run_in_background=True
        )
        assert started.content == "started background job bash-1"
        assert rt.shell.owner_of("bash-1") == "A"


# Callers and owners of rule S3. An empty string is a real owner: only "" matches it.
ACCESS = [
    (None, "A", True),
    (None, "", True),
    ("A", "A", True),
    ("A", "B", False),
    ("A", "", False),
    ("", "", True),
    ("", "A", False),
]


@pytest.mark.parametrize(("owner", "caller", "allowed"), ACCESS)
async def test_S3_only_the_owner_may_read_or_kill_an_owned_job(
    owner: str | None, caller: str, allowed: bool
) -> None:
    async with bash_runtime() as (rt, bash):
        job = await rt.shell.start(rt.shell.resolve(ShellRequest("sleep 1000")), owner=owner)
        read = await call(bash, "bash_output", caller, job_id=job)
        assert read.is_error is not allowed
        if not allowed:
            assert read.content == f"job {job} belongs to another session"
            refused = await call(bash, "bash_kill", caller, job_id=job)
            assert refused.content == f"job {job} belongs to another session"
            assert rt.shell.result(job) is None  # a refused kill leaves the job running
        else:
            assert read.content == "(no new output)\n[status: running]"
            killed = await call(bash, "bash_kill", caller, job_id=job)
            assert killed.content.startswith(f"killed background job {job} [status: killed by")


async def test_S3_ownership_survives_a_reload_of_the_plugin(tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "gate"
    trio_gate = trio.Path(gate)
    os.mkfifo(gate)
    async with bash_runtime(cwd=tmp_path) as (rt, bash):
        command = f"echo ready; cat {gate} >/dev/null; echo done"
        await call(bash, "bash", "A", command=command, description="wait", run_in_background=True)
        await rt.reload(bash)
        assert rt.shell.owner_of("bash-1") == "A"
        assert (await call(bash, "bash_output", "B", job_id="bash-1")).is_error
        assert (await call(bash, "bash_kill", "B", job_id="bash-1")).is_error
        await trio_gate.write_text("go")  # let the job finish, after the reload
        await rt.shell.wait("bash-1")
        read = await call(bash, "bash_output", "A", job_id="bash-1")
        assert read.content == "ready\ndone\n[status: completed, exit code: 0]"
        again = await call(bash, "bash_output", "A", job_id="bash-1")
        assert again.content == "(no new output)\n[status: completed, exit code: 0]"
        # Ownership persists after completion.
        assert (await call(bash, "bash_output", "B", job_id="bash-1")).is_error


async def test_the_tools_answer_with_an_error_while_the_plugin_is_not_loaded() -> None:
    async with bash_runtime() as (rt, bash):
        fiber = rt.plugin_fiber(bash)
        assert fiber is not None
        await fiber.aclose()
        result = await call(bash, "bash", "A", command="true", description="nothing")
        assert result.is_error
        assert "not loaded" in result.content
        assert rt.shell.jobs() == []


async def test_an_unknown_job_id_is_an_error_that_says_so() -> None:
    async with bash_runtime() as (_, bash):
        result = await call(bash, "bash_output", "A", job_id="bash-99")
        assert result.is_error
        assert "unknown job 'bash-99'" in result.content


async def test_S4_a_job_done_notice_reaches_its_owner_as_context_in_its_next_step(
    tmp_path: pathlib.Path,
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    start = tool_step(
        (
            "bash",
            {
                "command": f"cat {gate} >/dev/null; echo finished",
                "description": "wait for the test",
                "run_in_background": True,
            },
        )
    )
    model = ScriptedModel([start, reply("started it")])
    async with bash_runtime(cwd=tmp_path) as (rt, bash):
        handle = await rt.agents.create(model=model, tools=bash.tools, session_id="A")
        agent = handle.agent
        agent.send("start a job")
        await agent.wait_idle()
        assert of_type(agent, "tool/result")[0]["content"] == "started background job bash-1"
        await trio.Path(gate).write_text("go")
        await rt.shell.wait("bash-1")
        notice = "background job bash-1 finished [status: completed, exit code: 0]. "
        notice += "Read its output with bash_output."
        # Held for the next step: it does not wake the idle agent.
        assert len(model.requests) == 2
        agent.send("anything new?")
        await agent.wait_idle()
        assert notice in [m.content for m in model.requests[2].messages if m.source == "context"]
        assert notice in [data["content"] for data in of_type(agent, "context/message")]


async def test_S4_a_notice_for_an_owner_that_is_gone_is_dropped_without_error(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with bash_runtime() as (rt, bash):
        bystander = (await rt.agents.create(model=ScriptedModel(), session_id="B")).agent
        # An owner that never was an agent here, and one that closed while its job ran.
        await call(bash, "bash", "ghost", command="true", description="x", run_in_background=True)
        await rt.shell.wait("bash-1")
        handle = await rt.agents.create(model=ScriptedModel(), tools=bash.tools, session_id="A")
        await call(bash, "bash", "A", command="sleep 1000", description="x", run_in_background=True)
        await handle.aclose()
        assert rt.shell.result("bash-2") is not None  # closing A killed its job
        bystander.send("hello")
        await bystander.wait_idle()
        assert of_type(bystander, "context/message") == []
        assert of_type(handle.agent, "context/message") == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_S3_agent_b_tools_cannot_touch_agent_a_job_before_or_after_a_reload(
    tmp_path: pathlib.Path,
) -> None:
    """The same rule as above, with each agent's own model calling the tools in its turns."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    command = f"echo from-a; cat {gate} >/dev/null"
    model_a = ScriptedModel(
        [
            tool_step(
                ("bash", {"command": command, "description": "x", "run_in_background": True})
            ),
            reply("started"),
        ]
    )
    model_b = ScriptedModel()
    async with bash_runtime(cwd=tmp_path) as (rt, bash):
        a = (await rt.agents.create(model=model_a, tools=bash.tools, session_id="A")).agent
        b = (await rt.agents.create(model=model_b, tools=bash.tools, session_id="B")).agent
        a.send("start")
        await a.wait_idle()
        for reload in (False, True):
            if reload:
                await rt.reload(bash)
            model_b.add(
                tool_step(
                    ("bash_output", {"job_id": "bash-1"}), ("bash_kill", {"job_id": "bash-1"})
                ),
                reply("tried"),
            )
            b.send("poke A's job")
            await b.wait_idle()
            results = of_type(b, "tool/result")[-2:]
            assert [(r["content"], r["is_error"]) for r in results] == [
                ("job bash-1 belongs to another session", True)
            ] * 2
            assert rt.shell.result("bash-1") is None  # still running
        await trio.Path(gate).write_text("go")
        await rt.shell.wait("bash-1")
        model_a.add(tool_step(("bash_output", {"job_id": "bash-1"})), reply("read it"))
        a.send("read your job")
        await a.wait_idle()
        assert of_type(a, "tool/result")[-1]["content"] == (
            "from-a\n[status: completed, exit code: 0]"
        )
