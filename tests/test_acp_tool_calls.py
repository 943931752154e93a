"""Tool calls as editors render them (issue 17, item 5): `pending` at the call, `in_progress`
once its tool starts, then `completed` or `failed`; the command as the title; terminal
escapes made readable. Every message is checked against `acp.schema`."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from acp import schema
from hypothesis import given
from hypothesis import strategies as st

from trio_agents import MemoryStore, Record
from trio_agents._shell._readable import readable
from trio_agents.acp._mapping import tool_call_title, tool_started_update, updates_for_record

from .support.acp_peer import acp_peer

# -- readable (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[1;31mred\x1b[0m plain\n", "red plain\n"),
        ("\x9b32mgreen\x9b0m", "green"),  # 8-bit CSI
        ("\x1b[?25l\x1b[2K\x1b[1Gdone", "done"),
        ("a\x1b]0;window title\x07b", "ab"),  # OSC ended by BEL
        ("\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\!", "link!"),  # OSC 8 hyperlink
        ("\x1bP1$r0m\x1b\\after", "after"),  # DCS
        ("cut \x1b]0;no end\nnext line", "cut \nnext line"),
        ("charset \x1b(Bback \x1b7saved", "charset back saved"),
        ("10%\r50%\r100%\r\n", "100%\n"),
        ("downloading 50%\r\x1b[Kdone", "done"),
        ("end\r", "end"),
        ("b\bbo\bol\bld", "bold"),  # a manual page's bold
        ("abc\b\bX", "aXc"),
        ("\b\bx", "x"),
        ("nul\x00 bel\x07 del\x7f c1\x85", "nul^@ bel^G del^? c1\\x85"),
        ("lone escape\x1b", "lone escape^["),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("", ""),
        ("naïve ✓ 日本", "naïve ✓ 日本"),
    ],
)
def test_readable_renders_what_a_terminal_showed(raw: str, shown: str) -> None:
    assert readable(raw) == shown


@given(st.text())
def test_readable_leaves_no_control_character_but_newline_and_tab(text: str) -> None:
    out = readable(text)
    assert all(c in "\n\t" or not (ord(c) < 32 or 127 <= ord(c) < 160) for c in out), out
    # Every line end stays a line end: a reader can still count lines.
    assert out.count("\n") == text.count("\n")
    assert readable(out) == out


@given(st.text(st.characters(exclude_categories=["Cc"])))
def test_text_without_control_characters_is_left_as_it_is(text: str) -> None:
    assert readable(text) == text


# -- the mapping (pure) ----------------------------------------------------------------------


def validate(update: dict[str, Any]) -> None:
    schema.SessionNotification.model_validate({"sessionId": "s", "update": update})


def test_a_call_is_pending_with_its_command_as_the_title_and_its_input_raw() -> None:
    arguments = {"command": "printf '\x1b[2J'\n  ls  -l", "description": "clear and list"}
    (update,) = updates_for_record(
        Record.of("tool/call", {"call_id": "c1", "name": "bash", "arguments": arguments}),
        replay=False,
    )
    validate(update)
    assert update == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "printf '' ls -l",
        "kind": "execute",
        "status": "pending",
        "rawInput": arguments,
    }
    started = tool_started_update("c1")
    validate(started)
    assert started == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "in_progress",
    }


def test_titles_of_other_tools_and_long_commands() -> None:
    assert tool_call_title("bash", {"command": "x" * 500}) == "x" * 199 + "\u2026"
    assert tool_call_title("bash_output", {"job_id": "bash-1"}) == "bash_output: bash-1"
    assert tool_call_title("edit", {"description": " fix it ", "path": "a"}) == "fix it"
    assert tool_call_title("bash", {"command": " "}) == "bash"
    assert tool_call_title("noargs", {}) == "noargs"


@pytest.mark.parametrize(
    ("data", "status", "raw_flags"),
    [
        ({"content": "\x1b[32mok\x1b[0m", "is_error": False}, "completed", {}),
        ({"content": "hi\n[exit code: 3]", "is_error": True}, "failed", {}),
        (
            {"content": "the user rejected the call", "is_error": True, "rejected": True},
            "failed",
            {"rejected": True},
        ),
        (
            {"content": "interrupted", "is_error": True, "interrupted": True},
            "failed",
            {"interrupted": True},
        ),
    ],
)
@pytest.mark.parametrize("replay", [False, True])
def test_a_result_is_completed_or_failed_with_its_output_readable(
    data: dict[str, Any], status: str, raw_flags: dict[str, bool], replay: bool
) -> None:
    (update,) = updates_for_record(
        Record.of("tool/result", {"call_id": "c1", **data}), replay=replay
    )
    validate(update)
    output = readable(data["content"])
    assert update == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": status,
        "content": [{"type": "content", "content": {"type": "text", "text": output}}],
        "rawOutput": {"output": output, "is_error": data["is_error"], **raw_flags},
    }
    assert "\x1b" not in output


# -- the server, with real commands --------------------------------------------------------


def tool_updates(updates: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_call: dict[str, list[dict[str, Any]]] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            by_call.setdefault(update["toolCallId"], []).append(update)
    return by_call


@pytest.mark.subprocess
async def test_live_calls_go_pending_in_progress_then_completed_or_failed_and_a_load_agrees(
    tmp_path: pathlib.Path,
) -> None:
    store = MemoryStore()
    prompts = {
        "!printf '\\033[31mred\\033[0m\\n'; exit 3": ("failed", "red\n[exit code: 3]"),
        "!printf 'a\\rb\\n'": ("completed", "b"),
        "!kill -TERM $$": ("failed", "(no output)\n[killed by signal: SIGTERM]"),
    }
    async with acp_peer(store=store) as peer:
        new = await peer.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = new["sessionId"]
        for prompt in prompts:
            answer = await peer.result(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}
            )
            assert answer == {"stopReason": "end_turn"}
        live = tool_updates(peer.updates(sid))
        for frame in peer.frames:
            if frame.get("method") == "session/update":
                schema.SessionNotification.model_validate(frame["params"])
    assert [[u["status"] for u in updates] for updates in live.values()] == [
        ["pending", "in_progress", status] for status, _ in prompts.values()
    ]
    for updates, (prompt, (_, output)) in zip(live.values(), prompts.items(), strict=True):
        call, _, result = updates
        assert (call["kind"], call["title"]) == ("execute", prompt[1:])
        assert result["content"][0]["content"]["text"] == output
    async with acp_peer(store=store) as peer:
        await peer.result(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        replayed = tool_updates(peer.updates(sid))
        for frame in peer.frames:
            if frame.get("method") == "session/update":
                schema.SessionNotification.model_validate(frame["params"])
    assert list(replayed) == list(live)
    for call_id, updates in replayed.items():
        assert [u["status"] for u in updates] == ["pending", live[call_id][-1]["status"]]
        assert updates[0] == live[call_id][0]
        assert updates[-1] == live[call_id][-1]


def test_a_bash_call_asking_for_another_directory_names_it() -> None:
    # D485: a permission request shows where the command runs, when not the session's cwd.
    assert tool_call_title("bash", {"command": "rm -rf x", "workdir": "../other"}) == (
        "rm -rf x (in ../other)"
    )
    assert tool_call_title("bash", {"command": "ls", "workdir": "."}) == "ls"
    assert tool_call_title("bash", {"command": "ls", "workdir": ""}) == "ls"
