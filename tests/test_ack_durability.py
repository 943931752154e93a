"""Acknowledged means durable (issue 16, acceptance 2): a real `trio-agents acp` process is
SIGKILLed right after it answers a `session/prompt`, and the SQLite file, read directly
before anything reopens it, holds the whole answered turn: its prompt, its records, and a
`turn/end` of the kind the answer reported.

The kill follows the read of the answer at once; nothing waits for the disk in between, so a
server that answered before the commit would lose the turn here (it did: 51 of 105). The
same for `trio-agents chat`, killed as soon as it shows its next prompt.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any, Final

import pexpect
import pytest

from .support.acp_process import AcpProcess

pytestmark = pytest.mark.subprocess

KILLS: Final = 50
SESSIONS: Final = 20
ROUNDS: Final = 3


def stored_records(store: Path, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The session's records as the file holds them (read-only, no repair)."""
    conn = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT type, data FROM records WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    finally:
        conn.close()
    return [(kind, json.loads(data)) for kind, data in rows]


def turn_of(records: list[tuple[str, dict[str, Any]]], prompt: str) -> list[str] | None:
    """The record types of the turn whose prompt is `prompt`, from its `turn/start` to its
    `turn/end` (or to the end of the file if it has none), or None if the prompt is absent."""
    for index, (kind, data) in enumerate(records):
        if kind == "user/message" and data.get("content") == prompt:
            start = max(i for i in range(index + 1) if records[i][0] == "turn/start")
            types: list[str] = []
            for kind_after, data_after in records[start:]:
                types.append(kind_after)
                if kind_after == "turn/end":
                    types.append(str(data_after["reason"]["kind"]))
                    return types
            return types
    return None


def expected_turn(prompt: str) -> list[str]:
    if prompt.startswith("!"):
        step = ["step/start", "assistant/message", "tool/call", "tool/result", "step/end"]
        reply = ["step/start", "assistant/message", "step/end"]
        return ["turn/start", "user/message", *step, *reply, "turn/end", "completed"]
    return [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
        "completed",
    ]


def test_every_answered_prompt_is_on_disk_after_a_sigkill_right_after_its_answer(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite3"
    session_id = ""
    problems: list[str] = []
    for kill in range(KILLS):
        server = AcpProcess(store)
        try:
            server.initialize()
            if not session_id or kill % 10 == 0:
                # A new session every ten kills, so the replays of `session/load` stay short.
                session_id = server.new_session(tmp_path)
            else:
                params: dict[str, Any] = {
                    "sessionId": session_id,
                    "cwd": str(tmp_path),
                    "mcpServers": [],
                }
                server.result("session/load", params)
            prompt = f"!echo kill {kill}" if kill % 2 else f"answer {kill}"
            answer = server.answer(server.prompt(session_id, prompt))
            server.kill()  # at once: the answer was just read
        finally:
            server.close()
        assert answer.get("result") == {"stopReason": "end_turn"}, answer
        found = turn_of(stored_records(store, session_id), prompt)
        if found != expected_turn(prompt):
            problems.append(f"kill {kill}: {prompt!r} answered, on disk: {found}")
            if found is None:
                session_id = ""  # perhaps not stored at all: the next kill starts anew
    assert problems == [], f"{len(problems)} of {KILLS} answered turns not on disk: {problems}"


def test_twenty_sessions_answering_at_once_are_all_on_disk_after_a_sigkill(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite3"
    problems: list[str] = []
    answered_total = 0
    for round_ in range(ROUNDS):
        server = AcpProcess(store)
        try:
            server.initialize()
            sessions = [server.new_session(tmp_path) for _ in range(SESSIONS)]
            prompts = {
                server.prompt(sid, f"!echo r{round_} s{i}" if i % 2 else f"r{round_} s{i}"): (
                    sid,
                    f"!echo r{round_} s{i}" if i % 2 else f"r{round_} s{i}",
                )
                for i, sid in enumerate(sessions)
            }
            first = next(iter(prompts))
            while not server.answered(list(prompts)):
                frame = server.read_frame()
                assert frame is not None, "the server ended early"
            server.kill()  # on the first answer; later ones still in the pipe are read too
            answered = server.answered(list(prompts))
        finally:
            server.close()
        assert first in prompts
        answered_total += len(answered)
        for request_id in answered:
            sid, prompt = prompts[request_id]
            found = turn_of(stored_records(store, sid), prompt)
            if found != expected_turn(prompt):
                problems.append(f"round {round_}: {prompt!r} answered, on disk: {found}")
    assert answered_total >= ROUNDS
    assert problems == [], f"{len(problems)} of {answered_total} answered turns lost: {problems}"


CHAT_KILLS: Final = 6


def test_every_turn_the_chat_showed_a_prompt_after_is_on_disk_after_a_sigkill(
    tmp_path: Path,
) -> None:
    """`trio-agents chat` in a pseudo-terminal: the next `> ` means the turn is stored."""
    store = tmp_path / "s.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    session_id = ""
    problems: list[str] = []
    for kill in range(CHAT_KILLS):
        resume = ["--session", session_id] if session_id else []
        child: pexpect.spawn[str] = pexpect.spawn(
            sys.executable,
            ["-m", "trio_agents._cli", "chat", "--auto", "--store", str(store), *resume],
            cwd=str(tmp_path),
            env=env,
            encoding="utf-8",
            timeout=30,
            dimensions=(40, 200),
        )
        try:
            child.expect(r"session ([0-9a-f-]{36}) \(resume with")
            match = child.match
            assert isinstance(match, re.Match)
            session_id = str(match.group(1))
            child.expect("Ctrl-D quits.\r\n> ")
            prompt = f"!echo chat {kill}" if kill % 2 else f"chat {kill}"
            child.sendline(prompt)
            child.expect(r"\r\n> ")  # the next prompt: the turn is over, and stored
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        found = turn_of(stored_records(store, session_id), prompt)
        if found != expected_turn(prompt):
            problems.append(f"kill {kill}: {prompt!r} prompted after, on disk: {found}")
            if found is None:
                session_id = ""  # perhaps not stored at all: the next kill starts anew
    assert problems == [], f"{len(problems)} of {CHAT_KILLS} turns not on disk: {problems}"
