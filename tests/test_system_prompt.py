"""The default system prompt of `chat` and `acp`, and the ways to replace it (issue 19, item 4).

In process: what `coding_system_prompt` says, which prompt wins, and that the chat and the ACP
server send it with each request. As processes: `--system-prompt`, `--system-prompt-file` and
`''`, read back through the offline model's `/system`, and the one line a file that cannot be
read gives.
"""

from __future__ import annotations

import pathlib
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Sequence

import pytest
import trio

from trio_agents import (
    AgentOptions,
    BashTools,
    MemoryStore,
    ModelRequest,
    Tool,
    coding_system_prompt,
    function_tool,
)
from trio_agents._agent._system_prompt import with_system_prompt
from trio_agents.testing import ScriptedModel, reply

from .support.acp_peer import acp_peer
from .support.acp_process import AcpProcess
from .support.chat import ChatRun, FakeTerminal, config


@function_tool
async def lookup(word: str) -> str:
    """Look a word up in the project's glossary. It answers with the definition."""
    return word


def test_the_prompt_names_the_directory_the_platform_and_each_tools_purpose() -> None:
    tools = [*BashTools().tools, lookup]
    text = coding_system_prompt("/work/project", tools, platform="TestOS 1.0 (x86_64)")
    assert "Working directory: /work/project (relative paths and commands start here)." in text
    assert "Platform: TestOS 1.0 (x86_64)." in text
    # The first sentence of each description, not the whole of it.
    assert "- bash: Run a shell command with `bash -c` in a fresh shell.\n" in text
    assert "- lookup: Look a word up in the project's glossary.\n" in text
    assert "answers with the definition" not in text
    assert "bash_output" in text
    assert "bash_kill" in text
    assert coding_system_prompt("/work/project", tools, platform="TestOS 1.0 (x86_64)") == text


def test_without_tools_it_says_so_and_the_platform_defaults_to_this_machine() -> None:
    text = coding_system_prompt(pathlib.Path("/srv"))
    assert "Working directory: /srv " in text
    assert f"Platform: {platform.system()} {platform.release()}" in text
    assert "You have no tools in this session" in text
    assert "run_in_background" not in text


def test_a_long_first_sentence_is_clipped() -> None:
    @function_tool(description="x" * 500)
    def wide() -> str:
        return ""

    line = next(line for line in coding_system_prompt("/", [wide]).splitlines() if "wide" in line)
    assert len(line) < 200
    assert line.endswith("…")


def test_options_with_a_prompt_win_and_none_or_empty_send_none() -> None:
    tools: Sequence[Tool] = ()
    mine = AgentOptions(system_prompt="mine", max_steps=3)
    assert with_system_prompt(mine, coding_system_prompt, "/", tools) is mine
    assert with_system_prompt(None, None, "/", tools) is None
    assert with_system_prompt(None, "", "/", tools) is None
    plain = AgentOptions(max_steps=2)
    made = with_system_prompt(plain, "be brief", "/", tools)
    assert made == AgentOptions(max_steps=2, system_prompt="be brief")
    built = with_system_prompt(None, lambda cwd, _: f"in {cwd}", "/w", tools)
    assert built is not None
    assert built.system_prompt == "in /w"


def test_a_prompt_function_that_returns_no_text_is_named() -> None:
    def broken(cwd: str, tools: Sequence[Tool]) -> str:
        return 42  # type: ignore[return-value]

    with pytest.raises(TypeError, match=r"the system prompt function .*broken.* returned int"):
        with_system_prompt(None, broken, "/", ())


def always(model: ScriptedModel) -> Callable[[], ScriptedModel]:
    return lambda: model


def recording() -> tuple[list[ModelRequest], ScriptedModel]:
    model = ScriptedModel([reply("ok")] * 4)
    return model.requests, model


async def test_the_chat_sends_the_default_prompt_with_its_directory_and_tools() -> None:
    requests, model = recording()
    store, term = MemoryStore(), FakeTerminal()
    chat = ChatRun(term, config(store, lambda: model, cwd="/work/here"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("hello")
        await term.expect("ok\n> ")
        term.end_input()
        assert await chat.exit_code() == 0
    first = requests[0].messages[0]
    assert first.role == "system"
    assert "Working directory: /work/here " in first.content
    assert "- bash: " in first.content
    assert [m.role for m in requests[0].messages] == ["system", "user"]


async def test_the_chat_sends_a_given_prompt_or_none() -> None:
    for given, expected in (("Be brief.", ["system", "user"]), (None, ["user"])):
        requests, model = recording()
        term = FakeTerminal()
        chat = ChatRun(term, config(MemoryStore(), always(model), system_prompt=given))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(chat.run)
            term.type("hello")
            await term.expect("ok\n> ")
            term.end_input()
            await chat.exit_code()
        assert [m.role for m in requests[0].messages] == expected
        if given is not None:
            assert requests[0].messages[0].content == given


@pytest.mark.subprocess
async def test_each_acp_session_gets_the_prompt_of_its_own_directory(
    tmp_path: pathlib.Path,
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    async with acp_peer() as peer:
        for cwd in (one, two):
            result = await peer.result("session/new", {"cwd": str(cwd), "mcpServers": []})
            sid = result["sessionId"]
            prompt = [{"type": "text", "text": "/system"}]
            await peer.result("session/prompt", {"sessionId": sid, "prompt": prompt})
            said = "".join(
                u["content"]["text"]
                for u in peer.updates(sid)
                if u["sessionUpdate"] == "agent_message_chunk"
            )
            assert said.startswith("system prompt:\nYou are a coding agent")
            assert f"Working directory: {cwd} " in said
            assert "- bash_kill: " in said


def acp_system_prompt(tmp_path: pathlib.Path, *flags: str) -> str:
    """What `/system` answers in a session of `trio-agents acp FLAGS`."""
    server = AcpProcess(tmp_path / "s.db", *flags)
    try:
        server.initialize()
        sid = server.new_session(tmp_path)
        server.answer(server.prompt(sid, "/system"))
        return "".join(
            f["params"]["update"]["content"]["text"]
            for f in server.frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
    finally:
        server.close()


@pytest.mark.subprocess
def test_acp_flags_replace_the_prompt_or_send_none(tmp_path: pathlib.Path) -> None:
    assert acp_system_prompt(tmp_path, "--system-prompt", "Be brief.") == (
        "system prompt:\nBe brief."
    )
    assert acp_system_prompt(tmp_path, "--system-prompt", "") == "(no system prompt)"
    file = tmp_path / "prompt.md"
    file.write_text("From a file.\nTwo lines.\n", encoding="utf-8")
    assert acp_system_prompt(tmp_path, "--system-prompt-file", str(file)) == (
        "system prompt:\nFrom a file.\nTwo lines.\n"
    )


@pytest.mark.subprocess
@pytest.mark.parametrize("command", ["acp", "chat"])
def test_a_prompt_file_that_cannot_be_read_is_one_line_naming_it(
    tmp_path: pathlib.Path, command: str
) -> None:
    missing = tmp_path / "nope.md"
    binary = tmp_path / "bin.md"
    binary.write_bytes(b"\xff\xfe\x00")
    for path, why in ((missing, "cannot read .*nope.md.*: No such file"), (binary, "not UTF-8")):
        done = subprocess.run(
            [sys.executable, "-m", "trio_agents._cli", command, "--system-prompt-file", str(path)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2
        assert "Traceback" not in done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert "argument --system-prompt-file" in last
        assert re.search(why, last), last


@pytest.mark.subprocess
def test_both_prompt_flags_at_once_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    (tmp_path / "b").write_text("b")
    done = subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", "acp", "--system-prompt", "a",
         "--system-prompt-file", str(tmp_path / "b")],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "not allowed with argument" in done.stderr


def run_acp(tmp_path: pathlib.Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`trio-agents acp` reading one `initialize` (with clientInfo), then end of input."""
    frame = (
        '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": '
        '{"protocolVersion": 1, "clientInfo": {"name": "probe", "version": "9.1"}}}\n'
    )
    return subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(tmp_path / "s.db"),
         *flags],
        input=frame, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.subprocess
def test_acp_says_on_stderr_what_it_serves_and_more_with_verbose(tmp_path: pathlib.Path) -> None:
    done = run_acp(tmp_path)
    assert done.returncode == 0
    assert '"id": 1' in done.stdout or '"id":1' in done.stdout  # stdout: frames only
    first = done.stderr.splitlines()[0]
    assert first.startswith("trio-agents acp ")
    assert (
        f": serving ACP on stdio; store {tmp_path / 's.db'}; model offline; mode ask;"
        " commands sandboxed with bubblewrap"
    ) in first
    assert "system prompt" not in first
    assert len(done.stderr.splitlines()) == 1  # nothing else at the default level

    verbose = run_acp(tmp_path, "--verbose", "--no-network", "--max-steps", "4")
    lines = verbose.stderr.splitlines()
    assert "commands sandboxed with bubblewrap, no network; system prompt the default;" in lines[0]
    assert "; system prompt the default; max steps 4; MCP start timeout 10 s;" in lines[0]
    assert any(line.endswith("initialize from probe 9.1") for line in lines[1:]), lines
    assert not any(line.startswith("{") for line in lines)

    # Commands that leave the sandbox are said at start, as the fallback is (D550).
    terminal = run_acp(tmp_path, "--client-terminal")
    assert terminal.returncode == 0
    assert (
        "; commands sandboxed with bubblewrap; foreground ones in the editor's terminal when it"
        " offers one, NOT sandboxed"
    ) in terminal.stderr.splitlines()[0]
