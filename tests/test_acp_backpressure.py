"""A client that stops reading stalls the ACP server (issue 16, item 7): past `max_unwritten`
bytes not yet written, the server reads no more requests and its sessions' models wait, so
what it holds stays bounded; once the client reads again everything goes on. In process,
over a client output the test pauses, so the stall is exact; tests/test_acp_rss.py checks
the memory of a real server process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents import Finish, MemoryStore, ModelChunk, ModelRequest, TextDelta, open_runtime
from trio_agents.acp import AcpServer
from trio_agents.acp._frames import FRAME_OVERHEAD
from trio_agents.acp._pacing import OutputBudget

LIMIT = 64 * 1024
CHUNK = 1000
CAP = 20 * LIMIT // CHUNK


class Firehose:
    """Streams `CHUNK`-character text deltas until the turn is cancelled (or `CAP` of them),
    counting them."""

    def __init__(self) -> None:
        self.chunks = 0
        self._target = 0
        self._reached = trio.Event()

    async def streamed(self, chunks: int) -> None:
        """Return once `chunks` chunks in all have been streamed."""
        self._target, self._reached = chunks, trio.Event()
        if self.chunks < chunks:
            await self._reached.wait()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        while True:
            await trio.lowlevel.checkpoint()
            if self.chunks >= CAP:
                await trio.sleep_forever()  # so a server that never stalls it fails, not hangs
            self.chunks += 1
            if self.chunks >= self._target:
                self._reached.set()
            yield TextDelta("x" * CHUNK)
        yield Finish("stop")  # pragma: no cover - never reached


class PausableSend(trio.abc.SendStream):
    """The client's side of the server's output: while `paused`, nothing is taken."""

    def __init__(self, inner: trio.abc.SendStream) -> None:
        self.inner = inner
        self.paused = False
        self._resumed = trio.Event()

    def pause(self) -> None:
        self.paused = True
        self._resumed = trio.Event()

    def resume(self) -> None:
        self.paused = False
        self._resumed.set()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.paused:
            await self._resumed.wait()
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


class Client:
    def __init__(self, send: trio.abc.SendStream) -> None:
        self.send = send
        self.frames: list[dict[str, Any]] = []
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        await self.send.send_all(json.dumps(frame).encode() + b"\n")
        return self.next_id

    async def read(self, receive: trio.abc.ReceiveStream) -> None:
        buffer = b""
        async for data in receive:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            self.frames += [json.loads(line) for line in lines]

    def answer(self, request_id: int) -> dict[str, Any] | None:
        for frame in self.frames:
            if frame.get("id") == request_id and "method" not in frame:
                return frame
        return None


async def test_a_client_that_stops_reading_stalls_the_sessions_and_reading_resumes_them() -> None:
    model = Firehose()
    to_server_send, to_server_receive = trio.testing.memory_stream_one_way_pair()
    to_client_send, to_client_receive = trio.testing.memory_stream_one_way_pair()
    output = PausableSend(to_client_send)
    client = Client(to_server_send)
    async with open_runtime(MemoryStore()) as rt, trio.open_nursery() as nursery:
        server = AcpServer(rt, lambda: model, max_unwritten=LIMIT)
        nursery.start_soon(client.read, to_client_receive)
        nursery.start_soon(server.serve, to_server_receive, output)
        new = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        await trio.testing.wait_all_tasks_blocked()
        answer = client.answer(new)
        assert answer is not None
        sid = answer["result"]["sessionId"]

        output.pause()
        text = [{"type": "text", "text": "go"}]
        prompt = await client.request("session/prompt", {"sessionId": sid, "prompt": text})
        await trio.testing.wait_all_tasks_blocked()
        budget: OutputBudget = server._budget  # pyright: ignore[reportPrivateUsage]
        stalled_at = model.chunks
        assert budget.paused
        # Past the limit by at most one chunk (and the batch being written when it paused).
        assert LIMIT < budget.queued <= LIMIT + 2 * (CHUNK + FRAME_OVERHEAD)
        assert stalled_at < 2 * LIMIT // CHUNK
        # Requests are not even read while paused: this one is not answered.
        later = await client.request("initialize", {"protocolVersion": 1})
        for _ in range(5):
            await trio.testing.wait_all_tasks_blocked()
        assert model.chunks == stalled_at, "the model went on while the client did not read"
        assert client.answer(later) is None

        output.resume()
        with trio.fail_after(60):
            await model.streamed(4 * stalled_at)
        assert client.answer(later) is not None  # read and answered once resumed
        await client.request("session/prompt", {"sessionId": sid, "prompt": text})
        # (refused: a prompt is in flight; answered with an error, read while not paused)
        await client.send.send_all(
            json.dumps(
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
            ).encode()
            + b"\n"
        )
        while client.answer(prompt) is None:
            await trio.testing.wait_all_tasks_blocked()
        assert client.answer(prompt) == {
            "jsonrpc": "2.0",
            "id": prompt,
            "result": {"stopReason": "cancelled"},
        }
        assert budget.peak <= LIMIT + 2 * (CHUNK + FRAME_OVERHEAD)
        await to_server_send.aclose()
        nursery.cancel_scope.cancel()


def test_a_negative_max_unwritten_is_refused() -> None:
    with pytest.raises(ValueError, match="max_unwritten must be a number of bytes >= 0, got -1"):
        AcpServer(None, lambda: Firehose(), max_unwritten=-1)  # type: ignore[arg-type]
