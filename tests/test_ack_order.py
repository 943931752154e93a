"""Acknowledged means durable, in process (rule L9): an ACP prompt is answered, and the chat
shows its next prompt, only once the store has committed the turn; a turn the store cannot
commit is never acknowledged as stored. A `HeldStore` holds every flush, so the order is
exact, with no timing."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing

from agent_conformance._held_store import HeldStore
from trio_agents import AgentStatus, MemoryStore, Record, Session
from trio_agents._cli._chat import ChatConfig, run_chat
from trio_agents._cli._chat_render import PROMPT
from trio_agents._errors import PersistenceError, StoreBrokenError
from trio_agents._model._offline import OfflineModel

from .support.acp_peer import acp_peer


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def ends(records: Sequence[Record]) -> list[str]:
    return [str(r.data["reason"]["kind"]) for r in records if r.type == "turn/end"]


async def test_a_prompt_is_answered_only_once_its_turn_is_committed() -> None:
    store = HeldStore()
    async with acp_peer(store=store) as peer:
        result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = str(result["sessionId"])
        store.hold("flush")
        prompt_id = await peer.start_request(
            "session/prompt", {"sessionId": sid, "prompt": text("hello")}
        )
        await trio.testing.wait_all_tasks_blocked()
        agent = peer.runtime.agents.get(sid)
        assert agent is not None
        assert ends(agent.session.records) == ["completed"]  # the turn ran...
        assert ends(store.durable(sid)) == []  # ...but is not committed
        assert not [f for f in peer.frames if f.get("id") == prompt_id], "answered too early"
        store.release()
        answer = await peer.answer(prompt_id)
        assert answer["result"] == {"stopReason": "end_turn"}
        assert ends(store.durable(sid)) == ["completed"]


class FailingFlushStore(MemoryStore):
    """A store whose flush fails while `failing` is set, as a broken disk makes it."""

    failing = False

    def _committed_all(self, session: Session) -> bool:
        return not self.failing  # what a store cannot write is not committed

    async def flush(self, session: Session) -> None:
        await trio.lowlevel.checkpoint()
        if self.failing:
            raise StoreBrokenError("the disk is gone (test)")


async def test_a_turn_the_store_cannot_commit_is_answered_with_an_error() -> None:
    store = FailingFlushStore()
    # The failed commit stops the agent (rule L7, as with a real store), and the runtime
    # raises its PersistenceError once the connection is over.
    with pytest.RaisesGroup(pytest.RaisesExc(PersistenceError), flatten_subgroups=True):
        async with acp_peer(store=store) as peer:
            result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
            sid = str(result["sessionId"])
            store.failing = True
            prompt = {"sessionId": sid, "prompt": text("a")}
            answer = await peer.request("session/prompt", prompt)
            assert "result" not in answer
            assert answer["error"]["code"] == -32603
            assert "not stored" in answer["error"]["message"]
            assert "the disk is gone (test)" in answer["error"]["message"]
            store.failing = False
            # The next prompt is refused with a line that says so, never run unstored.
            prompt = {"sessionId": sid, "prompt": text("b")}
            answer = await peer.request("session/prompt", prompt)
            assert answer["error"]["code"] == -32603
            assert "it is closed" in answer["error"]["message"]


class Terminal:
    """Lines typed by the test; every prompt shown notes the turns durable at that moment."""

    def __init__(self, store: HeldStore) -> None:
        self.store = store
        self.output = ""
        self.errors: list[str] = []
        self.durable_at_prompt: list[list[str]] = []
        self.send, self._lines = trio.open_memory_channel[str](math.inf)

    async def readline(self) -> str | None:
        try:
            return await self._lines.receive()
        except trio.EndOfChannel:
            return None

    def write(self, text: str) -> None:
        self.output += text
        if text.endswith(PROMPT):
            self.durable_at_prompt.append(ends(self.store.durable("s1")))

    def error(self, text: str) -> None:
        self.errors.append(text)


async def test_the_chat_shows_the_next_prompt_only_once_the_turn_is_committed() -> None:
    store = HeldStore()
    term = Terminal(store)
    config = ChatConfig(store=store, model_factory=OfflineModel, new_session_id="s1", cwd="/")
    never: trio.MemoryReceiveChannel[object] = trio.open_memory_channel[object](0)[1]
    async with trio.open_nursery() as nursery:

        async def chat() -> None:
            assert await run_chat(term, config, never) == 0

        nursery.start_soon(chat)
        await trio.testing.wait_all_tasks_blocked()
        assert term.durable_at_prompt == [[]]
        store.hold("flush")
        term.send.send_nowait("hello")
        await trio.testing.wait_all_tasks_blocked()
        assert "echo: hello" in term.output  # the turn ran and was shown...
        assert term.durable_at_prompt == [[]]  # ...but no prompt while it is not committed
        store.release()
        await trio.testing.wait_all_tasks_blocked()
        assert term.durable_at_prompt == [[], ["completed"]]
        term.send.close()
    assert term.errors == []


async def test_the_chat_says_so_and_exits_1_when_the_store_cannot_commit_a_turn() -> None:
    store = FailingFlushStore()
    term = Terminal(HeldStore())  # only its prompt bookkeeping; the chat uses `store`
    config = ChatConfig(store=store, model_factory=OfflineModel, new_session_id="s1", cwd="/")
    never: trio.MemoryReceiveChannel[object] = trio.open_memory_channel[object](0)[1]
    codes: list[int] = []
    async with trio.open_nursery() as nursery:

        async def chat() -> None:
            codes.append(await run_chat(term, config, never))

        nursery.start_soon(chat)
        await trio.testing.wait_all_tasks_blocked()
        store.failing = True
        term.send.send_nowait("hello")
    assert codes == [1]
    assert term.errors[0] == (
        "trio-agents chat: the turn was not stored: the disk is gone (test)"
    ), term.errors
    assert term.output.count(PROMPT) == 1  # no prompt after the turn that was not stored


async def test_the_held_store_keeps_the_agent_from_idle_until_its_flush_is_released() -> None:
    # HeldStore says a record is committed only once flushed, so the agent's own commit
    # before IDLE (rule L7) waits on a held flush, as it would on a slow disk (D372).
    store = HeldStore()
    async with acp_peer(store=store) as peer:
        result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = str(result["sessionId"])
        agent = peer.runtime.agents.get(sid)
        assert agent is not None
        store.hold("flush")
        prompt_id = await peer.start_request(
            "session/prompt", {"sessionId": sid, "prompt": text("hello")}
        )
        await trio.testing.wait_all_tasks_blocked()
        assert agent.status is not AgentStatus.IDLE
        # The agent's commit, and the answer's own when the turn ended before that commit
        # (D532): both wait on the held flush.
        assert {f.session_id for f in store.flushes} == {sid}
        assert not [f for f in peer.frames if f.get("id") == prompt_id]  # not answered
        store.release()
        await peer.answer(prompt_id)
        assert agent.status is AgentStatus.IDLE


class CountingStore(MemoryStore):
    """A MemoryStore that counts its flushes."""

    flushed = 0

    async def flush(self, session: Session) -> None:
        self.flushed += 1
        await super().flush(session)


async def test_a_prompt_whose_turn_is_committed_is_answered_without_a_flush() -> None:
    # Idle means committed (rule L7): the answer needs no flush of its own, and so no
    # schedule point between the turn's last update and the answer (D372).
    store = CountingStore()
    async with acp_peer(store=store) as peer:
        result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = str(result["sessionId"])
        answer = await peer.request("session/prompt", {"sessionId": sid, "prompt": text("a")})
        assert answer["result"] == {"stopReason": "end_turn"}
        assert store.flushed == 0
