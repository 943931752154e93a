"""The ACP server in process, over memory streams: message shapes against the official schema
(`acp.schema`), ordering, cancellation and teardown (issue 6, acceptance 3 and parts of 1)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from acp import schema

from trio_agents import Finish, MemoryStore, ModelChunk, ModelRequest, TextDelta
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.acp_peer import AcpPeer, GatedStore, acp_peer


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


async def new_session(peer: AcpPeer, cwd: str = "/tmp") -> str:
    result = await peer.result("session/new", {"cwd": cwd, "mcpServers": []})
    schema.NewSessionResponse.model_validate(result)
    return str(result["sessionId"])


def check_wire(peer: AcpPeer) -> None:
    """Every update validates against the schema, and a tool_call_update never precedes its
    tool_call."""
    started: set[str] = set()
    for frame in peer.frames:
        if frame.get("method") != "session/update":
            continue
        notification = schema.SessionNotification.model_validate(frame["params"])
        update = frame["params"]["update"]
        if update["sessionUpdate"] == "tool_call":
            started.add(update["toolCallId"])
        elif update["sessionUpdate"] == "tool_call_update":
            assert update["toolCallId"] in started, f"update before its tool_call: {update}"
        assert notification.session_id


async def test_initialize_answers_a_valid_response_advertising_load_session() -> None:
    async with acp_peer() as peer:
        result = await peer.result("initialize", {"protocolVersion": 1})
        response = schema.InitializeResponse.model_validate(result)
        assert response.protocol_version == 1
        assert response.agent_capabilities is not None
        assert response.agent_capabilities.load_session


@pytest.mark.subprocess
async def test_tool_updates_follow_their_calls_and_validate(tmp_path: pathlib.Path) -> None:
    async with acp_peer() as peer:
        sid = await new_session(peer, str(tmp_path))
        for prompt in ("!echo one", "!&sleep 0", "/output bash-1", "/kill bash-9", "plain"):
            result = await peer.result("session/prompt", {"sessionId": sid, "prompt": text(prompt)})
            schema.PromptResponse.model_validate(result)
        kinds = [u["sessionUpdate"] for u in peer.updates(sid)]
        assert kinds.count("tool_call") == 4
        assert kinds.count("tool_call_update") == 8  # in_progress, then its result
        check_wire(peer)


async def test_a_cancelled_prompt_answers_after_every_update_of_its_turn() -> None:
    model = ScriptedModel(
        [tool_step(("bash_output", {"job_id": "bash-1"}), text="looking"), reply("x", hold=True)]
    )
    async with acp_peer(lambda: model) as peer:
        sid = await new_session(peer)
        prompt_id = await peer.start_request(
            "session/prompt", {"sessionId": sid, "prompt": text("go")}
        )
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1  # the second step is held in the model
        await peer.notify("session/cancel", {"sessionId": sid})
        answer = await peer.answer(prompt_id)
        assert answer["result"] == {"stopReason": "cancelled"}
        position = peer.frames.index(answer)
        later = [
            f
            for f in peer.frames[position:]
            if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
        ]
        assert later == []
        kinds = [u["sessionUpdate"] for u in peer.updates(sid)]
        started, finished = "tool_call_update", "tool_call_update"
        assert kinds == ["agent_message_chunk", "tool_call", started, finished]
        records = peer.runtime.agents.get(sid)
        assert records is not None
        ends = [r.data["reason"] for r in records.session.records if r.type == "turn/end"]
        assert ends == [{"kind": "aborted", "reason": "session/cancel", "cause": "user"}]
        check_wire(peer)


async def test_end_of_input_answers_a_held_prompt_cancelled_and_closes_every_agent() -> None:
    model = ScriptedModel(hold_all=True)
    async with acp_peer(lambda: model) as peer:
        first = await new_session(peer)
        second = await new_session(peer)
        prompt_id = await peer.start_request(
            "session/prompt", {"sessionId": first, "prompt": text("go")}
        )
        await trio.testing.wait_all_tasks_blocked()
        await peer.close_input()
        answer = await peer.answer(prompt_id)
        assert answer["result"] == {"stopReason": "cancelled"}
        await peer.served.wait()
        assert peer.runtime.agents.list() == []
        assert peer.runtime.sessions.live_ids == frozenset()  # `second` closed too
        stored = await peer.runtime.sessions.load(first)
        assert stored.records[-1].type == "turn/end"
        assert stored.records[-1].data["reason"] == {"kind": "closed"}
        assert second


async def test_a_load_racing_the_teardown_closes_what_it_resumed() -> None:
    store = GatedStore()
    async with acp_peer(store=store) as peer:
        sid = await new_session(peer)
        await peer.result("session/prompt", {"sessionId": sid, "prompt": text("hello")})
    async with acp_peer(store=store) as peer:
        store.gate = trio.Event()
        load_id = await peer.start_request(
            "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        await trio.testing.wait_all_tasks_blocked()
        assert peer.server is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.server.aclose)  # the connection is being torn down
            await trio.testing.wait_all_tasks_blocked()
            store.gate.set()
        answer = await peer.answer(load_id)
        assert answer["error"]["code"] == -32603
        assert "connection closed during session/load" in answer["error"]["message"]
        assert peer.runtime.agents.list() == []
        assert peer.runtime.sessions.live_ids == frozenset()


async def test_a_cancel_read_together_with_its_prompt_still_cancels_it() -> None:
    async with acp_peer() as peer:
        sid = await new_session(peer)
        prompt = {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": text("/hold")},
        }
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        await peer.send_raw(
            (json.dumps(prompt) + "\n" + json.dumps(cancel) + "\n").encode()  # one read
        )
        answer = await peer.answer(99)
        assert answer["result"] == {"stopReason": "cancelled"}


async def test_arguments_that_are_not_strict_json_never_reach_the_wire() -> None:
    model = ScriptedModel([tool_step(("bash_output", {"job_id": float("inf")})), reply("done")])
    async with acp_peer(lambda: model) as peer:
        sid = await new_session(peer)
        result = await peer.result("session/prompt", {"sessionId": sid, "prompt": text("go")})
        assert result == {"stopReason": "end_turn"}
        (call,) = [u for u in peer.updates(sid) if u["sessionUpdate"] == "tool_call"]
        assert call["rawInput"] == repr({"job_id": float("inf")})
        check_wire(peer)


def test_the_writer_merges_a_run_of_text_chunks_of_one_message_and_keeps_the_order() -> None:
    from trio_agents.acp._frames import Text, encode

    other = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    wire = encode(
        [
            Text("a", "he", "m1"),
            Text("a", "llo", "m1"),
            Text("a", " next", "m2"),  # another message of the session: its own update
            other,
            Text("b", "x", "m1"),
            Text("a", "!", "m2"),
        ]
    )
    frames = [json.loads(line) for line in wire.splitlines()]
    updates = [frames[i] for i in (0, 1, 3, 4)]
    assert [
        (
            f["params"]["sessionId"],
            f["params"]["update"]["messageId"],
            f["params"]["update"]["content"]["text"],
        )
        for f in updates
    ] == [("a", "m1", "hello"), ("a", "m2", " next"), ("b", "m1", "x"), ("a", "m2", "!")]
    assert frames[2] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    for frame in updates:
        schema.SessionNotification.model_validate(frame["params"])


async def test_a_reply_that_arrives_at_once_reaches_the_client_as_one_update() -> None:
    pieces = [f"piece {n}; " for n in range(40)]

    class Burst:
        """Many deltas from one read, as an SSE model yields them: no checkpoint between."""

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
            await trio.lowlevel.checkpoint()
            for piece in pieces:
                yield TextDelta(piece)
            yield Finish("stop")

    async with acp_peer(Burst) as peer:
        sid = await new_session(peer)
        answer = await peer.request("session/prompt", {"sessionId": sid, "prompt": text("go")})
        assert answer["result"] == {"stopReason": "end_turn"}
        assert [u["content"]["text"] for u in peer.updates(sid)] == ["".join(pieces)]
        check_wire(peer)


class _SlowPipe(trio.abc.SendStream):
    """A pipe that takes a frame 16 bytes at a time, with a checkpoint between pieces: a
    cancel could land inside any frame."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.writing = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        for at in range(0, len(data), 16):
            self.writing.set()
            self.written += bytes(data[at : at + 16])
            await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _FailingInput(trio.abc.ReceiveStream):
    """Gives one `initialize` request, then fails once its answer is being written."""

    def __init__(self, pipe: _SlowPipe) -> None:
        self.pipe = pipe
        self.sent = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self.sent:
            self.sent = True
            await trio.lowlevel.checkpoint()
            request = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
            return json.dumps({**request, "params": {"protocolVersion": 1}}).encode() + b"\n"
        await self.pipe.writing.wait()
        raise RuntimeError("the input broke")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_a_connection_ending_on_an_error_still_writes_its_frames_whole() -> None:
    # D434: the writer is not cancelled with the connection; it writes what is queued.
    from trio_agents import open_runtime
    from trio_agents.acp import AcpServer

    pipe = _SlowPipe()
    async with open_runtime(MemoryStore()) as rt:
        server = AcpServer(rt, lambda: ScriptedModel())
        broke = pytest.RaisesExc(RuntimeError, match="the input broke")
        with pytest.RaisesGroup(broke, flatten_subgroups=True):
            await server.serve(_FailingInput(pipe), pipe)
    assert len(pipe.written) > 16  # the answer took several pieces
    assert pipe.written.endswith(b"\n"), bytes(pipe.written[-80:])
    answer = json.loads(pipe.written)
    schema.InitializeResponse.model_validate(answer["result"])


async def test_loading_a_live_session_replays_it_and_the_session_goes_on() -> None:
    # A client reopening a thread it has open (the ACP test kit does): not refused (D505).
    model = ScriptedModel([reply("first answer"), reply("second answer")])
    async with acp_peer(lambda: model) as peer:
        sid = await new_session(peer)
        await peer.result("session/prompt", {"sessionId": sid, "prompt": text("hello")})
        before = len(peer.updates(sid))
        result = await peer.result(
            "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        schema.LoadSessionResponse.model_validate(result)
        replayed = peer.updates(sid)[before:]
        kinds = [(u["sessionUpdate"], u.get("content", {}).get("text")) for u in replayed]
        assert ("user_message_chunk", "hello") in kinds
        assert ("agent_message_chunk", "first answer") in kinds
        answer = await peer.result("session/prompt", {"sessionId": sid, "prompt": text("again")})
        assert answer == {"stopReason": "end_turn"}
        assert len(peer.runtime.agents.list()) == 1  # the same agent, not a second one
        check_wire(peer)


ANOTHER_SERVER: list[dict[str, Any]] = [{"name": "x", "command": "true", "args": [], "env": []}]


@pytest.mark.parametrize(
    ("cwd", "servers", "said"),
    [
        ("/", [], "cwd mismatch: live in /tmp, requested /"),
        ("/tmp", ANOTHER_SERVER, "MCP servers []"),
    ],
)
async def test_loading_a_live_session_elsewhere_or_with_other_servers_is_refused(
    cwd: str, servers: list[dict[str, Any]], said: str
) -> None:
    async with acp_peer() as peer:
        sid = await new_session(peer)
        answer = await peer.request(
            "session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": servers}
        )
        assert answer["error"]["code"] == -32602
        assert said in answer["error"]["message"]
        assert len(peer.runtime.agents.list()) == 1  # the live session is left as it was
