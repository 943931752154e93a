"""Permission requests, modes and models on the wire, in process over memory streams: every
new message validated against the official schema (`acp.schema`), the answers that fail
closed, the end of input while a request is pending, and a model switched mid-session
(issue 17, items 2 and 3)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing
from acp import schema

from trio_agents import (
    Approval,
    ApprovalRequest,
    Decision,
    Finish,
    MemoryStore,
    ModelChunk,
    ModelRequest,
    TextDelta,
)
from trio_agents._cli._model_choice import offered_models
from trio_agents._frozen import freeze
from trio_agents.acp import _jsonrpc as rpc
from trio_agents.acp._client_requests import ClientRequests
from trio_agents.acp._jsonrpc import ClientRequestError
from trio_agents.acp._modes import ModePolicy
from trio_agents.acp._permissions import AcpApprover, permission_params
from trio_agents.acp._server import AcpServer
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.acp_peer import AcpPeer, acp_peer

CALL = ("bash", {"command": "touch never-made", "description": "make a file"})


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def asking(peer: AcpPeer) -> list[dict[str, Any]]:
    return [f for f in peer.frames if f.get("method") == "session/request_permission"]


async def asked(peer: AcpPeer, count: int) -> dict[str, Any]:
    """The `count`th permission request, once the server has sent it (checked valid)."""
    with trio.fail_after(10):
        while len(asking(peer)) < count:
            await trio.testing.wait_all_tasks_blocked()
    frame = asking(peer)[count - 1]
    schema.RequestPermissionRequest.model_validate(frame["params"])
    return frame


async def answer(peer: AcpPeer, request_id: Any, **body: Any) -> None:
    await peer.send_raw(json.dumps({"jsonrpc": "2.0", "id": request_id, **body}).encode() + b"\n")


def records(peer: AcpPeer, sid: str, kind: str) -> list[dict[str, Any]]:
    agent = peer.runtime.agents.get(sid)
    assert agent is not None
    return [dict(r.data) for r in agent.session.records if r.type == kind]


def check_updates(peer: AcpPeer) -> None:
    for frame in peer.frames:
        if frame.get("method") == "session/update":
            schema.SessionNotification.model_validate(frame["params"])


async def new_session(peer: AcpPeer) -> tuple[str, dict[str, Any]]:
    result = await peer.result("session/new", {"cwd": "/tmp", "mcpServers": []})
    schema.NewSessionResponse.model_validate(result)
    return str(result["sessionId"]), result


async def test_P8_an_error_an_option_not_offered_or_a_malformed_answer_rejects_the_call() -> None:
    answers: list[tuple[dict[str, Any], str]] = [
        ({"error": {"code": -32601, "message": "no"}}, "it answered error -32601"),
        ({"result": {"outcome": {"outcome": "selected", "optionId": "yes"}}}, "option 'yes'"),
        ({"result": {"outcome": "allow"}}, "no outcome object"),
        ({"result": {"outcome": {"outcome": "granted"}}}, "'granted'"),
    ]
    model = ScriptedModel([step for _ in answers for step in (tool_step(CALL), reply("ok"))])
    async with acp_peer(lambda: model, mode="ask") as peer:
        sid, _ = await new_session(peer)
        for number, (body, why) in enumerate(answers, 1):
            prompt = await peer.start_request(
                "session/prompt", {"sessionId": sid, "prompt": text("go")}
            )
            request = await asked(peer, number)
            assert request["id"] == f"agent-{number}"
            params = request["params"]
            assert params["sessionId"] == sid
            assert params["toolCall"]["status"] == "pending"
            assert params["toolCall"]["kind"] == "execute"
            assert params["toolCall"]["rawInput"] == CALL[1]
            assert [o["kind"] for o in params["options"]] == [
                "allow_once", "allow_always", "reject_once", "reject_always"
            ]  # fmt: skip
            await answer(peer, request["id"], **body)
            assert (await peer.answer(prompt))["result"] == {"stopReason": "end_turn"}
            approval = records(peer, sid, "tool/approval")[-1]
            assert (approval["decision"], approval["by"]) == ("reject_once", "acp-client")
            assert why in approval["note"]
            result = records(peer, sid, "tool/result")[-1]
            assert result["rejected"] is True
            assert why in result["content"]
        assert (
            records(peer, sid, "tool/result")[0]["call_id"]
            == asking(peer)[0]["params"]["toolCall"]["toolCallId"]
        )
        check_updates(peer)


async def test_P8_the_cancelled_outcome_ends_the_turn_and_the_prompt_answers_cancelled() -> None:
    model = ScriptedModel([tool_step(CALL), reply("never said")])
    async with acp_peer(lambda: model, mode="ask") as peer:
        sid, _ = await new_session(peer)
        prompt = await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text("x")})
        request = await asked(peer, 1)
        await answer(peer, request["id"], result={"outcome": {"outcome": "cancelled"}})
        assert (await peer.answer(prompt))["result"] == {"stopReason": "cancelled"}
        (approval,) = records(peer, sid, "tool/approval")
        assert approval["decision"] == "cancel"
        (end,) = records(peer, sid, "turn/end")
        assert end["reason"]["kind"] == "aborted"
        assert len(model.requests) == 1  # the model was not called again
        check_updates(peer)


async def test_end_of_input_with_a_permission_request_pending_cancels_its_turn() -> None:
    store = MemoryStore()
    model = ScriptedModel([tool_step(CALL), reply("never said")])
    async with acp_peer(lambda: model, store=store, mode="ask") as peer:
        sid, _ = await new_session(peer)
        prompt = await peer.start_request("session/prompt", {"sessionId": sid, "prompt": text("x")})
        await asked(peer, 1)
        await peer.close_input()
        assert (await peer.answer(prompt))["result"] == {"stopReason": "cancelled"}
        await peer.served.wait()
    stored = await store.load(sid)
    (approval,) = [r.data for r in stored.records if r.type == "tool/approval"]
    assert (approval["decision"], approval["by"]) == ("cancel", "acp-server")
    assert "ended before it answered" in approval["note"]
    (result,) = [r.data for r in stored.records if r.type == "tool/result"]
    assert "rejected" not in result  # interrupted, never run


async def test_modes_switch_by_set_mode_and_config_option_and_every_message_validates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with acp_peer(ScriptedModel, mode="ask") as peer:
        sid, created = await new_session(peer)
        assert created["modes"]["currentModeId"] == "ask"
        mode_option, model_option = created["configOptions"]
        assert (mode_option["id"], mode_option["category"]) == ("mode", "mode")
        assert [o["value"] for o in mode_option["options"]] == ["ask", "auto", "read-only"]
        assert (model_option["currentValue"], model_option["category"]) == ("default", "model")

        result = await peer.result("session/set_mode", {"sessionId": sid, "modeId": "auto"})
        schema.SetSessionModeResponse.model_validate(result)
        params = {"sessionId": sid, "configId": "mode", "value": "read-only"}
        result = await peer.result("session/set_config_option", params)
        schema.SetSessionConfigOptionResponse.model_validate(result)
        assert result["configOptions"][0]["currentValue"] == "read-only"
        kinds = [(u["sessionUpdate"], u.get("currentModeId")) for u in peer.updates(sid)]
        assert kinds == [
            ("current_mode_update", "auto"),
            ("config_option_update", None),
            ("current_mode_update", "read-only"),
        ]
        bad_modes: list[tuple[dict[str, Any], str]] = [
            ({"sessionId": sid, "modeId": "yolo"}, "'yolo'"),
            ({"sessionId": sid, "modeId": 3}, "modeId must be a string"),
            ({"sessionId": "nobody", "modeId": "auto"}, "unknown session: nobody"),
        ]
        for bad, named in bad_modes:
            refused = await peer.request("session/set_mode", bad)
            assert refused["error"]["code"] == -32602
            assert named in refused["error"]["message"]
        for bad, named in [
            ({"sessionId": sid, "configId": "colour", "value": "red"}, "'colour'"),
            ({"sessionId": sid, "configId": "model", "value": "gpt-9"}, "'gpt-9'"),
        ]:
            refused = await peer.request("session/set_config_option", bad)
            assert refused["error"]["code"] == -32602
            assert named in refused["error"]["message"]
        assert len(peer.updates(sid)) == 3  # a refused switch changes nothing and says nothing

        # Answers nobody asked for: logged, and the server goes on.
        with caplog.at_level(logging.WARNING, logger="trio_agents.acp"):
            await answer(peer, "agent-99", result={})
            await answer(peer, 7, error={"code": 1, "message": "x"})
            await peer.result("initialize", {"protocolVersion": 1})
        assert caplog.text.count("a response to nothing was ignored") == 2
        check_updates(peer)


class Named:
    """A model that says its name."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        await trio.lowlevel.checkpoint()
        yield TextDelta(f"I am {self.name}")
        yield Finish("stop")


def broken() -> Named:
    raise ValueError("set OPENAI_MODEL to use this model")


async def test_the_model_switches_from_the_next_call_and_a_loaded_session_starts_afresh() -> None:
    store = MemoryStore()
    models = {"first": lambda: Named("first"), "second": lambda: Named("second"), "x": broken}

    async def said(peer: AcpPeer, sid: str) -> str:
        before = len(peer.updates(sid))
        await peer.result("session/prompt", {"sessionId": sid, "prompt": text("who?")})
        return "".join(
            u["content"]["text"]
            for u in peer.updates(sid)[before:]
            if u["sessionUpdate"] == "agent_message_chunk"
        )

    async with acp_peer(None, models=models, store=store, mode="auto") as peer:
        sid, created = await new_session(peer)
        assert created["modes"]["currentModeId"] == "auto"
        assert [o["value"] for o in created["configOptions"][1]["options"]] == list(models)
        assert await said(peer, sid) == "I am first"
        params = {"sessionId": sid, "configId": "model", "value": "second"}
        switched = await peer.result("session/set_config_option", params)
        assert switched["configOptions"][1]["currentValue"] == "second"
        assert await said(peer, sid) == "I am second"
        refused = await peer.request("session/set_config_option", {**params, "value": "x"})
        assert "set OPENAI_MODEL" in refused["error"]["message"]
        assert await said(peer, sid) == "I am second"
        await peer.result("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
    # Loaded by a server whose sessions start in `ask`: in ask, with its first model (D193).
    async with acp_peer(None, models=models, store=store, mode="ask") as peer:
        loaded = await peer.result(
            "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        schema.LoadSessionResponse.model_validate(loaded)
        assert loaded["modes"]["currentModeId"] == "ask"
        assert loaded["configOptions"][1]["currentValue"] == "first"
        check_updates(peer)


def test_the_server_refuses_a_mode_or_models_it_cannot_use() -> None:
    runtime: Any = object()  # never reached: the arguments are checked first
    with pytest.raises(ValueError, match="unknown mode 'yolo'"):
        AcpServer(runtime, ScriptedModel, mode="yolo")
    with pytest.raises(ValueError, match="not both"):
        AcpServer(runtime, ScriptedModel, models={"a": ScriptedModel})
    with pytest.raises(ValueError, match="needs a model"):
        AcpServer(runtime, models={})


def test_the_command_line_offers_its_model_then_offline_then_a_configured_endpoint() -> None:
    assert list(offered_models("offline", env={})) == ["offline"]
    configured = {"OPENAI_MODEL": "m"}
    assert list(offered_models("offline", env=configured)) == ["offline", "openai"]
    assert list(offered_models("openai", env=configured)) == ["openai", "offline"]


def test_read_only_rejects_even_a_tool_always_allowed_before_and_says_why() -> None:
    policy = ModePolicy("ask")
    approval = Approval(policy, AcpApprover("s", unused_request))
    request = ApprovalRequest("s", "c1", 1, 1, "bash", {"command": "touch x"})
    approval.remember(request, Decision("allow_always", by="acp-client"))
    assert approval.settled(request, policy.verdict(request)) == Decision(
        "allow_always", by="remembered", note="an earlier answer for this tool in this session"
    )
    policy.switch("read-only")
    decision = approval.settled(request, policy.verdict(request))
    assert decision is not None
    assert (decision.outcome, decision.by) == ("reject_once", "policy")
    assert decision.note == (
        "the session is in read-only mode, where 'bash' does not run; "
        "the user can switch to the ask or auto mode"
    )
    output = ApprovalRequest("s", "c2", 1, 1, "bash_output", {"job_id": "bash-1"})
    assert policy.verdict(output) == "allow"
    assert policy.verdict(ApprovalRequest("s", "c3", 1, 1, "bash_kill", {})) == "reject"
    policy.switch("auto")
    assert policy.verdict(request) == "allow"
    with pytest.raises(ValueError, match="unknown mode 'yolo'; the modes are ask, auto, read-only"):
        policy.switch("yolo")
    assert policy.mode == "auto"


async def unused_request(method: str, params: Mapping[str, Any]) -> Any:
    raise AssertionError(f"nothing is asked here, yet {method} was sent")


async def test_a_request_left_by_a_cancel_drops_its_late_answer_and_errors_stay_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent: list[bytes] = []
    table = ClientRequests(sent.append)
    outcome: list[object] = []

    async def ask(scope: trio.CancelScope) -> None:
        with scope:
            outcome.append(await table.request("x/y", {"n": 1}))

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, scope)
        await trio.testing.wait_all_tasks_blocked()
        assert json.loads(sent[0]) == {
            "jsonrpc": "2.0", "id": "agent-1", "method": "x/y", "params": {"n": 1}
        }  # fmt: skip
        assert table.pending == 1
        scope.cancel()
    assert (outcome, table.pending) == ([], 0)
    with caplog.at_level(logging.INFO, logger="trio_agents.acp"):
        table.resolve(rpc.Response("agent-1", {"late": True}, None))
    assert "a late answer to abandoned request agent-1 was ignored" in caplog.text

    # An error with no integer code is still the client's answer: a rejection, not a cancel.
    approver = AcpApprover("s", table.request)
    request = ApprovalRequest("s", "c1", 1, 1, "bash", {"command": "true"})
    decisions: list[Decision] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _decide(approver, request, decisions))
        await trio.testing.wait_all_tasks_blocked()
        table.resolve(rpc.Response("agent-2", None, {"code": True, "message": "nope"}))
    ((decision,),) = [decisions]
    assert (decision.outcome, decision.note) == (
        "reject_once",
        "no valid answer from the client: it answered error None: nope",
    )
    table.close()
    with pytest.raises(ClientRequestError, match="has ended") as ended:
        await table.request("x/y", {})
    assert not ended.value.answered


async def _decide(approver: AcpApprover, request: ApprovalRequest, into: list[Decision]) -> None:
    into.append(await approver(request))


def test_a_permission_request_carries_nested_arguments_as_plain_json() -> None:
    """Recorded arguments are read-only mappings and tuples at every depth: the request
    holds them as plain JSON, the same `rawInput` the `tool_call` update showed."""
    arguments = freeze({"command": "ls", "env": {"A": ["1", "2"]}, "ratio": float("nan")})
    request = ApprovalRequest("s1", "c1", 1, 1, "bash", arguments)
    params = permission_params("s1", request)
    frame = json.loads(rpc.encode_request("agent-1", "session/request_permission", params))
    raw = frame["params"]["toolCall"]["rawInput"]
    assert isinstance(raw, str)  # not strict JSON (a NaN): its repr, as in tool_call
    assert "nan" in raw
    nested = freeze({"env": {"A": ["1"]}})
    plain = permission_params("s1", ApprovalRequest("s1", "c1", 1, 1, "bash", nested))
    assert plain["toolCall"]["rawInput"] == {"env": {"A": ["1"]}}
    schema.RequestPermissionRequest.model_validate(plain)
