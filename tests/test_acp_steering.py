"""Steering and queueing over ACP (issue 37, item 4, acceptance 3; design D530-D533): a
prompt steered mid-turn reaches the model in that turn, a queued one runs next as a turn of
its own, and a cancel drops both with reasons; every such prompt ends answered, dropped
with a reason, or still queued, across cancel, close and load."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from trio_agents import MemoryStore
from trio_agents._store._records import Record
from trio_agents.acp._outcomes import OUTCOME_METHOD, Outcome, Outcomes, replay_outcomes
from trio_agents.testing import ScriptedModel

from .support.acp_peer import AcpPeer, acp_peer


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


async def new_session(peer: AcpPeer) -> str:
    result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
    return str(result["sessionId"])


def outcomes(peer: AcpPeer) -> dict[str, dict[str, Any]]:
    """Every outcome told, by message id; a second one for an id fails the test."""
    told: dict[str, dict[str, Any]] = {}
    for frame in peer.frames:
        if frame.get("method") == OUTCOME_METHOD:
            params = frame["params"]
            assert params["messageId"] not in told, f"told twice: {params}"
            told[params["messageId"]] = params
    return told


def position(peer: AcpPeer, match: dict[str, Any]) -> int:
    """Where the first frame holding every item of `match` (at top level or in params) is."""
    for index, frame in enumerate(peer.frames):
        merged = {**frame, **frame.get("params", {})}
        if all(merged.get(k) == v for k, v in match.items()):
            return index
    raise AssertionError(f"no frame holds {match}")


def records_of(peer: AcpPeer, sid: str) -> list[Any]:
    agent = peer.runtime.agents.get(sid)
    assert agent is not None
    return list(agent.session.records)


def user_texts(model: ScriptedModel, call: int) -> list[str]:
    return [m.content for m in model.requests[call].messages if m.role == "user"]


async def test_initialize_advertises_the_unstable_capability_and_the_extension_methods() -> None:
    async with acp_peer() as peer:
        result = await peer.result("initialize", {"protocolVersion": 1})
        steering = result["agentCapabilities"]["_meta"]["unstable_session_inject"]
        assert steering["modes"] == ["queue", "steer"]
        assert steering["methods"] == {"steer": "_trio-agents/steer", "queue": "_trio-agents/queue"}


async def test_a_steer_reaches_the_running_turn_and_a_queued_prompt_runs_next() -> None:
    model = ScriptedModel(hold_all=True)
    async with acp_peer(lambda: model) as peer:
        sid = await new_session(peer)
        first = await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text("A")})
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1
        steer = await peer.result("_trio-agents/steer", {"sessionId": sid, "prompt": text("S")})
        queued = await peer.result(
            "session/inject", {"sessionId": sid, "mode": "queue", "prompt": text("Q")}
        )
        assert steer["delivery"] == "steering"
        assert queued["delivery"] == "queued"
        for _ in range(3):  # A's step, the step that takes the steering, Q's own turn
            model.release()
            await trio.testing.wait_all_tasks_blocked()
        answer = await peer.answer(first)
        assert answer["result"]["stopReason"] == "end_turn"
        # The steering reached the model in A's turn, at its next step; Q came after, alone.
        assert user_texts(model, 0) == ["A"]
        assert user_texts(model, 1) == ["A", "S"]
        assert user_texts(model, 2) == ["A", "S", "Q"]
        assert len(model.requests) == 3
        told = outcomes(peer)
        assert told[steer["messageId"]]["outcome"] == "answered"
        assert told[steer["messageId"]]["stopReason"] == "end_turn"
        assert told[queued["messageId"]] == {
            "sessionId": sid,
            "messageId": queued["messageId"],
            "outcome": "answered",
            "stopReason": "end_turn",
        }
        # A is answered when its turn ends, not when the queue behind it has run (D532).
        assert (
            position(peer, {"messageId": steer["messageId"]})
            < position(peer, {"id": first})
            < position(peer, {"messageId": queued["messageId"]})
        )
        turns = [r for r in records_of(peer, sid) if r.type == "turn/end"]
        assert len(turns) == 2


async def test_a_cancel_drops_the_steer_and_the_queued_prompt_with_reasons() -> None:
    model = ScriptedModel(hold_all=True)
    async with acp_peer(lambda: model) as peer:
        sid = await new_session(peer)
        first = await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text("A")})
        await trio.testing.wait_all_tasks_blocked()
        steer = await peer.result(
            "session/inject", {"sessionId": sid, "mode": "steer", "prompt": text("S")}
        )
        queued = await peer.result("_trio-agents/queue", {"sessionId": sid, "prompt": text("Q")})
        await peer.notify("session/cancel", {"sessionId": sid})
        answer = await peer.answer(first)
        assert answer["result"] == {"stopReason": "cancelled"}
        told = outcomes(peer)
        for receipt in (steer, queued):
            assert told[receipt["messageId"]] == {
                "sessionId": sid,
                "messageId": receipt["messageId"],
                "outcome": "dropped",
                "reason": "cancelled",
            }
            assert position(peer, {"messageId": receipt["messageId"]}) < position(
                peer, {"id": first}
            )
        await trio.testing.wait_all_tasks_blocked()
        assert len(model.requests) == 1  # neither reached the model
        records = records_of(peer, sid)
        assert [dict(r.data) for r in records if r.type == "prompt/dropped"] == [
            {"ids": (queued["messageId"],), "reason": "cancelled"}
        ]


async def test_a_steer_with_no_turn_running_starts_one_and_is_answered() -> None:
    async with acp_peer(lambda: ScriptedModel()) as peer:
        sid = await new_session(peer)
        receipt = await peer.result("_trio-agents/steer", {"sessionId": sid, "prompt": text("S")})
        assert receipt["delivery"] == "started"
        with trio.fail_after(5):
            while receipt["messageId"] not in outcomes(peer):
                await trio.testing.wait_all_tasks_blocked()
                await trio.lowlevel.checkpoint()
        assert outcomes(peer)[receipt["messageId"]]["stopReason"] == "end_turn"


async def test_a_close_tells_every_outcome_before_it_is_answered() -> None:
    model = ScriptedModel(hold_all=True)
    async with acp_peer(lambda: model) as peer:
        sid = await new_session(peer)
        first = await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text("A")})
        await trio.testing.wait_all_tasks_blocked()
        steer = await peer.result("_trio-agents/steer", {"sessionId": sid, "prompt": text("S")})
        queued = await peer.result("_trio-agents/queue", {"sessionId": sid, "prompt": text("Q")})
        close = await peer.start_request("session/close", {"sessionId": sid})
        assert (await peer.answer(close))["result"] == {}
        assert (await peer.answer(first))["result"] == {"stopReason": "cancelled"}
        told = outcomes(peer)
        for receipt in (steer, queued):
            assert told[receipt["messageId"]]["outcome"] == "dropped"
            assert position(peer, {"messageId": receipt["messageId"]}) < position(
                peer, {"id": close}
            )


async def test_a_load_restates_each_outcome_and_what_still_waits() -> None:
    store = MemoryStore()
    model = ScriptedModel(hold_all=True)
    async with acp_peer(lambda: model, store=store) as peer:
        sid = await new_session(peer)
        first = await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text("A")})
        await trio.testing.wait_all_tasks_blocked()
        steer = await peer.result("_trio-agents/steer", {"sessionId": sid, "prompt": text("S")})
        queued = await peer.result("_trio-agents/queue", {"sessionId": sid, "prompt": text("Q")})
        dropped = await peer.result("_trio-agents/queue", {"sessionId": sid, "prompt": text("D")})
        model.release()
        await trio.testing.wait_all_tasks_blocked()
        model.release()
        await peer.answer(first)
        await trio.testing.wait_all_tasks_blocked()
        assert model.held == 1  # Q's turn runs; D waits behind it
        await peer.notify("session/cancel", {"sessionId": sid})
        await trio.testing.wait_all_tasks_blocked()
        live = outcomes(peer)
        seen = len(peer.frames)
        await peer.result("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        replayed = {
            f["params"]["messageId"]: f["params"]
            for f in peer.frames[seen:]
            if f.get("method") == OUTCOME_METHOD
        }
        assert live[steer["messageId"]]["stopReason"] == "end_turn"
        assert live[queued["messageId"]]["stopReason"] == "cancelled"
        assert live[dropped["messageId"]]["reason"] == "cancelled"
        for receipt in (steer, queued, dropped):
            assert replayed[receipt["messageId"]] == live[receipt["messageId"]]


async def test_a_bad_mode_or_an_unknown_session_is_refused_naming_it() -> None:
    async with acp_peer() as peer:
        sid = await new_session(peer)
        bad = await peer.request(
            "session/inject", {"sessionId": sid, "mode": "now", "prompt": text("x")}
        )
        assert bad["error"]["code"] == -32602
        assert bad["error"]["message"] == (
            "Invalid params: mode must be 'queue' or 'steer', got 'now'"
        )
        unknown = await peer.request(
            "_trio-agents/queue", {"sessionId": "nope", "prompt": text("x")}
        )
        assert unknown["error"]["code"] == -32602
        assert unknown["error"]["message"].endswith("unknown session: nope")


def test_outcomes_follow_the_records_and_a_replay_tells_what_still_waits() -> None:
    records = [
        Record("turn/start", {"turn": 1}),
        Record("user/message", {"id": "m1", "content": "A"}),
        Record("prompt/queued", {"id": "m3", "content": "Q"}),
        Record("prompt/queued", {"id": "m4", "content": "R"}),
        Record("steering/message", {"id": "m2", "content": "S"}),
        Record("assistant/message", {"content": "cut", "finish": "length"}),
        Record("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        Record("turn/start", {"turn": 2}),
        Record("user/message", {"id": "m3", "content": "Q"}),
        Record("turn/end", {"turn": 2, "reason": {"kind": "error", "message": "E: x"}}),
    ]
    told = {o.message_id: o for o in replay_outcomes(records)}
    assert told["m2"] == Outcome("m2", "answered", stop_reason="max_tokens")
    assert told["m3"] == Outcome("m3", "failed", stop_reason="end_turn", reason="E: x")
    assert told["m4"] == Outcome("m4", "queued")
    assert "m1" not in told  # a prompt that neither queued nor steered: its answer said it
    live = Outcomes()
    live.watch("m4")
    live.watch("m5")  # steering a cancel cleared: no record, gone from `pending`
    dropped = Record("prompt/dropped", {"ids": ["m4"], "reason": "cancelled"})
    assert live.on_record(dropped, ()) == [Outcome("m4", "dropped", reason="cancelled")]
    assert live.left_queue(set(), "cancelled") == [Outcome("m5", "dropped", reason="cancelled")]
    assert not live.watched
