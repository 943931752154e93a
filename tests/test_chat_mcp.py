"""`trio-agents chat --mcp FILE` (issue 18, acceptance 5): the configuration files and their
mistakes (one line, exit 2, nothing started), the MCP calls asked like bash, a server that
does not start, a Ctrl-C while one starts, and the real command in a pseudo-terminal calling
the reference server's tool and leaving, by end of input and by SIGTERM, with nothing of the
server (nor of the child it started) left in /proc."""

from __future__ import annotations

import json
import pathlib
import signal
import sys
from collections.abc import Sequence

import pexpect
import pytest
import trio

from tests.support.chat import ChatRun, FakeTerminal, config, spawn_chat
from tests.support.processes import descendants, gone
from trio_agents import ApprovalRequest, MemoryStore
from trio_agents._agent._mode_policy import ModePolicy
from trio_agents._cli._chat_approval import QUESTION
from trio_agents._cli._chat_mcp import read_mcp_files
from trio_agents._cli._main import main
from trio_agents._mcp._config import McpServer

CHECKOUT = str(pathlib.Path(__file__).resolve().parent.parent)
SERVER = ("-m", "agent_conformance._mcp_server")


def entry(*options: str) -> dict[str, object]:
    """The reference server as a configuration file names it."""
    return {
        "command": sys.executable,
        "args": [*SERVER, *options],
        "env": {"PYTHONPATH": CHECKOUT},
    }


def write(path: pathlib.Path, data: object) -> pathlib.Path:
    path.write_text(json.dumps(data))
    return path


def recorded_pids(record: pathlib.Path) -> list[int]:
    events = [json.loads(line) for line in record.read_text().splitlines() if line]
    return [e["pid"] for e in events if e["event"] in ("ready", "child")]


# -- the configuration files ---------------------------------------------------------------------


def test_the_servers_of_every_file_in_order(tmp_path: pathlib.Path) -> None:
    one = write(tmp_path / "one.json", {"mcpServers": {"a": entry(), "b": {"url": "http://h/"}}})
    two = write(tmp_path / "two.json", {"mcpServers": {"c": entry("--spawn-child")}})
    servers = read_mcp_files([one, two])
    assert not isinstance(servers, str)
    assert [(s.name, s.transport) for s in servers] == [
        ("a", "stdio"),
        ("b", "http"),
        ("c", "stdio"),
    ]
    assert servers[2].args == (*SERVER, "--spawn-child")
    assert read_mcp_files([]) == ()


def test_each_mistake_is_one_line_naming_the_file_and_the_entry(tmp_path: pathlib.Path) -> None:
    good = write(tmp_path / "good.json", {"mcpServers": {"fs": entry()}})
    bad_args = write(tmp_path / "args.json", {"mcpServers": {"fs": {"command": "x", "args": "y"}}})
    (tmp_path / "broken.json").write_text('{"mcpServers": {')
    (tmp_path / "latin1.json").write_bytes(b'{"mcpServers": {"\xe9": {}}}')
    cases = {
        tmp_path / "missing.json": f"--mcp {tmp_path}/missing.json: cannot read it: "
        "No such file or directory",
        tmp_path: f"--mcp {tmp_path}: cannot read it: Is a directory",
        tmp_path / "broken.json": f"--mcp {tmp_path}/broken.json: not JSON: Expecting property "
        "name enclosed in double quotes (line 1, column 17)",
        tmp_path / "latin1.json": f"--mcp {tmp_path}/latin1.json: not UTF-8 text",
        bad_args: f"--mcp {bad_args}: mcpServers.fs.args must be a list of strings, got 'y'",
        write(tmp_path / "list.json", {"mcpServers": []}): "mcpServers must be an object",
        write(tmp_path / "neither.json", {"mcpServers": {"x": {"args": []}}}): (
            'mcpServers.x needs "command" (a stdio server) or "url"'
        ),
    }
    for path, message in cases.items():
        said = read_mcp_files([good, path])
        assert isinstance(said, str), path
        assert message in said, (message, said)
        assert "\n" not in said
    twice = read_mcp_files([good, good])
    assert twice == (
        f"--mcp {good}: mcpServers.fs: {good} names a server 'fs' already; rename one of them"
    )


def test_a_bad_file_exits_2_with_one_line_before_anything_starts(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    code = main(["chat", "--store", str(store), "--mcp", str(tmp_path / "none.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"trio-agents chat: --mcp {tmp_path}/none.json: cannot read it: No such file or directory\n"
    )
    assert not store.exists()  # bad input loses nothing, and makes nothing


# -- asking ----------------------------------------------------------------------------------------


def test_mode_ask_asks_before_every_mcp_tool_call_and_mode_auto_never() -> None:
    policy = ModePolicy()
    tools = ("mcp__fs__read", "mcp__ref__echo", "bash", "bash_output", "mcpish")

    def verdicts() -> list[str]:
        return [policy.verdict(ApprovalRequest("s", "c", 1, 1, t, {})) for t in tools]

    # A tool the policy does not know asks, as a command does (fail closed, D374).
    assert verdicts() == ["ask", "ask", "ask", "allow", "ask"]
    policy.switch("auto")
    assert verdicts() == ["allow"] * 5


# -- the chat in process, with real servers --------------------------------------------------------


def reference(name: str, *options: str) -> McpServer:
    return McpServer(
        name, command=sys.executable, args=(*SERVER, *options), env=dict(PYTHONPATH=CHECKOUT)
    )


async def chat_exit(
    servers: Sequence[McpServer], *, ctrl_c_after: pathlib.Path | None = None
) -> tuple[int | None, FakeTerminal]:
    terminal = FakeTerminal()
    run = ChatRun(terminal, config(MemoryStore(), mcp_servers=tuple(servers), mode="auto"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run)
        if ctrl_c_after is not None:
            with trio.fail_after(30):
                while not await trio.Path(ctrl_c_after).exists():  # noqa: ASYNC110 - a process writes it
                    await trio.sleep(0.01)
            run.ctrl_c()
        code = await run.exit_code()
    return code, terminal


@pytest.mark.subprocess
async def test_a_server_that_does_not_start_is_exit_2_naming_it(tmp_path: pathlib.Path) -> None:
    code, terminal = await chat_exit([reference("ok"), reference("broken", "--crash-on-start")])
    assert code == 2
    (line,) = terminal.errors
    assert line.startswith("trio-agents chat: --mcp: ")
    assert "'broken'" in line
    assert "\n" not in line
    assert "session" not in terminal.output  # no agent was made
    assert descendants() == []


@pytest.mark.subprocess
async def test_ctrl_c_while_a_server_starts_leaves_130_and_nothing_running(
    tmp_path: pathlib.Path,
) -> None:
    record = tmp_path / "record.jsonl"
    mute = reference("mute", "--no-initialize", "--spawn-child", "--record", str(record))
    code, terminal = await chat_exit([mute], ctrl_c_after=record)
    assert code == 130
    assert terminal.errors == []
    pids = recorded_pids(record)
    assert len(pids) == 2
    assert [pid for pid in pids if not gone(pid)] == []
    assert descendants() == []


# -- the command in a pseudo-terminal --------------------------------------------------------------


def chat_with_the_reference_server(
    tmp_path: pathlib.Path, *options: str
) -> tuple[pexpect.spawn[str], pathlib.Path]:
    record = tmp_path / "record.jsonl"
    arguments = ("--record", str(record), "--spawn-child", *options)
    mcp = write(tmp_path / "mcp.json", {"mcpServers": {"ref": entry(*arguments)}})
    child = spawn_chat(tmp_path, "--mcp", str(mcp))
    child.expect_exact("mode ask: each bash command and MCP tool call is shown and asked")
    child.expect_exact("\r\n> ")
    # The offline model calls the tool by its name; the chat asks first, as for bash.
    child.sendline('/tool mcp__ref__echo {"text": "hi"}')
    child.expect_exact(f"[mcp__ref__echo] hi\r\n{QUESTION}")
    child.sendline("y")
    child.expect_exact("[ok] hi\r\n")
    child.expect_exact("tool said:\r\nhi\r\n> ")
    return child, record


def nothing_left(record: pathlib.Path) -> None:
    pids = recorded_pids(record)
    assert len(pids) == 2  # the server, and the child it started in its group
    assert [pid for pid in pids if not gone(pid)] == []


@pytest.mark.subprocess
def test_a_person_calls_an_mcp_tool_and_leaves_with_nothing_left(tmp_path: pathlib.Path) -> None:
    # The server exits when its stdin closes; the child it started in its group does not,
    # unless the close ends the whole group (what the SDK's own stdio client misses, D277).
    child, record = chat_with_the_reference_server(tmp_path)
    try:
        child.sendeof()
        child.expect_exact("kept; resume with: ")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert (child.exitstatus, child.signalstatus) == (0, None)
    nothing_left(record)


@pytest.mark.subprocess
def test_sigterm_closes_the_chat_and_its_mcp_servers(tmp_path: pathlib.Path) -> None:
    # A server that ignores SIGTERM, like its child: both are killed after the grace, and
    # the chat's teardown bound waits for that (D274).
    child, record = chat_with_the_reference_server(tmp_path, "--ignore-term")
    try:
        child.kill(signal.SIGTERM)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert (child.exitstatus, child.signalstatus) == (128 + signal.SIGTERM, None)
    nothing_left(record)
