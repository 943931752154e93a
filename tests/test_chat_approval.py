"""`trio-agents chat` asks before each bash command (issue 17): the answers, the policy and
the question (pure), the chat loop driven in process (one question at a time in call order,
an answer asked again, end of input and Ctrl-C while asked, the modes), the terminal's one
reader, and the real command in a pseudo-terminal answered `n`, `y`, Ctrl-C and `a`."""

from __future__ import annotations

import math
import os
import pathlib
import re
import signal

import pexpect
import pytest
import trio
import trio.testing

from tests.support.chat import (
    ChatRun,
    FakeTerminal,
    config,
    of_type,
    read_session,
    spawn_chat,
    stored,
)
from trio_agents import ApprovalRequest, MemoryStore, Record
from trio_agents._agent._mode_policy import ModePolicy
from trio_agents._cli._chat import run_chat
from trio_agents._cli._chat_approval import ACCEPTED, QUESTION, parse_answer
from trio_agents._cli._chat_render import Renderer
from trio_agents._cli._signals import Quit
from trio_agents._cli._terminal import open_stdio_terminal
from trio_agents.testing import ScriptedModel, reply, tool_step

REJECTED = "[error] the user rejected the call to 'bash'; it did not run"
INTERRUPTED = "[error] tool call 'bash' was interrupted before it finished"


# -- pure ----------------------------------------------------------------------------------------


def test_y_a_and_n_or_their_words_are_answers_and_nothing_else_is() -> None:
    assert [parse_answer(a) for a in ("y", " Yes ", "a", "ALWAYS", "n", "no")] == [
        "allow_once",
        "allow_once",
        "allow_always",
        "allow_always",
        "reject_once",
        "reject_once",
    ]
    assert [parse_answer(a) for a in ("", "yy", "sure", "!ls", "reject")] == [None] * 5


def request(tool: str, **arguments: object) -> ApprovalRequest:
    return ApprovalRequest("s1", "c1", 1, 1, tool, arguments)


def test_the_chat_asks_as_an_acp_session_does_in_each_mode() -> None:
    # One policy for both (D374): a tool it does not know asks, as a command does.
    policy = ModePolicy()
    # A file is read without asking and changed only when asked (D522).
    tools = ("bash", "bash_output", "bash_kill", "unknown", "read", "edit", "write")

    def verdicts() -> list[str]:
        return [policy.verdict(request(tool)) for tool in tools]

    assert verdicts() == ["ask", "allow", "allow", "ask", "allow", "ask", "ask"]
    policy.switch("auto")
    assert verdicts() == ["allow"] * 7
    policy.switch("read-only")
    assert verdicts() == ["reject", "allow", "reject", "reject", "allow", "reject", "reject"]
    assert policy.remembers


def test_the_question_repeats_a_call_only_when_other_lines_came_between() -> None:
    renderer = Renderer(width=40)
    call = Record.of("tool/call", {"call_id": "c1", "name": "bash", "arguments": {"command": "ls"}})
    assert renderer.record(call) == "[bash] ls\n"
    assert renderer.question("c1", "bash", {"command": "ls"}) == ""  # just shown
    assert renderer.question("c1", "bash", {"command": "ls"}) == "[bash] ls\n"
    # A command longer than its line, or of several lines, is shown in full.
    script = {"command": "cat <<EOF\nrm -rf /tmp/x\nEOF"}
    assert renderer.question("c2", "bash", script) == (
        "[bash] cat <<EOF ...\n    cat <<EOF\n    rm -rf /tmp/x\n    EOF\n"
    )
    long = "echo " + "x" * 40
    assert renderer.question("c3", "bash", {"command": long}).splitlines()[1:] == [
        "    " + long[:33] + "..."
    ]


# -- the loop, in process ------------------------------------------------------------------------


async def test_calls_of_one_step_are_asked_one_at_a_time_in_the_order_made() -> None:
    commands = [f"echo {n}" for n in range(1, 5)]
    model = ScriptedModel([tool_step(*(("bash", {"command": c}) for c in commands)), reply("ok")])
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, lambda: model))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("go")
        for command in commands:
            await term.expect(f"[bash] {command}\n{QUESTION}")
            assert term.output.count(QUESTION) == commands.index(command) + 1  # one at a time
            term.type("n")
            await term.expect(REJECTED)
        await term.expect("ok\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    records = (await stored(store)).records
    calls = [d["call_id"] for d in of_type(records, "tool/call")]
    approvals = of_type(records, "tool/approval")
    assert [d["call_id"] for d in approvals] == calls
    assert {(d["decision"], d["by"]) for d in approvals} == {("reject_once", "terminal")}
    results = of_type(records, "tool/result")
    assert all(d["rejected"] and d["is_error"] for d in results)
    assert all(str(d["content"]).startswith("the user rejected") for d in results)


async def test_another_answer_says_what_is_accepted_and_asks_again() -> None:
    model = ScriptedModel([tool_step(("bash", {"command": "rm -r build"})), reply("fine")])
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, lambda: model))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("clean up")
        await term.expect(f"[bash] rm -r build\n{QUESTION}")
        term.type("maybe")
        await term.expect(f"{ACCEPTED}\n{QUESTION}")
        assert "fine" not in term.output
        term.type("N")
        await term.expect(f"{REJECTED}\nfine\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    (approval,) = of_type((await stored(store)).records, "tool/approval")
    assert (approval["decision"], approval["by"]) == ("reject_once", "terminal")


async def test_end_of_input_while_asked_rejects_and_ends_the_chat() -> None:
    model = ScriptedModel([tool_step(("bash", {"command": "make"})), reply("not run, then")])
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, lambda: model))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("build it")
        await term.expect(QUESTION)
        term.end_input()
        assert await chat.exit_code() == 0
    await term.expect(f"\n{REJECTED} (end of input)\nnot run, then\n> \nsession s1 kept")
    records = (await stored(store)).records
    (approval,) = of_type(records, "tool/approval")
    assert (approval["decision"], approval["note"]) == ("reject_once", "end of input")
    assert [dict(d["reason"]) for d in of_type(records, "turn/end")] == [{"kind": "completed"}]  # type: ignore[call-overload]


async def test_ctrl_c_while_asked_cancels_the_turn_and_the_chat_carries_on() -> None:
    # Two calls: the first is asked, the second waits its turn; Ctrl-C ends both.
    step = tool_step(("bash", {"command": "touch a"}), ("bash", {"command": "touch b"}))
    model = ScriptedModel([step], default=lambda request: reply("still here"))
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, lambda: model))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("touch both")
        await term.expect(f"[bash] touch a\n{QUESTION}")
        chat.ctrl_c()
        await term.expect(f"\n{INTERRUPTED}\n{INTERRUPTED}\n[cancelled]\n> ")
        assert term.output.count(QUESTION) == 1  # the second call was never asked
        term.type("hello")
        await term.expect("still here\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    records = (await stored(store)).records
    (approval,) = of_type(records, "tool/approval")
    assert (approval["decision"], approval["by"]) == ("cancel", "terminal")
    ends = [dict(d["reason"]) for d in of_type(records, "turn/end")]  # type: ignore[call-overload]
    cancelled = {"kind": "aborted", "reason": "approval cancelled", "cause": "user"}
    assert ends == [cancelled, {"kind": "completed"}]
    assert all(d.get("interrupted") for d in of_type(records, "tool/result"))


@pytest.mark.subprocess  # mode auto runs a real command
async def test_mode_auto_runs_without_asking_and_mode_ask_asks_again() -> None:
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, mode="auto"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        await term.expect("mode auto: bash commands run without asking (/mode ask)\n")
        term.type("!echo ran-unasked")
        await term.expect_soon("[bash] echo ran-unasked\n[ok] ran-unasked\n")
        await term.expect("> ")
        term.type("/mode sometimes")
        await term.expect("unknown mode 'sometimes': /mode ask asks before each bash command")
        term.type("/mode read-only")
        await term.expect("mode read-only: bash commands are rejected without asking")
        term.type("!echo refused")
        await term.expect_soon("[bash] echo refused\n")
        await term.expect("> ")
        term.type("/mode ask")
        await term.expect("mode ask: each bash command is shown and asked before it runs")
        term.type("!echo asked")
        await term.expect(f"[bash] echo asked\n{QUESTION}")
        term.type("n")
        await term.expect(REJECTED)
        await term.expect("> ")
        term.type("/mode")
        await term.expect("mode ask: ")
        term.end_input()
        assert await chat.exit_code() == 0
    records = (await stored(store)).records
    assert [d["content"] for d in of_type(records, "user/message")] == [
        "!echo ran-unasked",
        "!echo refused",
        "!echo asked",
    ]
    # Mode auto records nothing: the policy let the call run without a decision. Mode
    # read-only rejects without asking, by the policy.
    approvals = [(d["decision"], d["by"]) for d in of_type(records, "tool/approval")]
    assert approvals == [("reject_once", "policy"), ("reject_once", "terminal")]


async def test_a_quit_while_asked_closes_the_turn_without_a_decision() -> None:
    model = ScriptedModel([tool_step(("bash", {"command": "touch x"}))])
    store, term = MemoryStore(), FakeTerminal()
    send, receive = trio.open_memory_channel[object](math.inf)
    codes: list[int] = []

    async def run() -> None:
        codes.append(await run_chat(term, config(store, lambda: model), receive))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        term.type("touch it")
        await term.expect(QUESTION)
        send.send_nowait(Quit(signal.SIGTERM))
    assert codes == [143]
    records = (await stored(store)).records
    assert of_type(records, "tool/approval") == []
    assert [dict(d["reason"]) for d in of_type(records, "turn/end")] == [{"kind": "closed"}]  # type: ignore[call-overload]
    assert all(d.get("interrupted") for d in of_type(records, "tool/result"))


@pytest.mark.subprocess  # `a` runs a real command
async def test_a_resumed_session_keeps_an_earlier_a_and_says_so() -> None:
    store = MemoryStore()
    first, term = (
        ScriptedModel(
            [tool_step(("bash", {"command": "echo one", "description": "say one"})), reply("ok")]
        ),
        FakeTerminal(),
    )
    chat = ChatRun(term, config(store, lambda: first))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("go")
        await term.expect(QUESTION)
        term.type("a")
        await term.expect_soon("[ok] one\nok\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    again, term = (
        ScriptedModel(
            [tool_step(("bash", {"command": "echo two", "description": "say two"})), reply("ok")]
        ),
        FakeTerminal(),
    )
    chat = ChatRun(term, config(store, lambda: again, session_id="s1"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        await term.expect("bash calls run without asking: an earlier answer in this session\n")
        term.type("go on")
        await term.expect_soon("[bash] echo two\n[ok] two\nok\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    assert QUESTION not in term.output
    approvals = of_type((await stored(store)).records, "tool/approval")
    assert [(d["decision"], d["by"]) for d in approvals] == [
        ("allow_always", "terminal"),
        ("allow_always", "remembered"),
    ]


# -- the terminal's one reader -------------------------------------------------------------------


@pytest.mark.realtime  # worker threads
async def test_a_cancelled_read_of_the_terminal_loses_no_line() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    try:
        async with open_stdio_terminal(in_read, out_write) as terminal:
            async with trio.open_nursery() as nursery:  # a question cancelled unanswered
                nursery.start_soon(terminal.readline)
                await trio.testing.wait_all_tasks_blocked()  # it waits, the reader reads
                nursery.cancel_scope.cancel()
            os.write(in_write, b"y\nnext prompt\n")
            os.close(in_write)
            lines = [await terminal.readline() for _ in range(3)]
        assert lines == ["y", "next prompt", None]
    finally:
        for fd in (in_read, out_read, out_write):
            os.close(fd)


# -- the command in a pseudo-terminal ------------------------------------------------------------


@pytest.mark.subprocess
def test_a_person_answers_n_then_y_then_ctrl_c_then_a(tmp_path: pathlib.Path) -> None:
    child = spawn_chat(tmp_path)
    try:
        child.expect(r"session (\S+) \(resume with: ")
        match = child.match
        assert isinstance(match, re.Match)
        sid = match.group(1)
        child.expect_exact("mode ask: each bash command is shown and asked before it runs")
        child.expect_exact("\r\n> ")
        # n: the command does not run, and the model is told.
        child.sendline("!touch no.txt")
        child.expect_exact(f"[bash] touch no.txt\r\n{QUESTION}")
        child.sendline("n")
        child.expect_exact(f"{REJECTED}\r\n")
        child.expect_exact("tool said:\r\nthe user rejected the call to 'bash'; it did not run")
        child.expect_exact("\r\n> ")
        assert not (tmp_path / "no.txt").exists()
        # y: it runs.
        child.sendline("!touch yes.txt")
        child.expect_exact(f"[bash] touch yes.txt\r\n{QUESTION}")
        child.sendline("y")
        child.expect_exact("[ok] (no output)\r\n")
        child.expect_exact("\r\n> ")
        assert (tmp_path / "yes.txt").exists()
        # Ctrl-C while asked: the turn is cancelled, nothing ran, the chat goes on.
        child.sendline("!touch cancelled.txt")
        child.expect_exact(f"[bash] touch cancelled.txt\r\n{QUESTION}")
        child.sendintr()
        child.expect_exact(f"{INTERRUPTED}\r\n[cancelled]\r\n> ")
        child.sendline("still there?")
        child.expect_exact("echo: still there?\r\n> ")
        assert not (tmp_path / "cancelled.txt").exists()
        # a: it runs, and so does the next command, unasked.
        child.sendline("!touch always.txt")
        child.expect_exact(f"[bash] touch always.txt\r\n{QUESTION}")
        child.sendline("a")
        child.expect_exact("[ok] (no output)\r\n")
        child.expect_exact("\r\n> ")
        child.sendline("!touch unasked.txt")
        child.expect_exact("[bash] touch unasked.txt\r\n[ok] (no output)\r\n")
        child.expect_exact("\r\n> ")
        child.sendeof()
        child.expect_exact(f"session {sid} kept; resume with: ")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert (child.exitstatus, child.signalstatus) == (0, None)
    assert {p.name for p in tmp_path.glob("*.txt")} == {"yes.txt", "always.txt", "unasked.txt"}

    records = read_session(tmp_path / "s.db", sid).records
    decisions = [(d["decision"], d["by"]) for d in of_type(records, "tool/approval")]
    assert decisions == [
        ("reject_once", "terminal"),
        ("allow_once", "terminal"),
        ("cancel", "terminal"),
        ("allow_always", "terminal"),
        ("allow_always", "remembered"),
    ]
    ends = [dict(d["reason"]) for d in of_type(records, "turn/end")]  # type: ignore[call-overload]
    cancelled = {"kind": "aborted", "reason": "approval cancelled", "cause": "user"}
    completed = {"kind": "completed"}
    assert ends == [completed, completed, cancelled, completed, completed, completed]
