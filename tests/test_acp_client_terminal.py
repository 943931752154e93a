"""Commands in the editor's terminal (issue 37, item 2), in process over memory streams: with
`AcpServer(client_terminal=True)` and a client that offers `terminal`, a foreground `bash`
command runs through `terminal/*` (here a real process the test's client starts), the call
embeds the terminal, a cancel or a timeout kills it through `terminal/kill`, and
`terminal/release` always follows (D550-D552). Every frame is validated against the ACP
schema by the peer."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
from typing import Any

import pytest
import trio
import trio.testing
from acp import schema

from trio_agents import Record, ToolContext
from trio_agents._shell._types import ShellSpec
from trio_agents.acp._client_terminal import ClientTerminal
from trio_agents.acp._jsonrpc import ClientRequestError
from trio_agents.acp._mapping import updates_for_record
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.acp_peer import AcpPeer, acp_peer

# The client's commands are real processes: a real clock (conftest).
pytestmark = pytest.mark.realtime

CLIENT_MARK = "set-by-the-editor"  # in the client's environment, never in the server's


class Terminals:
    """The client side of `terminal/*`, with real processes, as an editor runs them: each
    command in a process group of its own, in the client's environment plus the `env` asked
    for, stdout and stderr merged. Records every request the server sends."""

    def __init__(self, peer: AcpPeer, nursery: trio.Nursery, *, refuse_create: bool = False):
        self.peer = peer
        self.nursery = nursery
        self.refuse_create = refuse_create
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.processes: dict[str, trio.Process] = {}
        self.output: dict[str, bytearray] = {}
        self.read_all: dict[str, trio.Event] = {}
        self.asked: dict[str, trio.Event] = {}
        self.sending = trio.Lock()  # answers are written whole, one at a time
        peer.on_request = self.arrived

    def arrived(self, frame: dict[str, Any]) -> None:
        self.requests.append((frame["method"], frame["params"]))
        self.asked.setdefault(frame["method"], trio.Event()).set()
        self.nursery.start_soon(self.answer, frame)

    def methods(self) -> list[str]:
        return [method for method, _ in self.requests if method.startswith("terminal/")]

    async def seen(self, method: str) -> None:
        await self.asked.setdefault(method, trio.Event()).wait()

    async def answer(self, frame: dict[str, Any]) -> None:
        method, params = frame["method"], frame["params"]
        try:
            body = {"result": await self.handle(method, params)}
        except LookupError as exc:
            body = {"error": {"code": -32602, "message": str(exc)}}
        reply_frame = {"jsonrpc": "2.0", "id": frame["id"], **body}
        async with self.sending:
            await self.peer.send_raw(json.dumps(reply_frame).encode() + b"\n")

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        if method == "terminal/create":
            schema.CreateTerminalRequest.model_validate(params)
            if self.refuse_create:
                raise LookupError("no terminal here")
            return await self.create(params)
        if method == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
        terminal = params["terminalId"]
        process = self.processes[terminal]
        if method == "terminal/wait_for_exit":
            schema.WaitForTerminalExitRequest.model_validate(params)
            await process.wait()
            await self.read_all[terminal].wait()
            return self.status(process)
        if method == "terminal/output":
            schema.TerminalOutputRequest.model_validate(params)
            answer: dict[str, Any] = {
                "output": self.output[terminal].decode(errors="replace"),
                "truncated": False,
            }
            if process.returncode is not None:
                answer["exitStatus"] = self.status(process)
            return answer
        if method == "terminal/kill":
            schema.KillTerminalRequest.model_validate(params)
            self.kill(process)
            return {}
        assert method == "terminal/release", method
        schema.ReleaseTerminalRequest.model_validate(params)
        self.kill(process)
        return {}

    async def create(self, params: dict[str, Any]) -> dict[str, str]:
        env = {**os.environ, "EDITOR_MARK": CLIENT_MARK}
        env.update({v["name"]: v["value"] for v in params.get("env", [])})
        process = await trio.lowlevel.open_process(
            [params["command"], *params.get("args", [])],
            cwd=params["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # merged, as a terminal shows them
            start_new_session=True,
        )
        terminal = f"term-{len(self.processes) + 1}"
        self.processes[terminal] = process
        self.output[terminal] = bytearray()
        self.read_all[terminal] = trio.Event()
        self.nursery.start_soon(self.collect, terminal, process)
        return {"terminalId": terminal}

    async def collect(self, terminal: str, process: trio.Process) -> None:
        assert process.stdout is not None
        async with process.stdout:
            async for data in process.stdout:
                self.output[terminal] += data
        self.read_all[terminal].set()

    @staticmethod
    def kill(process: trio.Process) -> None:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)

    @staticmethod
    def status(process: trio.Process) -> dict[str, Any]:
        code = process.returncode
        assert code is not None
        if code < 0:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        return {"exitCode": code, "signal": None}


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


async def open_session(peer: AcpPeer, cwd: pathlib.Path, *, terminal: bool) -> str:
    capabilities = {"terminal": terminal}
    await peer.result("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    result = await peer.result("session/new", {"cwd": str(cwd), "mcpServers": []})
    return str(result["sessionId"])


async def prompt(peer: AcpPeer, sid: str, words: str = "go") -> dict[str, Any]:
    with trio.fail_after(30):
        return await peer.request("session/prompt", {"sessionId": sid, "prompt": text(words)})


def calls(peer: AcpPeer, sid: str, start: int = 0) -> list[dict[str, Any]]:
    return [
        u
        for u in peer.updates(sid)[start:]
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]


def bash(command: str, **more: Any) -> Any:
    return tool_step(("bash", {"command": command, "description": "a command", **more}))


# -- the mapping (pure) ----------------------------------------------------------------------


def test_a_results_terminal_is_shown_live_and_left_out_of_a_replay() -> None:
    data = {"call_id": "c1", "content": "hi", "is_error": False, "details": {"terminal": "t-7"}}
    record = Record.of("tool/result", data)
    (live,) = updates_for_record(record, replay=False)
    (replayed,) = updates_for_record(record, replay=True)
    for update in (live, replayed):
        schema.SessionNotification.model_validate({"sessionId": "s", "update": update})
    assert live["content"] == [
        {"type": "terminal", "terminalId": "t-7"},
        {"type": "content", "content": {"type": "text", "text": "hi"}},
    ]
    assert replayed["content"] == live["content"][1:]
    for bad in ({"terminal": 5}, {"terminal": ""}, ["terminal"]):
        odd = Record.of("tool/result", {**data, "details": bad})
        (update,) = updates_for_record(odd, replay=False)
        assert [c["type"] for c in update["content"]] == ["content"]


# -- a session on the wire ---------------------------------------------------------------------


async def test_a_command_runs_in_the_clients_terminal_which_the_call_embeds(
    tmp_path: pathlib.Path,
) -> None:
    command = "echo in the editor: $EDITOR_MARK; echo colour: $NO_COLOR; pwd; exit 3"
    cwd = str(await trio.Path(tmp_path).resolve())  # as the bash tool resolves the session's
    model = ScriptedModel([bash(command), reply("done")])
    async with acp_peer(lambda: model, client_terminal=True) as peer, trio.open_nursery() as n:
        client = Terminals(peer, n)
        sid = await open_session(peer, tmp_path, terminal=True)
        answer = await prompt(peer, sid)
        assert answer["result"]["stopReason"] == "end_turn"
        assert client.methods() == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release",
        ]
        created = client.requests[0][1]
        assert created["sessionId"] == sid
        assert (created["command"], created["args"]) == ("bash", ["-c", command])
        assert created["cwd"] == cwd
        assert created["outputByteLimit"] == 64_000
        assert {"name": "NO_COLOR", "value": "1"} in created["env"]
        assert all(p["terminalId"] == "term-1" for _, p in client.requests[1:])

        pending, started, embedded, done = calls(peer, sid)
        assert (pending["status"], started["status"]) == ("pending", "in_progress")
        assert embedded == {
            "sessionUpdate": "tool_call_update",
            "toolCallId": pending["toolCallId"],
            "content": [{"type": "terminal", "terminalId": "term-1"}],
        }
        assert done["status"] == "failed"  # exit 3
        assert done["content"][0] == {"type": "terminal", "terminalId": "term-1"}
        output = done["content"][1]["content"]["text"]
        # The client's process ran it: its environment, the server's settings, the cwd.
        assert output == f"in the editor: {CLIENT_MARK}\ncolour: 1\n{cwd}\n[exit code: 3]"
        # What the model was sent is the same text.
        agent = peer.runtime.agents.get(sid)
        assert agent is not None
        (result,) = [r for r in agent.session.records if r.type == "tool/result"]
        assert result.data["content"] == output

        # A replay shows the output, not a terminal of a connection long gone.
        before = len(peer.updates(sid))
        await peer.result(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        *_, replayed = calls(peer, sid, before)
        assert replayed["content"] == done["content"][1:]
        n.cancel_scope.cancel()


@pytest.mark.parametrize(("offered", "enabled"), [(False, True), (True, False)])
async def test_without_both_the_option_and_the_offer_the_executor_runs_it(
    tmp_path: pathlib.Path, offered: bool, enabled: bool
) -> None:
    model = ScriptedModel([bash("echo sandboxed: ${EDITOR_MARK:-no}"), reply("done")])
    async with acp_peer(lambda: model, client_terminal=enabled) as peer, trio.open_nursery() as n:
        client = Terminals(peer, n)
        sid = await open_session(peer, tmp_path, terminal=offered)
        await prompt(peer, sid)
        assert client.methods() == []
        *_, done = calls(peer, sid)
        assert done["content"] == [
            {"type": "content", "content": {"type": "text", "text": "sandboxed: no"}}
        ]
        n.cancel_scope.cancel()


async def test_a_cancel_kills_the_command_through_terminal_kill_then_releases_it(
    tmp_path: pathlib.Path,
) -> None:
    model = ScriptedModel([bash("echo started; exec sleep 1000"), reply("never")])
    async with acp_peer(lambda: model, client_terminal=True) as peer, trio.open_nursery() as n:
        client = Terminals(peer, n)
        sid = await open_session(peer, tmp_path, terminal=True)
        asked = await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text("go")})
        with trio.fail_after(30):
            await client.seen("terminal/wait_for_exit")
            await peer.notify("session/cancel", {"sessionId": sid})
            answer = await peer.answer(asked)
        assert answer["result"]["stopReason"] == "cancelled"
        assert client.methods() == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/wait_for_exit",
            "terminal/release",
        ]
        # Killed before the prompt answered (P20): through terminal/kill, not the release.
        (process,) = client.processes.values()
        assert process.returncode == -signal.SIGKILL
        *_, last = calls(peer, sid)
        assert last["status"] == "failed"
        n.cancel_scope.cancel()


async def test_a_timeout_kills_the_command_and_the_model_reads_what_it_printed(
    tmp_path: pathlib.Path,
) -> None:
    model = ScriptedModel([bash("echo before; exec sleep 1000", timeout_ms=300), reply("ok")])
    async with acp_peer(lambda: model, client_terminal=True) as peer, trio.open_nursery() as n:
        client = Terminals(peer, n)
        sid = await open_session(peer, tmp_path, terminal=True)
        answer = await prompt(peer, sid)
        assert answer["result"]["stopReason"] == "end_turn"
        assert client.methods() == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release",
        ]
        *_, done = calls(peer, sid)
        assert done["status"] == "failed"
        assert done["content"][1]["content"]["text"] == (
            "before\n[timed out after 0.3s]\n[killed by signal: SIGKILL]"
        )
        n.cancel_scope.cancel()


async def test_background_jobs_stay_on_the_executor_and_a_refused_terminal_is_an_error(
    tmp_path: pathlib.Path,
) -> None:
    model = ScriptedModel([bash("sleep 0", run_in_background=True), bash("echo hi"), reply("done")])
    async with acp_peer(lambda: model, client_terminal=True) as peer, trio.open_nursery() as n:
        client = Terminals(peer, n, refuse_create=True)
        sid = await open_session(peer, tmp_path, terminal=True)
        await prompt(peer, sid)
        assert client.methods() == ["terminal/create"]  # only the foreground one; no release
        job, refused = [u for u in calls(peer, sid) if u.get("status") in ("completed", "failed")]
        assert job["content"][0]["content"]["text"] == "started background job bash-1"
        assert refused["status"] == "failed"
        assert refused["content"][0]["content"]["text"] == (
            "cannot run 'echo hi': the editor could not start it in its terminal: "
            "terminal/create: no terminal here"
        )
        n.cancel_scope.cancel()


async def test_run_is_a_checkpoint_when_the_client_refuses() -> None:
    async def refuse(method: str, params: Any) -> Any:
        await trio.lowlevel.checkpoint()
        raise ClientRequestError(method, -32603, "no", answered=True)

    terminal = ClientTerminal(
        refuse, "s", show=lambda call_id, terminal_id: None, env={}, output_limit=10
    )
    spec = ShellSpec("true", "/", 1.0, None)
    with trio.testing.assert_checkpoints():
        result = await terminal.run(spec, ToolContext("s", "c1", 1, 1))
    assert result.is_error
