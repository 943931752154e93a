"""`trio-agents chat` (issue 8): the pure rendering, the chat loop driven in process (a fake
terminal, interrupts from a channel, the autojump clock), the stdio terminal over pipes, and
the real command in a pseudo-terminal, typed at and interrupted as a person would."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence

import pexpect
import pytest
import trio
import trio.lowlevel
import trio.testing

from tests.support.chat import (
    TIMEOUT,
    ChatRun,
    FakeTerminal,
    config,
    of_type,
    read_session,
    spawn_chat,
    stored,
    wait_for,
)
from trio_agents import (
    MemoryStore,
    Model,
    Record,
    open_runtime,
)
from trio_agents._agent._options import AgentOptions
from trio_agents._cli import _chat as chat_cli
from trio_agents._cli._chat import (
    CANCEL_REASON,
    Chat,
    ChatConfig,
    StdioTerminal,
    open_stdio_terminal,
    resolve_model,
)
from trio_agents._cli._chat_approval import QUESTION
from trio_agents._cli._chat_render import (
    PROMPT,
    Renderer,
    describe_call,
    describe_end,
    describe_result,
    replay_summary,
)
from trio_agents._cli._main import main
from trio_agents._model._offline import OfflineModel
from trio_agents.testing import ScriptedModel, reply, tool_step

BIN = pathlib.Path(sys.executable).parent


# -- rendering (pure) ----------------------------------------------------------------------


def test_a_tool_call_is_its_name_and_main_argument() -> None:
    assert describe_call("bash", {"command": "ls -l", "description": "list"}) == "[bash] ls -l"
    background = {"command": "sleep 9", "description": "d", "run_in_background": True}
    assert describe_call("bash", background) == "[bash] sleep 9  (in the background)"
    assert describe_call("bash", {"command": "a\nb"}) == "[bash] a ..."
    assert describe_call("bash_output", {"job_id": "bash-1"}) == "[bash_output] bash-1"
    assert describe_call("edit", {"path": "x", "n": 2}) == '[edit] {"path":"x","n":2}'
    assert describe_call("noargs", {}) == "[noargs] {}"
    assert len(describe_call("bash", {"command": "x" * 500})) == 200


def test_control_characters_are_made_visible() -> None:
    assert describe_call("bash", {"command": "printf '\x1b[2J'"}) == "[bash] printf '^[[2J'"
    assert describe_result("a\x07b\x9bc", False) == ["[ok] a^Gb\\x9bc"]
    assert Renderer().text("red \x1b[31m\r") == "red ^[[31m^M"


def test_a_result_is_clipped_under_its_status() -> None:
    assert describe_result("hi\n", False) == ["[ok] hi"]
    assert describe_result("", False) == ["[ok] (no output)"]
    assert describe_result("boom", True) == ["[error] boom"]
    lines = describe_result("\n".join(str(i) for i in range(20)), False, max_lines=3)
    assert lines == ["[ok] 0", "     1", "     2", "     ... 17 more lines"]
    assert describe_result("x" * 300, True, width=10) == ["[error] xxxxxxx..."]


@pytest.mark.parametrize(
    ("reason", "line"),
    [
        ({"kind": "completed"}, None),
        ({"kind": "aborted", "reason": CANCEL_REASON, "cause": "user"}, "[cancelled]"),
        ({"kind": "aborted", "reason": "r", "cause": "parent"}, "[cancelled by its parent]"),
        ({"kind": "aborted", "reason": "step-timeout", "cause": "timeout"}, "[step timed out]"),
        ({"kind": "aborted", "reason": "why", "cause": "step"}, "[aborted: why]"),
        ({"kind": "error", "message": "RuntimeError: x"}, "[error: RuntimeError: x]"),
        ({"kind": "max_steps"}, "[max steps]"),
        ({"kind": "closed"}, "[closed]"),
        ({"kind": "interrupted"}, "[interrupted: the process stopped during this turn]"),
    ],
)
def test_a_turn_says_how_it_ended_unless_it_completed(
    reason: dict[str, str], line: str | None
) -> None:
    assert describe_end(reason) == line


def rec(type: str, **data: object) -> Record:
    return Record.of(type, data)


def turn(number: int, prompt: str, answer: str, end: dict[str, str] | None = None) -> list[Record]:
    return [
        rec("turn/start", turn=number),
        rec("user/message", id=f"m{number}", content=prompt),
        rec("step/start", turn=number, step=1),
        rec("assistant/message", content=answer, finish="stop"),
        rec("step/end", turn=number, step=1),
        rec("turn/end", turn=number, reason=end or {"kind": "completed"}),
    ]


def test_live_output_starts_a_line_for_each_record_after_streamed_text() -> None:
    renderer = Renderer()
    out = [
        renderer.record(rec("user/message", id="m1", content="go")),  # echoed by the terminal
        renderer.text("looking"),
        renderer.record(rec("assistant/message", content="looking", finish="tool_calls")),
        renderer.record(rec("tool/call", call_id="c", name="bash", arguments={"command": "ls"})),
        renderer.record(rec("tool/result", call_id="c", content="a\nb", is_error=False)),
        renderer.record(rec("context/message", id="m2", content="job done\nmore")),
        renderer.text("done"),
        renderer.record(rec("turn/end", turn=1, reason={"kind": "completed"})),
        renderer.finish(),
    ]
    assert "".join(out) == "looking\n[bash] ls\n[ok] a\n     b\n[context] job done\ndone\n"


def test_an_interrupted_reply_is_followed_by_how_the_turn_ended() -> None:
    renderer = Renderer()
    text = renderer.text("holding...")
    end = {"kind": "aborted", "reason": CANCEL_REASON, "cause": "user"}
    text += renderer.record(rec("assistant/message", content="holding...", interrupted=True))
    text += renderer.record(rec("turn/end", turn=1, reason=end))
    assert text == "holding...\n[cancelled]\n"


def test_a_replay_shows_the_last_turns_and_counts_them_all() -> None:
    records = [
        *turn(1, "one", "first answer"),
        *turn(2, "two\nlines", "second"),
        *turn(3, "three", "", {"kind": "error", "message": "E"}),
    ]
    summary = replay_summary(records, turns=2)
    assert summary == (
        "3 earlier turns; the last 2:\n"
        "> two\n  lines\nsecond\n"
        "> three\n[error: E]\n"
        "(end of history)\n"
    )
    assert replay_summary(records[:6], turns=5).startswith("1 earlier turn:\n> one\nfirst answer\n")
    assert replay_summary([]) == "no earlier turns\n"
    assert replay_summary(records, turns=0) == "3 earlier turns\n"


def test_auto_uses_a_configured_endpoint_and_otherwise_says_it_is_offline() -> None:
    models: dict[str, Callable[[], Model]] = {"offline": OfflineModel, "remote": OfflineModel}
    name, note = resolve_model("auto", models=models, auto=[])
    assert name == "offline"
    assert "no model endpoint is configured" in note
    assert "not a language model" in note
    assert resolve_model("auto", models=models, auto=[("remote", lambda: False)])[0] == "offline"
    name, note = resolve_model("auto", models=models, auto=[("remote", lambda: True)])
    assert (name, note) == ("remote", "model remote (auto: its endpoint is configured)")
    # A candidate the registry does not have is skipped, not used.
    assert resolve_model("auto", models=models, auto=[("gone", lambda: True)])[0] == "offline"
    assert resolve_model("remote", models=models) == ("remote", "model remote")
    assert resolve_model("offline")[0] == "offline"
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        resolve_model("nope", models=models)


# -- the loop, in process ----------------------------------------------------------------------


async def test_a_conversation_streams_cancels_on_ctrl_c_and_ends_at_eof() -> None:
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        await term.expect("model offline\nsession s1 (resume with: trio-agents chat --session s1)")
        await term.expect("Ctrl-D quits.\n> ")
        term.type("hello")
        await term.expect("echo: hello\n> ")
        term.type("   ")  # a blank line sends nothing
        await term.expect("> ")
        term.type("/hold")
        await term.expect("holding until you cancel...")
        chat.ctrl_c()
        await term.expect("\n[cancelled]\n> ")  # right after the interrupted reply
        term.type("/fail")
        await term.expect("[error: RuntimeError: the offline model was asked to fail (/fail)]\n> ")
        term.type("still there?")
        await term.expect("echo: still there?\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    assert term.output.endswith("> \nsession s1 kept; resume with: trio-agents chat --session s1\n")
    records = (await stored(store)).records
    assert [d["content"] for d in of_type(records, "user/message")] == [
        "hello",
        "/hold",
        "/fail",
        "still there?",
    ]
    ends = [d["reason"] for d in of_type(records, "turn/end")]
    assert [dict(end) for end in ends] == [  # type: ignore[call-overload]
        {"kind": "completed"},
        {"kind": "aborted", "reason": CANCEL_REASON, "cause": "user"},
        {"kind": "error", "message": "RuntimeError: the offline model was asked to fail (/fail)"},
        {"kind": "completed"},
    ]
    assert (await stored(store)).header["cwd"] == "/"
    assert term.errors == []


async def test_ctrl_c_at_the_prompt_leaves_with_130_and_keeps_the_session() -> None:
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, store_option=" --store /x"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("hi")
        await term.expect("echo: hi\n> ")
        chat.ctrl_c()
        assert await chat.exit_code() == 130
    assert term.output.endswith(
        "> \nsession s1 kept; resume with: trio-agents chat --store /x --session s1\n"
    )
    assert len(of_type((await stored(store)).records, "turn/end")) == 1


async def test_a_second_ctrl_c_while_the_turn_unwinds_changes_nothing() -> None:
    model = ScriptedModel([reply("x", hold=True), reply("after")])
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, lambda: model))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("go")
        await term.expect("> ")
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1
        chat.ctrl_c()
        chat.ctrl_c()  # delivered together: the second finds the turn already cancelled
        await term.expect("[cancelled]\n> ")
        term.type("again")
        await term.expect("after\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    assert "[cancelled]" not in term.output.split("[cancelled]", 1)[1]


async def test_ctrl_c_while_starting_leaves_before_any_session_exists() -> None:
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store))
    chat.ctrl_c()  # pressed before the runtime is open
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        assert await chat.exit_code() == 130
    assert "session s1" not in term.output
    assert not await store.exists("s1")


async def test_a_ctrl_c_that_lands_as_a_line_is_read_still_leaves() -> None:
    store = MemoryStore()
    chats: list[Chat] = []

    class RacingTerminal(FakeTerminal):
        async def readline(self) -> str | None:
            await trio.lowlevel.checkpoint()
            chats[0].interrupt()  # at the prompt: leave, even though a line arrives
            return "this is never sent"

    term = RacingTerminal()
    chat = Chat(term, config(store))
    chats.append(chat)
    assert await chat.run() == 130
    assert term.output.endswith("> \nsession s1 had no turns; nothing was stored\n")
    assert not await store.exists("s1")


async def test_a_ctrl_c_as_the_agent_opens_leaves_without_waiting_for_a_line() -> None:
    # Between the start (whose scope a Ctrl-C cancels) and the first prompt, entering the
    # agent's handle is a checkpoint where the SIGINT receiver can run. A write made then is
    # the same moment: the chat is still starting.
    store = MemoryStore()
    chats: list[Chat] = []

    class OpeningTerminal(FakeTerminal):
        def write(self, text: str) -> None:
            super().write(text)
            if text.startswith("model offline"):
                chats[0].interrupt()

    term = OpeningTerminal()  # no line is ever typed, and input never ends
    chat = Chat(term, config(store))
    chats.append(chat)
    code: int | None = None
    with trio.move_on_after(60):  # virtual: fires only if the chat waits for a line
        code = await chat.run()
    assert code == 130
    assert term.output.endswith("> \nsession s1 had no turns; nothing was stored\n")


async def test_a_model_endpoint_that_is_not_configured_is_an_error_with_exit_code_2() -> None:
    def unconfigured() -> Model:
        raise ValueError("OPENAI_MODEL is not set: set it to the model your endpoint serves")

    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, unconfigured))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        assert await chat.exit_code() == 2
    assert term.errors == [
        "trio-agents chat: OPENAI_MODEL is not set: set it to the model your endpoint serves"
    ]
    assert PROMPT not in term.output
    assert not await store.exists("s1")


async def test_max_steps_and_tool_results_are_shown() -> None:
    model = ScriptedModel([tool_step(("bash_output", {"job_id": "bash-7"}))] * 3)
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, lambda: model, options=AgentOptions(max_steps=2)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("loop")
        await term.expect("[bash_output] bash-7\n[error] unknown job 'bash-7'")
        await term.expect("[bash_output] bash-7\n[error] unknown job 'bash-7'")
        await term.expect("[max steps]\n> ")
        term.end_input()
        assert await chat.exit_code() == 0


@pytest.mark.realtime  # the tools read and write in a worker thread
async def test_the_chat_has_the_file_tools_in_its_working_directory(
    tmp_path: pathlib.Path,
) -> None:
    # The file tools an ACP session has (D515): the offline model's /tool calls them.
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, cwd=str(tmp_path), mode="auto"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type('/tool write {"path": "notes.txt", "content": "one\\ntwo\\n"}')
        await term.expect_soon("> ")
        term.type('/tool edit {"path": "notes.txt", "old_string": "two", "new_string": "2"}')
        await term.expect_soon("> ")
        term.type('/tool read {"path": "../outside.txt"}')
        await term.expect_soon("outside the working directory")
        term.end_input()
        assert await chat.exit_code() == 0
    assert (tmp_path / "notes.txt").read_text() == "one\n2\n"
    assert not (tmp_path.parent / "outside.txt").exists()


async def test_resuming_replays_the_history_before_the_prompt() -> None:
    store = MemoryStore()
    first = FakeTerminal()
    chat = ChatRun(first, config(store))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        for prompt in ("one", "two", "three", "four"):
            first.type(prompt)
        first.end_input()
        assert await chat.exit_code() == 0
    term = FakeTerminal()
    chat = ChatRun(term, config(store, session_id="s1"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        await term.expect("resumed session s1 (resume with: trio-agents chat --session s1)\n")
        await term.expect("4 earlier turns; the last 3:\n> two\n[offline model")
        await term.expect("echo: four\n(end of history)\n")
        await term.expect("> ")
        assert "> one" not in term.output
        term.type("five")
        await term.expect("echo: five\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    contents = [d["content"] for d in of_type((await stored(store)).records, "user/message")]
    assert contents == ["one", "two", "three", "four", "five"]


async def test_an_unknown_session_is_an_error_with_exit_code_2() -> None:
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, session_id="nope", store_option=" --store /x"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        assert await chat.exit_code() == 2
    assert term.errors == [
        "trio-agents chat: no session 'nope' in <MemoryStore 0 sessions>; "
        "list them with: trio-agents sessions list --store /x"
    ]
    assert PROMPT not in term.output


def test_a_missing_store_with_a_session_is_an_error_and_creates_nothing(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "none" / "s.db"
    assert main(["chat", "--store", str(path), "--session", "x"]) == 2
    assert f"no store at {path}, so no session 'x'" in capsys.readouterr().err
    assert not path.parent.exists()


def test_a_ctrl_c_outside_the_receiver_exits_130_even_when_a_nursery_wraps_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once the SIGINT receiver is closed, e.g. while the output drains to a paused terminal
    # or a reader that does not read, trio raises KeyboardInterrupt in the main task where it
    # waits, in a nursery: it reaches `trio.run` wrapped in an exception group.
    async def interrupted_while_draining(config: ChatConfig) -> int:
        async with trio.open_nursery():
            raise KeyboardInterrupt

    monkeypatch.setattr(chat_cli, "_main", interrupted_while_draining)
    assert main(["chat", "--model", "offline", "--store", str(tmp_path / "s.db")]) == 130


@pytest.mark.realtime  # worker threads
async def test_the_stdio_terminal_reads_lines_and_writes_in_order() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    try:
        os.write(in_write, "one\ntwo é\npart".encode())
        os.close(in_write)
        async with open_stdio_terminal(in_read, out_write) as terminal:
            assert [await terminal.readline() for _ in range(4)] == ["one", "two é", "part", None]
            for piece in ("a", "b\n", "ç"):
                terminal.write(piece)
        assert os.read(out_read, 100) == "ab\nç".encode()
    finally:
        for fd in (in_read, out_read, out_write):
            os.close(fd)


@pytest.mark.realtime
async def test_the_stdio_terminal_drops_output_once_it_is_broken() -> None:
    out_read, out_write = os.pipe()
    os.close(out_read)  # nobody will read: writing fails (EPIPE)
    in_fd = os.open(os.devnull, os.O_RDONLY)
    try:
        async with open_stdio_terminal(in_fd, out_write) as terminal:
            terminal.write("lost")
            assert await terminal.readline() is None  # end of input
            terminal.write("also lost")
        terminal.write("after the block: dropped, not raised")
        assert isinstance(terminal, StdioTerminal)
    finally:
        os.close(in_fd)
        os.close(out_write)


# -- the command in a pseudo-terminal ------------------------------------------------------------


@pytest.mark.subprocess
def test_a_person_chats_runs_a_command_cancels_a_turn_and_leaves(tmp_path: pathlib.Path) -> None:
    child = spawn_chat(tmp_path)
    try:
        child.expect_exact("model offline (auto: no model endpoint is configured")
        child.expect(r"session (\S+) \(resume with: trio-agents chat --store ")
        match = child.match
        assert isinstance(match, re.Match)
        sid = match.group(1)
        child.expect_exact("\r\n> ")
        child.sendline("hello there")
        child.expect_exact("echo: hello there\r\n> ")
        child.sendline("!echo hi")
        child.expect_exact(f"[bash] echo hi\r\n{QUESTION}")
        child.sendline("y")
        child.expect_exact("y\r\n[ok] hi\r\n")
        child.expect_exact("tool said:\r\nhi\r\n> ")
        child.sendline("/hold")
        child.expect_exact("holding until you cancel...")
        child.sendintr()
        child.expect_exact("[cancelled]\r\n> ")
        child.sendline("still there?")
        child.expect_exact("echo: still there?\r\n> ")
        child.sendeof()
        child.expect_exact(f"session {sid} kept; resume with: ")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert (child.exitstatus, child.signalstatus) == (0, None)

    session = read_session(tmp_path / "s.db", sid)
    records = session.records
    prompts = [d["content"] for d in of_type(records, "user/message")]
    assert prompts == ["hello there", "!echo hi", "/hold", "still there?"]
    (call,) = of_type(records, "tool/call")
    assert (call["name"], dict(call["arguments"])["command"]) == ("bash", "echo hi")  # type: ignore[call-overload]
    (result,) = of_type(records, "tool/result")
    assert (result["content"], result["is_error"]) == ("hi", False)
    ends = [dict(d["reason"]) for d in of_type(records, "turn/end")]  # type: ignore[call-overload]
    cancelled = {"kind": "aborted", "reason": CANCEL_REASON, "cause": "user"}
    assert ends == [{"kind": "completed"}, {"kind": "completed"}, cancelled, {"kind": "completed"}]
    interrupted = [d for d in of_type(records, "assistant/message") if d.get("interrupted")]
    assert interrupted == [{"content": "holding until you cancel...", "interrupted": True}]
    assert session.header["cwd"] == str(tmp_path)


def build_session(path: pathlib.Path, sid: str, prompts: Sequence[str]) -> None:
    async def build() -> None:
        async with open_runtime(path) as rt:
            handle = await rt.agents.create(model=OfflineModel(), session_id=sid)
            for prompt in prompts:
                handle.agent.send(prompt)
                await handle.agent.wait_idle()
            await handle.aclose()

    trio.run(build)


@pytest.mark.subprocess
def test_resuming_shows_the_history_and_ctrl_c_at_the_prompt_leaves(
    tmp_path: pathlib.Path,
) -> None:
    build_session(tmp_path / "s.db", "earlier", ["first question", "second question"])
    child = spawn_chat(tmp_path, "--session", "earlier")
    try:
        child.expect_exact("resumed session earlier")
        child.expect_exact("2 earlier turns:\r\n> first question\r\n")
        child.expect_exact("echo: first question\r\n> second question\r\n")
        child.expect_exact("echo: second question\r\n(end of history)\r\n")
        child.expect_exact("\r\n> ")
        # A command the turn's cancel must kill: the tool call is interrupted, then the turn.
        child.sendline("!touch started; sleep 60")
        child.expect_exact(f"[bash] touch started; sleep 60\r\n{QUESTION}")
        child.sendline("y")
        wait_for(lambda: (tmp_path / "started").exists())  # running, no longer asked
        child.sendintr()
        child.expect_exact("[error] tool call 'bash' was interrupted before it finished\r\n")
        child.expect_exact("[cancelled]\r\n> ")
        child.sendintr()  # the second Ctrl-C, at the prompt: leave
        child.expect_exact("session earlier kept; resume with: ")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert (child.exitstatus, child.signalstatus) == (130, None)
    records = read_session(tmp_path / "s.db", "earlier").records
    assert [d["content"] for d in of_type(records, "user/message")][-1] == (
        "!touch started; sleep 60"
    )
    last_end = dict(of_type(records, "turn/end")[-1]["reason"])  # type: ignore[call-overload]
    assert last_end == {"kind": "aborted", "reason": CANCEL_REASON, "cause": "user"}


def resume_chat(store: pathlib.Path, sid: str) -> subprocess.CompletedProcess[str]:
    """`trio-agents chat --store STORE --session SID` with no input."""
    return subprocess.run(
        [str(BIN / "trio-agents"), "chat", "--store", str(store), "--session", sid],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.subprocess
def test_an_unknown_session_exits_2_without_a_prompt(tmp_path: pathlib.Path) -> None:
    build_session(tmp_path / "s.db", "known", [])
    result = resume_chat(tmp_path / "s.db", "nope")
    assert result.returncode == 2, result.stderr
    assert "no session 'nope' in" in result.stderr
    assert PROMPT not in result.stdout


@pytest.mark.subprocess
def test_a_damaged_session_is_one_line_with_exit_code_1(tmp_path: pathlib.Path) -> None:
    # It was a traceback; `sessions show` and ACP's session/load already said it in a line.
    build_session(tmp_path / "s.db", "hurt", ["one"])
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as db, db:
        db.execute("UPDATE records SET data = '{broken' WHERE session_id = 'hurt' AND seq = 2")
    result = resume_chat(tmp_path / "s.db", "hurt")
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("trio-agents chat: session 'hurt' is damaged: record 2 "), line
    assert PROMPT not in result.stdout


@pytest.mark.parametrize("command", ["chat", "acp"])
def test_a_store_in_a_directory_that_does_not_exist_is_refused_and_makes_nothing(
    command: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A mistyped --store once made the whole tree of directories it named (D382).
    path = tmp_path / "typo" / "deeper" / "s.db"
    assert main([command, "--store", str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"trio-agents {command}: --store {path}: its directory {path.parent} does not exist; "
        "create it, or give another path"
    )
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", [["chat"], ["acp"], ["sessions", "list"]])
def test_an_empty_store_is_a_usage_error_not_the_current_directory(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--store", ""])
    assert exit_.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("argument --store: an empty value names no file; give a path or a URL")
    )
