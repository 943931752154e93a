"""The chat machine: a Hypothesis state machine that drives a chat command (`trio-agents
chat`) over pipes, as a person types, and checks rules C1-C5 of docs/contract.md's "Command
line" section and L10.

One example is one session in a store of its own, over one or more runs of the chat: a run
ends at the end of its input, on Ctrl-C at the prompt or on SIGTERM, and the next one
resumes the session. Its model is the scripted endpoint of the ACP machine: each prompt
carries a token, and the script says whether the model calls `bash` (a command that writes
a witness file, so the machine sees whether it ran) before its reply. Each run's options
are drawn (`--auto`, `--system-prompt`); the questions are answered as drawn (y, a, n,
another line, Ctrl-C, end of input); `/mode` switches. When a run ends, its turns are read
from the store: the answers recorded, and how each turn ended.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import AsyncGenerator, Callable, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, cast, get_args

import trio
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import SqliteStore
from trio_agents.testing import TrioHost, WallClock

from .._acp._endpoint import API_KEY, MODEL, Say, ScriptedEndpoint, Shell, open_endpoint
from .._machine import ConformanceMachine, rule
from .._properties import ContractViolation, Property
from ._process import ChatProcess
from ._properties import (
    ALWAYS_HOLDS,
    ANSWER_RECORDED,
    ASKS_FIRST,
    EXIT_STATUS,
    INTERRUPT_WHILE_ASKED,
    MODES_APPLY,
    SIGNAL_TEARDOWN,
    SYSTEM_PROMPT_SENT,
)

__all__ = ["ChatMachine", "ChatTarget", "chat_machine"]

QUESTION = "Run it? [y]es once / [a]lways (this session) / [n]o "
PROMPT = "\n> "
KEYS = "Ctrl-D quits.\n"  # the end of the opening, before the first prompt
WAIT = 30.0  # real seconds a step may take (a loaded machine, a sandbox to start)
SESSION = re.compile(r"session (\S+) \(resume with")
Mode = Literal["ask", "auto", "read-only"]
Answer = Literal["y", "a", "n", "other", "ctrl-c", "eof"]
ANSWERS: tuple[Answer, ...] = get_args(Answer)
SystemChoice = Literal["default", "text", "none"]
DECISIONS: dict[str, str] = {"y": "allow_once", "a": "allow_always", "n": "reject_once"}


@dataclass(frozen=True)
class ChatTarget:
    """The chat command: `argv` (`trio-agents chat`, or a variant), to which the machine
    adds `--model openai`, `--store`, `--session` and the options it draws."""

    argv: tuple[str, ...]


@dataclass
class _Turn:
    """What the machine expects of one prompt's turn in the store."""

    token: str
    decisions: list[tuple[str, str, str | None]] = field(
        default_factory=list[tuple[str, str, str | None]]
    )
    """(decision, by, note) of each tool/approval record, in order (None: not compared)."""
    checked_decisions: bool = True
    end: dict[str, Any] = field(default_factory=lambda: {"kind": "completed"})
    end_property: Property = EXIT_STATUS
    """The property its turn/end's reason belongs to."""


class ChatMachine(ConformanceMachine):
    """Checks the chat command `target` names; `chat_machine(target)` makes the class."""

    target: ClassVar[ChatTarget]

    def __init__(self) -> None:
        super().__init__(TrioHost(WallClock(), call_timeout=WAIT * 4, stall_timeout=WAIT * 4))
        self.dir = Path(tempfile.mkdtemp(prefix="trio-agents-chat-"))
        self.work = self.dir / "work"
        self.work.mkdir()
        self.store = self.dir / "sessions.db"
        self.endpoint: ScriptedEndpoint = self._start_service(self._open_world)
        self.tokens = itertools.count(1)
        self.chat: ChatProcess | None = None
        self.cursor = 0
        self.session_id: str | None = None
        self.turns: list[_Turn] = []  # every turn of the session, in order
        self.mode: Mode = "ask"
        self.remembered = False
        self.system: tuple[SystemChoice, str] = ("default", "")
        self.acted = False  # this run has had a prompt or a /mode: it may end
        self.log: list[str] = []

    @asynccontextmanager
    async def _open_world(self) -> AsyncGenerator[ScriptedEndpoint, None]:
        async with open_endpoint() as endpoint, trio.open_nursery() as nursery:
            self._nursery = nursery
            yield endpoint
            nursery.cancel_scope.cancel()

    # -- one run of the chat ---------------------------------------------------------------

    @precondition(lambda self: self.chat is None)
    @rule(auto=st.booleans(), system=st.sampled_from(("default", "text", "none")))
    def start(self, auto: bool, system: SystemChoice) -> None:
        """Start the chat (resuming the session once it has a turn), `--auto` or not, with
        the default system prompt, one of its own, or none."""
        argv = [*type(self).target.argv, "--model", "openai", "--store", str(self.store)]
        argv.append("--allow-unsandboxed")  # confined where bubblewrap is there
        resuming = bool(self.turns) and self.session_id is not None
        if resuming:
            assert self.session_id is not None
            argv += ["--session", self.session_id]
        if auto:
            argv.append("--auto")
        text = f"You are checked. system-mark-{next(self.tokens)}"
        if system != "default":
            argv += ["--system-prompt", text if system == "text" else ""]
        self.system = (system, text)
        env = dict(os.environ)
        env.update(
            OPENAI_BASE_URL=self.endpoint.base_url, OPENAI_API_KEY=API_KEY, OPENAI_MODEL=MODEL
        )
        chat = self.chat = ChatProcess(argv, env, self.work)
        self.cursor = 0
        self.acted = False
        self.host.call(self._nursery.start, chat.run)
        # A new run starts in its own mode; an `a` of the session still holds (C1).
        self.mode = "auto" if auto else "ask"
        self._expect(KEYS, EXIT_STATUS, "the line of keys before the chat's first prompt")
        found = self._expect("> ", EXIT_STATUS, "the chat's first prompt")
        shown = SESSION.search(chat.output[:found])
        EXIT_STATUS.check(
            shown is not None and (not resuming or shown.group(1) == self.session_id),
            lambda: f"the chat's opening named no session or another one: {chat.output[:found]!r}",
        )
        assert shown is not None
        self.session_id = shown.group(1)
        mode_line = f"mode {self.mode}:"
        MODES_APPLY.check(
            mode_line in chat.output[:found],
            lambda: (
                f"the chat started with {argv[-1]!r} did not say {mode_line!r}: "
                f"{chat.output[:found]!r}"
            ),
        )
        self.log.append(f"start-{auto}-{system}")

    def _expect_first(self, texts: Sequence[str], prop: Property, what: str) -> int:
        """Wait for the first of `texts` to appear after the cursor; its index. Moves the
        cursor past it."""
        chat = self.chat
        assert chat is not None
        found = self.host.call(chat.expect_any, texts, self.cursor, WAIT)
        if found is None:
            self._expect(texts[0], prop, what)  # fails, saying what came instead
        assert found is not None
        index, self.cursor = found
        return index

    def _expect(self, text: str, prop: Property, what: str) -> int:
        """Wait for `text` after the cursor; move the cursor past it. Fails `prop` naming
        `what` if it does not come."""
        chat = self.chat
        assert chat is not None
        found = self.host.call(chat.expect, text, self.cursor, WAIT)
        if found is None:
            ended = (
                f"exited with status {chat.returncode}"
                if chat.exited
                else f"said nothing more in {WAIT:g} s"
            )
            since = chat.output[self.cursor :][-600:]
            prop.fail(
                f"waiting for {what} ({text!r}), the chat {ended}; its output since: "
                f"{since!r}; stderr: {chat.stderr[-400:]!r}"
            )
        assert found is not None
        self.cursor = found
        return found

    # -- prompts --------------------------------------------------------------------------

    @precondition(lambda self: self.chat is not None)
    # A command twice as often as none, and `a` twice as often as each other answer: the
    # chat's rules are about commands, and an `a` shows only in later calls, resumed ones.
    @rule(tool=st.sampled_from((True, True, False)), answer=st.sampled_from((*ANSWERS, "a")))
    def prompt(self, tool: bool, answer: Answer) -> None:
        """A prompt whose model calls bash (a command writing a witness file) when `tool`,
        then replies; a question is answered `answer`."""
        chat = self.chat
        assert chat is not None
        token = f"acp-check-{next(self.tokens)}"
        witness = self.work / f"ran-{token}"
        reply = f"reply {token} done"
        self.endpoint.scripts[token] = (
            (Shell(f"touch {witness}"), Say(reply)) if tool else (Say(reply),)
        )
        shown_from = len(self.endpoint.bodies)
        turn = _Turn(token)
        self.turns.append(turn)
        self.host.call(chat.type, f"{token}: go")
        self.acted = True
        asked = tool and self.mode == "ask" and not self.remembered
        if not asked:
            unasked = ALWAYS_HOLDS if self.remembered and self.mode == "ask" else MODES_APPLY
            if self._expect_first((reply, QUESTION), unasked, f"the reply to {token}") != 0:
                unasked.fail(
                    f"{token}'s command was asked about in mode {self.mode}"
                    + (" after an `a` of this session" if self.remembered else "")
                )
            self._expect(PROMPT, EXIT_STATUS, "the prompt after the turn")
            ran = witness.exists()
            if tool and self.mode == "read-only":
                MODES_APPLY.check(not ran, lambda: f"in mode read-only, {token}'s command ran")
                turn.decisions = [("reject_once", "policy", None)]
            elif tool:
                prop = ALWAYS_HOLDS if self.remembered and self.mode == "ask" else MODES_APPLY
                prop.check(
                    ran,
                    lambda: (
                        f"{token}'s command did not run, in mode {self.mode}"
                        + (" after an `a`" if self.remembered else "")
                    ),
                )
                # A remembered answer is not asked again; whether it is recorded again is
                # not the chat's to say (A17).
                turn.checked_decisions = self.mode == "auto" and not self.remembered
            self._check_system(token, shown_from)
            self.log.append(f"prompt-{tool}")
            return
        self._expect(QUESTION, ASKS_FIRST, f"the question before {token}'s command")
        ASKS_FIRST.check(
            not witness.exists(), lambda: f"{token}'s command ran before its question was answered"
        )
        self._answer(turn, token, witness, reply, answer)
        self._check_system(token, shown_from)
        self.log.append(f"prompt-asked-{answer}")

    def _answer(self, turn: _Turn, token: str, witness: Path, reply: str, answer: Answer) -> None:
        chat = self.chat
        assert chat is not None
        if answer == "other":
            self.host.call(chat.type, "perhaps")
            again = "the question again, after another line"
            if self._expect_first((QUESTION, PROMPT), ASKS_FIRST, again) != 0:
                ASKS_FIRST.fail(
                    f"after the line 'perhaps' to {token}'s question, the turn "
                    f"went on without asking again: {chat.output[-400:]!r}"
                )
            answer = "y"
        if answer in ("y", "a", "n"):
            self.host.call(chat.type, answer)
            self._expect(reply, ASKS_FIRST, f"the reply to {token} after {answer!r}")
            self._expect(PROMPT, EXIT_STATUS, "the prompt after the turn")
            ran = witness.exists()
            ASKS_FIRST.check(
                ran == (answer != "n"),
                lambda: f"{token}'s command {'ran' if ran else 'did not run'} after {answer!r}",
            )
            turn.decisions = [(DECISIONS[answer], "terminal", None)]
            self.remembered = self.remembered or answer == "a"
        elif answer == "ctrl-c":
            chat.send_signal(signal.SIGINT)
            self._expect(PROMPT, INTERRUPT_WHILE_ASKED, "the prompt after Ctrl-C while asked")
            INTERRUPT_WHILE_ASKED.check(
                not witness.exists(), lambda: f"{token}'s command ran after Ctrl-C while asked"
            )
            turn.decisions = [("cancel", "terminal", None)]
            turn.end = {"kind": "aborted", "reason": "approval cancelled", "cause": "user"}
            turn.end_property = INTERRUPT_WHILE_ASKED
        else:  # end of input while asked
            self.host.call(chat.end_input)
            status = self.host.call(chat.wait_exit, WAIT)
            INTERRUPT_WHILE_ASKED.check(
                status == 0,
                lambda: (
                    f"end of input while asked: the chat exited {status} (stderr "
                    f"{chat.stderr[-300:]!r})"
                ),
            )
            INTERRUPT_WHILE_ASKED.check(
                not witness.exists(), lambda: f"{token}'s command ran after end of input"
            )
            turn.decisions = [("reject_once", "terminal", "end of input")]
            self._ended(INTERRUPT_WHILE_ASKED)

    def _check_system(self, token: str, shown_from: int) -> None:
        choice, text = self.system
        for body in self.endpoint.bodies[shown_from:]:
            if token not in body:
                continue
            system = _system_text(body)
            if choice == "none":
                sent = system is None
            elif choice == "text":
                sent = system == text
            else:
                sent = bool(system) and "system-mark-" not in (system or "")
            if not sent:
                shown = None if system is None else system[:200]
                SYSTEM_PROMPT_SENT.fail(
                    f"with --system-prompt {choice}, {token}'s model request had the system "
                    f"prompt {shown!r}"
                )

    # -- modes, leaving, signals -------------------------------------------------------------

    @precondition(lambda self: self.chat is not None)
    @rule(mode=st.sampled_from(("ask", "auto", "read-only")))
    def switch_mode(self, mode: Mode) -> None:
        """/mode MODE: the chat says the mode it is now in."""
        chat = self.chat
        assert chat is not None
        self.host.call(chat.type, f"/mode {mode}")
        self.acted = True
        self._expect(f"mode {mode}:", MODES_APPLY, f"the line saying mode {mode}")
        self._expect(PROMPT, MODES_APPLY, "the prompt after /mode")
        self.mode = mode
        self.log.append(f"mode-{mode}")

    @precondition(lambda self: self.chat is not None and self.acted)
    @rule(how=st.sampled_from(("end-of-input", "ctrl-c", "sigterm")))
    def leave(self, how: Literal["end-of-input", "ctrl-c", "sigterm"]) -> None:
        """Leave the chat: end of input (exit 0), Ctrl-C at the prompt (exit 130), or
        SIGTERM while a command runs (L10: exit 143; in mode read-only, at the prompt)."""
        chat = self.chat
        assert chat is not None
        if how == "sigterm":
            self._terminate(chat)
            return
        if how == "ctrl-c":
            chat.send_signal(signal.SIGINT)
        else:
            self.host.call(chat.end_input)
        status = self.host.call(chat.wait_exit, WAIT)
        expected = 130 if how == "ctrl-c" else 0
        EXIT_STATUS.check(
            status == expected,
            lambda: (
                f"{how} at the prompt: the chat exited {status}, expected {expected} "
                f"(stderr {chat.stderr[-300:]!r})"
            ),
        )
        self._ended(EXIT_STATUS)
        self.log.append(f"leave-{how}")

    def _terminate(self, chat: ChatProcess) -> None:
        witness: Path | None = None
        if self.mode != "read-only":
            token = f"acp-check-{next(self.tokens)}"
            witness = self.work / f"ran-{token}"
            self.endpoint.scripts[token] = (Shell(f"touch {witness}; sleep 60"), Say("never"))
            turn = _Turn(token, end={"kind": "closed"}, end_property=SIGNAL_TEARDOWN)
            self.turns.append(turn)
            self.host.call(chat.type, f"{token}: go")
            if self.mode == "ask" and not self.remembered:
                self._expect(QUESTION, ASKS_FIRST, f"the question before {token}'s command")
                self.host.call(chat.type, "y")
                turn.decisions = [("allow_once", "terminal", None)]
            else:
                turn.checked_decisions = False
            self.host.call(_until_exists, witness, chat)
            SIGNAL_TEARDOWN.check(witness.exists(), lambda: f"{token}'s command never started")
        chat.snapshot()
        chat.send_signal(signal.SIGTERM)
        status = self.host.call(chat.wait_exit, WAIT)
        where = "while a command ran" if witness is not None else "at the prompt"
        SIGNAL_TEARDOWN.check(
            status == 143,
            lambda: f"SIGTERM {where}: the chat exited {status} (stderr {chat.stderr[-300:]!r})",
        )
        left = self.host.call(_left_after, chat)
        SIGNAL_TEARDOWN.check(
            not left,
            lambda: (
                "processes outlived the chat: "
                + "; ".join(f"pid {p.pid}: {p.command[:100]}" for p in left)
            ),
        )
        self._ended(SIGNAL_TEARDOWN)
        self.log.append("leave-sigterm")

    # -- what the store holds ------------------------------------------------------------------

    def _ended(self, prop: Property) -> None:
        """The run has exited: its turns must be in the store as expected."""
        self.chat = None
        if not self.turns or self.session_id is None:
            return
        records = self.host.call(_records, self.store, self.session_id)
        found = _turns_of(records)
        for turn in self.turns:
            got = found.get(turn.token)
            if got is None:
                prop.fail(f"the store holds no turn of prompt {turn.token} after the chat exited")
            assert got is not None
            decisions, end = got
            want = turn.end
            if not all(end.get(k) == v for k, v in want.items()):
                turn.end_property.fail(
                    f"prompt {turn.token}: its turn/end is {end}, expected {want}"
                )
            if turn.checked_decisions:
                shown = [
                    (d, b, n) if note is not None else (d, b, None)
                    for (d, b, n), (_, _, note) in zip(decisions, turn.decisions, strict=False)
                ]
                if len(decisions) != len(turn.decisions) or shown != turn.decisions:
                    ANSWER_RECORDED.fail(
                        f"prompt {turn.token}: the store's tool/approval records are "
                        f"{decisions}, expected {turn.decisions}"
                    )

    # -- the machine's frame ---------------------------------------------------------------

    def _verify(self) -> None:
        """Nothing between steps: the chat is a process seen only through what it writes
        and stores, so each rule checks what it made happen before it returns."""

    def _history(self) -> Hashable | None:
        return tuple(self.log) or None

    def _check_closing(self) -> None:
        if self.chat is not None:
            self.leave("end-of-input")
        self._stop_service()

    def _after_close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


async def _until_exists(path: Path, chat: ChatProcess) -> None:
    # A file a real process writes: no event to wait for.
    witness = trio.Path(path)
    with trio.move_on_after(WAIT):
        while not await witness.exists() and not chat.exited:  # noqa: ASYNC110
            await trio.sleep(0.02)


async def _left_after(chat: ChatProcess) -> list[Any]:
    """The processes of the chat's commands still alive, once those it killed as it exited
    have had a moment to die (a loaded machine is slow to reap them)."""
    with trio.move_on_after(2.0):
        while chat.left_behind():  # noqa: ASYNC110 - no event for a stranger's exit
            await trio.sleep(0.02)
    return chat.left_behind()


async def _records(store_path: Path, session_id: str) -> list[Any]:
    store = SqliteStore(store_path)
    async with store.running():
        stored = await store.load(session_id)
    return list(stored.records)


Decided = tuple[str, str, str | None]  # (decision, by, note) of a tool/approval


def _turns_of(records: Sequence[Any]) -> dict[str, tuple[list[Decided], dict[str, Any]]]:
    """By prompt token: the (decision, by, note) of each tool/approval of its turn, and its
    turn/end reason."""
    found: dict[str, tuple[list[Decided], dict[str, Any]]] = {}
    current: str | None = None
    for record in records:
        data: Mapping[str, Any] = record.data
        if record.type == "user/message":
            match = re.search(r"acp-check-[0-9]+", str(data.get("content", "")))
            current = match.group(0) if match else None
            if current is not None:
                found[current] = ([], {})
        elif current is not None and record.type == "tool/approval":
            note = data.get("note")
            kept = note if isinstance(note, str) else None
            found[current][0].append((str(data.get("decision")), str(data.get("by")), kept))
        elif current is not None and record.type == "turn/end":
            reason: object = data.get("reason")
            ended = dict(cast("Mapping[str, Any]", reason)) if isinstance(reason, Mapping) else {}
            found[current] = (found[current][0], ended)
    return found


def _system_text(body: str) -> str | None:
    """The system message of a chat-completions request body, None if it has none."""
    request: dict[str, Any] = json.loads(body)
    messages: list[Any] = request.get("messages") or []
    for message in messages:
        if isinstance(message, dict):
            entry = cast("dict[str, Any]", message)
            if entry.get("role") == "system":
                content = entry.get("content")
                return content if isinstance(content, str) else json.dumps(content)
    return None


def chat_machine(target: ChatTarget) -> type[ChatMachine]:
    """A fresh `ChatMachine` subclass checking `target`, with its own counters."""
    namespace: dict[str, Any] = {
        "target": target,
        "stats": {"examples": 0, "checks": 0},
        "histories": set[int](),
        "violations": list[ContractViolation](),
        "latest": list[tuple[float, ContractViolation]](),
    }
    machine: Callable[..., Any] = type("ChatMachine", (ChatMachine,), namespace)
    return machine  # type: ignore[return-value]
