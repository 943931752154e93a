"""The pure cores: inbox, options, transcript, records, the reference model, and the rule
that they import no trio (so they can be reasoned about and tested without a run)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

import trio_agents
from agent_conformance._reference import AgentReference
from trio_agents import AgentOptions, Record
from trio_agents._agent._inbox import Inbox, InboxMessage
from trio_agents._cli._chat_render import describe_end
from trio_agents._store._records import decode_turn_end
from trio_agents._store._transcript import Transcript
from trio_agents.acp._jsonrpc import JsonRpcError
from trio_agents.acp._mapping import stop_reason

from .support.layout import PURE

ROOT = pathlib.Path(trio_agents.__file__).parent.parent


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", PURE)
def test_pure_core_imports_neither_trio_nor_hypothesis(module: str) -> None:
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    assert not {"trio", "hypothesis"} & imported_modules(path)


def test_the_runtime_never_imports_hypothesis() -> None:
    """Hypothesis is the conformance suite's (agent_conformance); the runtime and its
    testing toolkit do without it."""
    root = pathlib.Path(trio_agents.__file__).parent
    offenders = [
        str(p.relative_to(root)) for p in root.rglob("*.py") if "hypothesis" in imported_modules(p)
    ]
    assert offenders == []


def test_package_all_is_exactly_the_public_names() -> None:
    public = {name for name in vars(trio_agents) if not name.startswith("_")}
    modules = {
        name for name, value in vars(trio_agents).items() if type(value).__name__ == "module"
    }
    # The names that load on first use (the `mcp` SDK's) are public before they are loaded.
    lazy = set(trio_agents._LAZY)  # pyright: ignore[reportPrivateUsage]
    assert set(trio_agents.__all__) == (public | lazy) - modules - {"TYPE_CHECKING"}
    assert len(trio_agents.__all__) == len(set(trio_agents.__all__))
    for name in trio_agents.__all__:
        assert getattr(trio_agents, name) is not None


def msg(mid: str, kind: str = "prompt") -> InboxMessage:
    return InboxMessage(mid, f"content of {mid}", kind)  # type: ignore[arg-type]


def test_inbox_prompts_are_fifo_and_step_input_keeps_acceptance_order() -> None:
    inbox = Inbox()
    for m in (msg("p1"), msg("s1", "steering"), msg("c1", "context"), msg("p2")):
        inbox.push(m)
    assert [m.id for m in inbox] == ["s1", "c1", "p1", "p2"]
    assert inbox.pop_prompt() == msg("p1")
    assert [m.id for m in inbox.claim_step_input()] == ["s1", "c1"]
    assert inbox.claim_step_input() == []
    assert [m.id for m in inbox] == ["p2"]


def test_inbox_discard_work_keeps_context() -> None:
    inbox = Inbox()
    for m in (msg("p1"), msg("s1", "steering"), msg("c1", "context")):
        inbox.push(m)
    assert [m.id for m in inbox.discard_work()] == ["s1", "p1"]
    assert [m.id for m in inbox] == ["c1"]
    assert not inbox.has_work


def test_inbox_requeue_steering_puts_it_ahead_of_prompts_as_prompts() -> None:
    inbox = Inbox()
    for m in (msg("p1"), msg("s1", "steering"), msg("c1", "context"), msg("s2", "steering")):
        inbox.push(m)
    inbox.requeue_steering()
    assert [(m.id, m.kind) for m in inbox] == [
        ("c1", "context"),
        ("s1", "prompt"),
        ("s2", "prompt"),
        ("p1", "prompt"),
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_steps": 0},
        {"max_steps": 1.5},
        {"max_steps": True},
        {"step_timeout": 0},
        {"step_timeout": float("inf")},
        {"step_timeout": float("nan")},
        {"close_grace": -1},
    ],
)
def test_options_reject_bad_values_and_name_them(kwargs: dict[str, object]) -> None:
    ((name, value),) = kwargs.items()
    with pytest.raises(ValueError, match=name) as info:
        AgentOptions(**kwargs)  # type: ignore[arg-type]
    assert repr(value) in str(info.value)


def test_transcript_attaches_tool_calls_to_the_assistant_message() -> None:
    transcript = Transcript(
        [
            Record.of("user/message", {"id": "m1", "content": "hi"}),
            Record.of("assistant/message", {"content": "let me look"}),
            Record.of("tool/call", {"call_id": "c1", "name": "ls", "arguments": {}}),
            Record.of("tool/call", {"call_id": "c2", "name": "cat", "arguments": {"f": "x"}}),
            Record.of("tool/result", {"call_id": "c1", "content": "a b", "is_error": False}),
            Record.of("tool/result", {"call_id": "c2", "content": "x!", "is_error": False}),
        ]
    )
    messages = transcript.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [c.call_id for c in messages[1].tool_calls] == ["c1", "c2"]
    assert messages[1].content == "let me look"
    assert messages[3].call_id == "c2"


def test_reference_model_walks_a_turn_with_steering_and_max_steps() -> None:
    ref = AgentReference(max_steps=1)
    ref.send("m1")
    assert (ref.status, ref.phase, ref.requests) == ("running", "model", 1)
    ref.steer("m2")
    ref.release_model("text")
    # max_steps stops the turn; the steering becomes the next turn's prompt.
    assert [t.end for t in ref.turns] == [{"kind": "max_steps"}, None]
    assert ref.turns[1].prompt == "m2"
    assert ref.cancel("stop", "parent") is True
    assert ref.turns[1].end == {"kind": "aborted", "reason": "stop", "cause": "parent"}
    assert ref.status == "idle"
    assert ref.status_trace == ["running", "idle"]
    assert ref.cancels == [("parent", "stop")]
    assert ref.cancel() is False
    assert ref.fate == {"m1": "delivered", "m2": "delivered"}


def test_testing_exports_resolve_and_hypothesis_loads_only_for_the_machines() -> None:
    code = (
        "import sys, trio_agents, trio_agents.testing as t, agent_conformance as c\n"
        "for name in t.__all__: getattr(t, name)\n"
        "assert 'hypothesis' not in sys.modules, 'ScriptedModel users pay for Hypothesis'\n"
        "for name in c.__all__: getattr(c, name)\n"
        "assert 'hypothesis' in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("reason", "decoded"),
    [
        ({"kind": "completed"}, {"kind": "completed"}),
        ({"kind": "error"}, {"kind": "error", "message": ""}),
        ({"kind": "aborted", "cause": "user"}, {"kind": "aborted", "reason": "", "cause": "user"}),
        ({"kind": "error", "message": 3}, {"kind": "error", "message": "3"}),
        ({"kind": "from-a-newer-version"}, None),
        ({}, None),
    ],
)
def test_a_turn_end_reason_decodes_whatever_fields_it_lacks(
    reason: dict[str, object], decoded: object
) -> None:
    assert decode_turn_end(reason) == decoded


def test_partial_reasons_still_say_how_the_turn_ended() -> None:
    assert describe_end({"kind": "error"}) == "[error: ]"
    assert describe_end({"kind": "aborted", "cause": "user"}) == "[cancelled]"
    assert describe_end({"kind": "from-a-newer-version"}) == "[ended: from-a-newer-version]"
    end = Record.of("turn/end", {"turn": 1, "reason": {"kind": "error"}})
    start = [Record.of("turn/start", {"turn": 1}), Record.of("user/message", {"id": "m1"})]
    answer = stop_reason([*start, end], "m1", cancel_requested=False)
    assert isinstance(answer, JsonRpcError)
    assert answer.detail == "turn failed: "
