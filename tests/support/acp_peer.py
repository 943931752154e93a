"""An in-process ACP peer for tests: the server runs in the test's trio run, over memory
streams, and every frame it writes is kept, parsed, in order."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from agent_conformance._acp._wire import check_from_agent_message
from trio_agents import (
    BashTools,
    MemoryStore,
    Model,
    Runtime,
    SessionStore,
    ShellExecutor,
    open_runtime,
)
from trio_agents._model._offline import OfflineModel
from trio_agents._store._base import StoredSession
from trio_agents.acp._server import AcpServer


class GatedStore(MemoryStore):
    """Loading waits while `gate` is an unset event: a `session/load` can be caught
    half-way."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: trio.Event | None = None

    async def load(self, session_id: str) -> StoredSession:
        if self.gate is not None:
            await self.gate.wait()
        return await super().load(session_id)


class AcpPeer:
    def __init__(self, send: trio.abc.SendStream, runtime: Runtime) -> None:
        self._send = send
        self.runtime = runtime
        self.frames: list[dict[str, Any]] = []
        self._answers: dict[Any, trio.Event] = {}
        self._methods: dict[Any, str] = {}  # request id -> its method, for its answer's shape
        # What the newest ACP schema finds wrong with a frame the server sent (item 7 of
        # issue 37): `acp_peer` fails the test with them when its block ends.
        self.invalid: list[str] = []
        # The protocol version `initialize` negotiated: frames are held to its schema.
        self.version = 1
        self._ids = 0
        self.input_closed = False
        self.server: AcpServer | None = None
        self.served = trio.Event()  # set when the server has returned (end of input)
        # Called with each request the server sends the client, as it arrives (never blocks).
        self.on_request: Callable[[dict[str, Any]], None] | None = None

    async def send_raw(self, data: bytes) -> None:
        await self._send.send_all(data)

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        frame = {"jsonrpc": "2.0", "method": method, "params": dict(params)}
        await self.send_raw(json.dumps(frame).encode() + b"\n")

    async def start_request(self, method: str, params: Mapping[str, Any]) -> int:
        """Send a request without waiting for its answer (see `answer`)."""
        self._ids += 1
        request_id = self._ids
        self._answers[request_id] = trio.Event()
        self._methods[request_id] = method
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}
        await self.send_raw(json.dumps(frame).encode() + b"\n")
        return request_id

    async def answer(self, request_id: Any) -> dict[str, Any]:
        event = self._answers.setdefault(request_id, trio.Event())
        await event.wait()
        return next(f for f in self.frames if f.get("id") == request_id and "method" not in f)

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return await self.answer(await self.start_request(method, params))

    async def result(self, method: str, params: Mapping[str, Any]) -> Any:
        frame = await self.request(method, params)
        assert "result" in frame, frame
        return frame["result"]

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        return [
            f["params"]["update"]
            for f in self.frames
            if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
        ]

    async def close_input(self) -> None:
        self.input_closed = True
        await self._send.aclose()

    def _check(self, frame: dict[str, Any]) -> None:
        """Hold a frame the server sent to the newest ACP schema."""
        answers = self._methods.get(frame.get("id")) if "method" not in frame else None
        if answers == "initialize" and isinstance(frame.get("result"), dict):
            self.version = int(frame["result"].get("protocolVersion", 1))
        problem = check_from_agent_message(frame, answers, self.version)
        if problem is not None:
            self.invalid.append(problem)

    async def read_frames(self, receive: trio.abc.ReceiveStream) -> None:
        buffer = b""
        async for data in receive:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                frame = json.loads(line)
                self.frames.append(frame)
                self._check(frame)
                if "method" not in frame and frame.get("id") in self._answers:
                    self._answers[frame["id"]].set()
                elif "method" in frame and "id" in frame and self.on_request is not None:
                    self.on_request(frame)


@asynccontextmanager
async def acp_peer(
    model_factory: Callable[[], Model] | None = OfflineModel,
    *,
    store: SessionStore | None = None,
    **server_options: Any,
) -> AsyncGenerator[AcpPeer, None]:
    """A server over memory streams; leaving the block ends its input and waits for it."""
    to_server_send, to_server_receive = trio.testing.memory_stream_one_way_pair()
    to_peer_send, to_peer_receive = trio.testing.memory_stream_one_way_pair()
    bash = BashTools()
    sessions = store if store is not None else MemoryStore()
    # `auto` unless told: this peer answers no permission request.
    server_options.setdefault("mode", "auto")
    async with open_runtime(sessions, shell=ShellExecutor(grace=0.5)) as rt:
        await rt.load(bash)
        server = AcpServer(rt, model_factory, bash=bash, **server_options)
        peer = AcpPeer(to_server_send, rt)
        peer.server = server
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.read_frames, to_peer_receive)

            async def serve() -> None:
                await server.serve(to_server_receive, to_peer_send)
                peer.served.set()
                await to_peer_send.aclose()

            nursery.start_soon(serve)
            yield peer
            if not peer.input_closed:
                await peer.close_input()
    assert not peer.invalid, "the server sent frames the ACP schema refuses:\n" + "\n".join(
        peer.invalid
    )
