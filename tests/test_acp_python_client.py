"""`trio-agents acp` driven by the real Python ACP client (`agent-client-protocol`, asyncio)
in this test process, against the server in a subprocess (issue 6, acceptance 1 and 5)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    CreateTerminalResponse,
    EnvVariable,
    FileEditToolCallContent,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    TerminalToolCallContent,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from .support.acp_sdk import RecordingClient, new_session, prompt, read_fifo_line, run, server
from .support.processes import with_marker

pytestmark = pytest.mark.subprocess


def test_a_session_streams_cancels_and_exits_0_at_end_of_input(tmp_path: pathlib.Path) -> None:
    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, process):
            init = client.init
            assert init.protocol_version == 1
            assert init.agent_capabilities is not None
            assert init.agent_capabilities.load_session is True
            with pytest.raises(RequestError) as relative:
                await conn.new_session(cwd="relative/dir", mcp_servers=[])
            assert relative.value.code == -32602
            sid = await new_session(conn, tmp_path)

            answer = await conn.prompt(session_id=sid, prompt=prompt("hello"))
            assert answer.stop_reason == "end_turn"
            assert client.text(sid).endswith("echo: hello")

            # A held model step: a second prompt is refused, a cancel ends the first.
            held = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt("/hold")))
            await client.wait_for(sid, "holding")
            with pytest.raises(RequestError) as second:
                await conn.prompt(session_id=sid, prompt=prompt("again"))
            assert second.value.code == -32602
            await conn.cancel(session_id=sid)
            assert (await held).stop_reason == "cancelled"
            seen = len(client.of(sid))
            await conn.cancel(session_id="no-such-session")  # a silent no-op
            # A round trip: anything the server wrote before its answer has arrived.
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert len(client.of(sid)) == seen, "an update arrived after the cancelled answer"

            # The session still works after the cancel.
            answer = await conn.prompt(session_id=sid, prompt=prompt("after"))
            assert answer.stop_reason == "end_turn"
            assert client.text(sid).endswith("echo: after")
        assert process.returncode == 0

    run(scenario())


def test_two_sessions_prompted_at_once_get_their_own_updates(tmp_path: pathlib.Path) -> None:
    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, _):
            a = await new_session(conn, tmp_path)
            b = await new_session(conn, tmp_path)
            answers = await asyncio.gather(
                conn.prompt(session_id=a, prompt=prompt("alpha " * 20)),
                conn.prompt(session_id=b, prompt=prompt("beta " * 20)),
            )
            assert [x.stop_reason for x in answers] == ["end_turn", "end_turn"]
            assert "alpha" in client.text(a)
            assert "beta" not in client.text(a)
            assert "beta" in client.text(b)
            assert "alpha" not in client.text(b)

    run(scenario())


def test_stop_reasons_for_max_steps_and_a_failed_turn(tmp_path: pathlib.Path) -> None:
    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3", "--max-steps", "3") as (conn, _):
            sid = await new_session(conn, tmp_path)
            loop = await conn.prompt(session_id=sid, prompt=prompt("/loop"))
            assert loop.stop_reason == "max_turn_requests"
            starts = [u for u in client.of(sid) if isinstance(u, ToolCallStart)]
            assert len(starts) == 3
            with pytest.raises(RequestError) as failed:
                await conn.prompt(session_id=sid, prompt=prompt("/fail"))
            assert failed.value.code == -32603
            assert "turn failed" in str(failed.value.data or failed.value)

    run(scenario())


def test_session_load_replays_history_and_a_live_session_loaded_again_replays_it_again(
    tmp_path: pathlib.Path,
) -> None:
    store = tmp_path / "s.sqlite3"

    async def first() -> str:
        client = RecordingClient()
        async with server(client, store) as (conn, _):
            sid = await new_session(conn, tmp_path)
            await conn.prompt(session_id=sid, prompt=prompt("remember me"))
            await conn.prompt(session_id=sid, prompt=prompt("!echo from-bash"))
        return sid

    async def second(sid: str) -> None:
        client = RecordingClient()
        async with server(client, store) as (conn, _):
            with pytest.raises(RequestError) as mismatch:
                await conn.load_session(cwd="/elsewhere", session_id=sid, mcp_servers=[])
            assert mismatch.value.code == -32602
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            replay = client.of(sid)
            users = [u.content.text for u in replay if isinstance(u, UserMessageChunk)]
            assert users == ["remember me", "!echo from-bash"]
            assert "echo: remember me" in client.text(sid)
            tools = [u for u in replay if isinstance(u, ToolCallStart | ToolCallProgress)]
            assert [type(u).__name__ for u in tools] == ["ToolCallStart", "ToolCallProgress"]
            # Loaded again while live: replayed again, and it goes on (D505).
            before = len(client.of(sid))
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            again = client.of(sid)[before:]
            users = [u.content.text for u in again if isinstance(u, UserMessageChunk)]
            assert users == ["remember me", "!echo from-bash"]
            answer = await conn.prompt(session_id=sid, prompt=prompt("still there?"))
            assert answer.stop_reason == "end_turn"

    async def both() -> None:
        await second(await first())

    run(both())


def test_close_resume_and_message_ids_with_the_python_client(tmp_path: pathlib.Path) -> None:
    # The methods of 2026 the Python SDK speaks (D507, D509): close during a turn, resume
    # without a replay in a new process, each chunk tagged with its message's id.
    store = tmp_path / "s.sqlite3"

    async def first() -> str:
        client = RecordingClient()
        async with server(client, store) as (conn, _):
            caps = client.init.agent_capabilities
            assert caps is not None
            assert caps.session_capabilities is not None
            assert caps.session_capabilities.close is not None
            assert caps.session_capabilities.resume is not None
            sid = await new_session(conn, tmp_path)
            await conn.prompt(session_id=sid, prompt=prompt("remember me"))
            held = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=prompt("/hold")))
            await client.wait_for(sid, "holding")
            await conn.close_session(session_id=sid)
            assert held.done()  # answered before the close was
            assert (await held).stop_reason == "cancelled"
            ids = {u.message_id for u in client.of(sid) if isinstance(u, AgentMessageChunk)}
            assert len(ids) == 2
            assert all(i is not None and i.startswith("assistant-") for i in ids)
        return sid

    async def second(sid: str) -> None:
        client = RecordingClient()
        async with server(client, store) as (conn, _):
            await conn.resume_session(session_id=sid, cwd=str(tmp_path))
            assert not [u for u in client.of(sid) if isinstance(u, UserMessageChunk)]
            answer = await conn.prompt(session_id=sid, prompt=prompt("still there?"))
            assert answer.stop_reason == "end_turn"
            assert client.text(sid).endswith("echo: still there?")

    async def both() -> None:
        await second(await first())

    run(both())


def test_a_session_cannot_read_another_sessions_job_and_end_of_input_kills_it(
    tmp_path: pathlib.Path,
) -> None:
    pidfile = tmp_path / "pgid"
    os.mkfifo(pidfile)
    marker = f"acp-job-{tmp_path.name}"

    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, _):
            a = await new_session(conn, tmp_path)
            b = await new_session(conn, tmp_path)
            # Found by its argv[0] afterwards: a sandboxed `$$` is a pid of its own namespace.
            job = f"!&echo $$ > {pidfile}; exec -a {marker} sleep 1000"
            await conn.prompt(session_id=a, prompt=prompt(job))
            # The answer comes once the job is started, not once it has run a line: wait for
            # it, or a loaded machine ends the server before the job has written anything.
            assert int(await read_fifo_line(pidfile)) > 0  # the job ran
            await conn.prompt(session_id=b, prompt=prompt("/output bash-1"))
            started, refused = [u for u in client.of(b) if isinstance(u, ToolCallProgress)]
            assert (started.status, refused.status) == ("in_progress", "failed")
            assert refused.content is not None
            assert "belongs to another session" in refused.content[0].content.text
            await conn.prompt(session_id=a, prompt=prompt("/output bash-1"))
            mine = [u for u in client.of(a) if isinstance(u, ToolCallProgress)][-1]
            assert mine.status == "completed"
        assert with_marker(f"{marker}\0") == []  # read from /proc after the server exited

    run(scenario())


def test_an_edit_shows_its_diff_and_writes_through_the_clients_buffer(
    tmp_path: pathlib.Path,
) -> None:
    """Issue 37, item 1: a client offering `fs.readTextFile` and `fs.writeTextFile` has an
    edit read from and written to its buffer (`fs/write_text_file`), not the disk; the call
    is asked for with its diff and shown with it, and a replay shows it again (D520, D521)."""
    disk = tmp_path / "open.py"
    disk.write_text("saved = 0\n")

    class BufferClient(RecordingClient):
        def __init__(self) -> None:
            super().__init__()
            self.capabilities = ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
            )
            self.buffers = {str(disk): "unsaved = 1\n"}
            self.written: list[tuple[str, str]] = []

        async def read_text_file(
            self, session_id: str, path: str, **kwargs: Any
        ) -> ReadTextFileResponse:
            if path not in self.buffers:
                raise RequestError(-32002, "Resource not found")
            return ReadTextFileResponse(content=self.buffers[path])

        async def write_text_file(
            self, session_id: str, path: str, content: str, **kwargs: Any
        ) -> WriteTextFileResponse:
            self.written.append((session_id, path))
            self.buffers[path] = content
            return WriteTextFileResponse()

    arguments = {"path": "open.py", "old_string": "= 1", "new_string": "= 2"}
    diff = FileEditToolCallContent(
        type="diff", path=str(disk), old_text="unsaved = 1\n", new_text="unsaved = 2\n"
    )

    async def scenario() -> None:
        client = BufferClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, _):
            sid = await new_session(conn, tmp_path)
            command = f"/tool edit {json.dumps(arguments)}"
            answer = await conn.prompt(session_id=sid, prompt=prompt(command))
            assert answer.stop_reason == "end_turn"
            assert client.buffers[str(disk)] == "unsaved = 2\n"
            assert disk.read_text() == "saved = 0\n"
            assert client.written == [(sid, str(disk))]
            # Asked first (the default mode asks before a change), with what it changes.
            ((_, asked, _),) = client.permissions
            assert asked.kind == "edit"
            assert asked.content == [
                FileEditToolCallContent(type="diff", path=str(disk), old_text="= 1", new_text="= 2")
            ]
            calls = [u for u in client.of(sid) if isinstance(u, ToolCallStart | ToolCallProgress)]
            start, *_, done = calls
            assert isinstance(start, ToolCallStart)
            assert start.kind == "edit"
            assert start.locations is not None
            assert [place.path for place in start.locations] == [str(disk)]
            assert isinstance(done, ToolCallProgress)
            assert done.status == "completed"
            assert done.content is not None
            assert done.content[0] == diff
            assert done.locations is not None
            assert [(p.path, p.line) for p in done.locations] == [(str(disk), 1)]

            before = len(client.of(sid))
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            replayed = [
                u
                for u in client.of(sid)[before:]
                if isinstance(u, ToolCallStart | ToolCallProgress)
            ]
            assert replayed == [start, done]

    run(scenario())


class TerminalClient(RecordingClient):
    """A client that offers `terminal` and runs each command as a real process of its own,
    in its own environment (`EDITOR_MARK` only it has), as an editor's terminal does."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = ClientCapabilities(terminal=True)
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.readers: dict[str, asyncio.Task[bytes]] = {}
        self.calls: list[tuple[str, str]] = []  # (method, terminal id)
        self.waiting = asyncio.Event()  # set at the first terminal/wait_for_exit

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        terminal = f"editor-term-{len(self.processes) + 1}"
        self.calls.append(("create", terminal))
        given = {variable.name: variable.value for variable in env or []}
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env={**os.environ, "EDITOR_MARK": "the editor's own", **given},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        assert process.stdout is not None
        self.processes[terminal] = process
        self.readers[terminal] = asyncio.ensure_future(process.stdout.read())
        return CreateTerminalResponse(terminal_id=terminal)

    def _status(self, terminal: str) -> TerminalExitStatus | None:
        code = self.processes[terminal].returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self.calls.append(("wait_for_exit", terminal_id))
        self.waiting.set()
        await self.processes[terminal_id].wait()
        status = self._status(terminal_id)
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        self.calls.append(("output", terminal_id))
        output = (await self.readers[terminal_id]).decode()
        return TerminalOutputResponse(
            output=output, truncated=False, exit_status=self._status(terminal_id)
        )

    def _kill(self, terminal: str) -> None:
        process = self.processes[terminal]
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        self.calls.append(("kill", terminal_id))
        self._kill(terminal_id)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self.calls.append(("release", terminal_id))
        self._kill(terminal_id)
        return ReleaseTerminalResponse()


def test_a_command_runs_in_the_clients_terminal_and_a_cancel_kills_it(
    tmp_path: pathlib.Path,
) -> None:
    """Issue 37, item 2: with `--client-terminal` and a client that offers `terminal`, a
    command runs in the client's terminal (its process, its environment), the tool call
    embeds the terminal, and a cancel kills it through `terminal/kill`; `terminal/release`
    follows every command (D550-D552)."""

    async def scenario() -> None:
        client = TerminalClient()
        async with server(client, tmp_path / "s.sqlite3", "--client-terminal") as (conn, _):
            sid = await new_session(conn, tmp_path)
            answer = await conn.prompt(session_id=sid, prompt=prompt("!echo ran by $EDITOR_MARK"))
            assert answer.stop_reason == "end_turn"
            assert client.calls == [
                (method, "editor-term-1")
                for method in ("create", "wait_for_exit", "output", "release")
            ]
            embedded = TerminalToolCallContent(type="terminal", terminal_id="editor-term-1")
            shown = [u for u in client.of(sid) if isinstance(u, ToolCallProgress) and u.content]
            assert shown[0].content == [embedded]  # while it runs
            done = shown[-1]
            assert done.status == "completed"
            assert done.content is not None
            assert done.content[0] == embedded
            assert done.content[1].content.text == "ran by the editor's own"

            # A command that runs until the cancel kills it, in the editor's terminal.
            client.waiting.clear()
            held = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=prompt("!echo started; exec sleep 1000"))
            )
            await client.waiting.wait()
            await conn.cancel(session_id=sid)
            assert (await held).stop_reason == "cancelled"
            process = client.processes["editor-term-2"]
            assert process.returncode == -signal.SIGKILL  # gone before the prompt answered
            assert client.calls[4:] == [
                (method, "editor-term-2")
                for method in ("create", "wait_for_exit", "kill", "wait_for_exit", "release")
            ]

    run(scenario())
