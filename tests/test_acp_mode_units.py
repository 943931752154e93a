"""The ACP mode's pure parts: the schema checks both ways, the /proc reading, the client's
answers to the agent's own requests, templates, and the printed reproduction."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time
from typing import Any, ClassVar

import pytest

from agent_conformance._acp import _wire as wire
from agent_conformance._acp._client import AcpTarget, AgentProcess, Update, fill
from agent_conformance._acp._permission_rules import ERROR, NOT_OFFERED, may_run, reply
from agent_conformance._acp._procs import alive, descendants
from agent_conformance._acp._properties import EXITS_AT_EOF
from agent_conformance._acp._run import (
    ShrinkingCut,
    acp_settings,
    cut_shrinking_after,
    reproduction,
)
from agent_conformance._profiles import profile
from agent_conformance._properties import violation

from .support.scripts import private_imports


def test_lines_that_are_not_json_rpc_are_named() -> None:
    assert wire.parse_line(b'{"jsonrpc":"2.0","method":"x"}') == (
        {"jsonrpc": "2.0", "method": "x"},
        None,
    )
    assert "not JSON" in str(wire.parse_line(b"Starting agent...")[1])
    assert "not a JSON object" in str(wire.parse_line(b"[1]")[1])
    assert '"jsonrpc": "2.0"' in str(wire.parse_line(b'{"id": 1, "result": {}}')[1])


def test_agent_messages_are_checked_against_the_schema() -> None:
    good = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                                         "content": {"type": "text", "text": "hi"}}}  # fmt: skip
    update = {"jsonrpc": "2.0", "method": "session/update", "params": good}
    assert wire.check_from_agent_message(update, None) is None
    bad = {**update, "params": {"sessionId": "s", "update": {"sessionUpdate": "nonsense"}}}
    assert "SessionNotification" in str(wire.check_from_agent_message(bad, None))
    prompt_answer = {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "finished"}}
    assert "PromptResponse" in str(wire.check_from_agent_message(prompt_answer, "session/prompt"))
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": "x"}}
    assert "Error" in str(wire.check_from_agent_message(error, "session/prompt"))
    unknown: dict[str, Any] = {"jsonrpc": "2.0", "method": "whatever/else", "params": {}}
    assert "does not have" in str(wire.check_from_agent_message(unknown, None))
    extension: dict[str, Any] = {"jsonrpc": "2.0", "method": "_vendor/thing", "params": {}}
    assert wire.check_from_agent_message(extension, None) is None


def test_a_frame_the_suite_builds_wrong_is_the_suites_error() -> None:
    with pytest.raises(AssertionError, match="the ACP machine built an invalid frame"):
        wire.check_from_client("session/prompt", {"sessionId": "s"})
    wire.check_from_client("session/cancel", {"sessionId": "s"})


def test_dig_walks_json_objects() -> None:
    assert wire.dig({"a": {"b": 1}}, "a", "b") == 1
    assert wire.dig({"a": [1]}, "a", "b") is None
    assert wire.dig(None, "a") is None


def client(tmp_path: pathlib.Path) -> AgentProcess:
    agent = AgentProcess(AcpTarget(("true",)), {}, tmp_path)
    agent.workdir.mkdir(parents=True)
    return agent


def test_the_client_allows_once_and_serves_files_inside_the_work_directory(
    tmp_path: pathlib.Path,
) -> None:
    agent = client(tmp_path)
    options = [
        {"optionId": "no", "name": "No", "kind": "reject_once"},
        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    ]
    result = agent._client_result("session/request_permission", {"options": options})  # pyright: ignore[reportPrivateUsage]
    assert result == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    target = agent.workdir / "a.txt"
    agent._client_result("fs/write_text_file", {"path": str(target), "content": "1\n2\n3\n"})  # pyright: ignore[reportPrivateUsage]
    read = agent._client_result("fs/read_text_file", {"path": str(target), "line": 2, "limit": 1})  # pyright: ignore[reportPrivateUsage]
    assert read == {"content": "2\n"}
    outside = agent._client_answer("fs/read_text_file", {"path": "/etc/passwd"}, 9)  # pyright: ignore[reportPrivateUsage]
    assert b'"error"' in outside
    assert b"outside the session" in outside
    unknown = agent._client_answer("terminal/create", {}, 10)  # pyright: ignore[reportPrivateUsage]
    assert b"-32601" in unknown


def test_permission_answers_are_drawn_per_session_and_fail_closed_without_options(
    tmp_path: pathlib.Path,
) -> None:
    offered = [
        {"optionId": "no", "name": "No", "kind": "reject_once"},
        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    ]

    def selected(option: str) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": option}}

    assert reply("allow", offered) == selected("yes")
    assert reply("reject", offered) == selected("no")
    assert reply("reject", offered[1:]) == ERROR  # no reject option: the error instead
    assert reply("error", offered) == ERROR
    assert reply("not-offered", offered) == selected(NOT_OFFERED)
    clash = [{"optionId": NOT_OFFERED, "name": "x", "kind": "allow_once"}]
    assert reply("not-offered", clash) == selected(NOT_OFFERED + "-x")
    assert reply("cancelled", offered) == {"outcome": {"outcome": "cancelled"}}
    assert reply("held", offered) is None
    assert [a for a in ("allow", "reject", "error", "not-offered", "cancelled", "held")
            if may_run(a)] == ["allow"]  # fmt: skip
    # A session's answers are taken in order, the last one kept; a session without any
    # gets allow.
    agent = client(tmp_path)
    agent.permission_answers["s1"] = ["reject", "not-offered", "error"]
    taken = [agent._next_answer("s1") for _ in range(4)]  # pyright: ignore[reportPrivateUsage]
    assert taken == ["reject", "not-offered", "error", "error"]
    assert agent._next_answer("s2") == "allow"  # pyright: ignore[reportPrivateUsage]
    params = {"sessionId": "s1", "options": offered}
    result = agent._client_result("session/request_permission", params, "reject")  # pyright: ignore[reportPrivateUsage]
    assert result == selected("no")


def test_templates_fill_placeholders_and_keep_other_braces() -> None:
    text = fill('{"url": "{base_url}", "k": {"x": 1}}', {"base_url": "http://h/v1"})
    assert text == '{"url": "http://h/v1", "k": {"x": 1}}'


def test_update_text_gathers_every_string() -> None:
    update = Update(1, "s", {"sessionUpdate": "tool_call", "title": "t acp-check-1",
                             "rawInput": {"command": ["bash", "x"]}})  # fmt: skip
    assert "acp-check-1" in update.text
    assert "bash x" in update.text


@pytest.mark.subprocess
def test_descendants_are_known_by_pid_and_start_time() -> None:
    with subprocess.Popen(
        ["bash", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())  # printed once it was forked
        try:
            (sleeper,) = [p for p in descendants(parent.pid) if p.pid == grandchild]
            assert alive(sleeper)
            assert "sleep 30" in sleeper.command  # bash's own line, or sleep's once it exec'd
        finally:
            os.kill(grandchild, signal.SIGKILL)
            parent.wait()
        assert not alive(sleeper)


def test_the_ci_budget_is_twenty_examples_of_twenty_steps() -> None:
    budget = acp_settings(profile("ci"))
    assert (budget.max_examples, budget.stateful_step_count) == (20, 20)


def test_the_reproduction_replays_the_shrunk_steps() -> None:
    failure = AssertionError("x")
    failure.add_note("state = AcpMachine()")
    failure.add_note("state.new_session()")
    failure.add_note("state.cancel_prompt(point='mid-tool', session=0)")
    failure.add_note("state.teardown()")
    failure.add_note("Explanation: ...")
    script = reproduction(AcpTarget(("agent", "--acp")), failure)
    assert script is not None
    assert "acp_machine(AcpTarget(argv=('agent', '--acp')" in script
    # Each step is followed by the invariant Hypothesis runs unprinted, as is the start.
    assert (
        "    state.check()\n    state.new_session()\n    state.check()\n"
        "    state.cancel_prompt(point='mid-tool', session=0)\n    state.check()\n"
    ) in script
    assert script.count("state.teardown()") == 1
    compile(script, "reproduction", "exec")
    assert private_imports(script) == [], "a reproduction imports public names only"
    assert reproduction(AcpTarget(("agent",)), AssertionError("no notes")) is None


def test_env_and_config_templates_reach_the_agent(tmp_path: pathlib.Path) -> None:
    target = AcpTarget(
        ("agent",),
        env=(("MY_ENDPOINT", "{base_url}/chat"), ("OPENAI_MODEL", "override")),
        files=(("conf/agent.json", '{"url": "{base_url}", "key": "{api_key}", "d": "{dir}"}'),),
    )
    placeholders = {"base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m",
                    "dir": str(tmp_path), "workdir": str(tmp_path / "work")}  # fmt: skip
    agent = AgentProcess(target, placeholders, tmp_path)
    env = agent.environment()
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert env["OPENAI_API_KEY"] == "k"
    assert env["OPENAI_MODEL"] == "override"  # --env wins over the defaults
    assert env["MY_ENDPOINT"] == "http://127.0.0.1:9/v1/chat"
    assert env["XDG_CONFIG_HOME"] == str(tmp_path / "config")
    agent.write_files()
    written = (tmp_path / "conf" / "agent.json").read_text()
    assert written == f'{{"url": "http://127.0.0.1:9/v1", "key": "k", "d": "{tmp_path}"}}'


def test_p14_a_tool_calls_status_only_moves_forward_and_a_tool_call_starts_it_anew() -> None:
    statuses: dict[tuple[str, str], str] = {}

    def step(session: str, kind: str, call: str, status: str | None = None) -> str | None:
        update = {"sessionUpdate": kind, "toolCallId": call}
        if status is not None:
            update["status"] = status
        return wire.tool_status_step(statuses, session, update)

    assert step("s", "tool_call_update", "c1", "completed") == (
        "a tool_call_update names call 'c1', never announced by a tool_call"
    )
    assert step("t", "tool_call", "c1") is None  # another session's call of the same id
    assert step("s", "tool_call_update", "c1") is not None
    assert step("s", "tool_call", "c1") is None  # pending by default
    for status in ("pending", "in_progress", "in_progress", None, "failed", "failed"):
        assert step("s", "tool_call_update", "c1", status) is None, status
    assert step("s", "tool_call_update", "c1", "completed") == (
        "tool call 'c1' went from failed back to completed"
    )
    assert step("s", "tool_call_update", "c1", "in_progress") is not None
    assert step("s", "tool_call", "c1", "completed") is None  # a load's replay starts anew
    assert step("s", "tool_call_update", "c1", "completed") is None
    assert step("s", "tool_call", "c2", "in_progress") is None
    assert step("s", "tool_call_update", "c2", "pending") == (
        "tool call 'c2' went from in_progress back to pending"
    )
    assert step("s", "agent_message_chunk", "c9") is None


def test_shrinking_past_its_budget_ends_with_the_smallest_program_found() -> None:
    # A pass whose first failure was found longer ago than the budget refuses the next
    # example with ShrinkingCut (a BaseException: Hypothesis ends its run at once); one
    # within the budget, or with nothing found yet, starts as usual.
    started: list[int] = []

    class Machine:
        violations: ClassVar[list[object]] = []
        latest: ClassVar[list[tuple[float, object]]] = []

        def __init__(self) -> None:
            started.append(1)

    cut_shrinking_after(Machine, 60.0)  # type: ignore[arg-type]
    Machine()
    found = violation(EXITS_AT_EOF, "still running")
    Machine.violations.append(found)
    Machine.latest.append((time.monotonic() - 30, found))
    Machine()
    assert len(started) == 2
    Machine.latest[0] = (time.monotonic() - 61, found)
    with pytest.raises(ShrinkingCut):
        Machine()
    assert len(started) == 2
