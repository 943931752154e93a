"""Asking in the terminal before a command runs (`trio-agents chat`).

    the agent's approval gate ──► TerminalApprover ──► the call, then `Run it? [y/a/n]`
                                        ▲                       │
    Ctrl-C (Chat.interrupt) ── cancel ──┘       the next line ◄─┘ (the chat's one reader)

The chat's policy is an ACP session's (`ModePolicy`, D374): in mode `ask` (the default) it
asks before every `bash` call and every call of an MCP server's tool (`--mcp FILE`), in
mode `auto` (`--auto`, or `/mode auto` in the chat) never, and in mode `read-only` it
rejects them without asking; `bash_output` and `bash_kill` only read or stop what a command
already started, so they are never asked. An MCP tool may do anything its server does, and
the chat cannot tell a read from a write: it asks like bash.
The question takes the next line of the terminal: the chat does not read prompts while a
turn runs, and the terminal hands each line to one reader, so the answer is never taken
for a prompt, nor a prompt for an answer. Calls of one step are asked one at a time, in the
order the model made them. Every answer is recorded (`tool/approval`) with `by="terminal"`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Final

import trio

from .._agent._approval import ApprovalRequest, Decision, DecisionOutcome
from .._store._records import TOOL_CALL, TOOL_RESULT, Record
from ._terminal import Terminal

__all__ = [
    "ACCEPTED",
    "QUESTION",
    "TerminalApprover",
    "parse_answer",
]

BY: Final = "terminal"
QUESTION: Final = "Run it? [y]es once / [a]lways (this session) / [n]o "
ACCEPTED: Final = (
    "answer y (run it this once), a (run it, and every later call of this tool in this "
    "session without asking) or n (do not run it)"
)
_ANSWERS: Final[Mapping[str, DecisionOutcome]] = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_always",
    "always": "allow_always",
    "n": "reject_once",
    "no": "reject_once",
}


def parse_answer(line: str) -> DecisionOutcome | None:
    """The decision a typed line means (`y`, `a`, `n`, or the words, in any case), or None."""
    return _ANSWERS.get(line.strip().lower())


class TerminalApprover:
    """Asks the person at the terminal, one call at a time, in the order the calls were made.

    `show(request)` is the text printed before the question (the call, made readable).
    `seen(record)` must be given every record of the session as it is made: it is how the
    approver knows the order of the calls. `interrupt()` is what Ctrl-C does while a question
    is open: the answer is `cancel`, which ends the turn."""

    def __init__(self, terminal: Terminal, show: Callable[[ApprovalRequest], str]) -> None:
        self._terminal = terminal
        self._show = show
        self._made = itertools.count()
        self._order: dict[str, int] = {}  # call id -> when the model made it, until answered
        self._arrivals = itertools.count()
        self._waiting: set[tuple[float, int]] = set()
        self._changed = trio.Event()
        self._busy = False
        self._asking: trio.CancelScope | None = None

    def seen(self, record: Record) -> None:
        """Note a record of the session (synchronous; from the session's observer)."""
        if record.type == TOOL_CALL:
            self._order[str(record.data.get("call_id"))] = next(self._made)
        elif record.type == TOOL_RESULT:
            self._order.pop(str(record.data.get("call_id")), None)

    @property
    def asking(self) -> bool:
        """Whether a question is on the screen, waiting for its answer."""
        return self._asking is not None

    def interrupt(self) -> bool:
        """Answer the open question with `cancel` (Ctrl-C). False when none is open."""
        if self._asking is None:
            return False
        self._asking.cancel(reason="Ctrl-C")
        return True

    async def __call__(self, request: ApprovalRequest) -> Decision:
        """Ask about `request` once the calls made before it were answered, and wait for
        the answer. Always a checkpoint; a cancel while waiting propagates."""
        key = (float(self._order.get(request.call_id, float("inf"))), next(self._arrivals))
        self._waiting.add(key)
        try:
            # The calls of one step reach the approver in one scheduling pass (the agent
            # starts them together and nothing before this awaits): after one checkpoint
            # all of them are waiting, and the earliest is asked first.
            await trio.lowlevel.checkpoint()
            while self._busy or min(self._waiting) != key:
                await self._changed.wait()
            # An earlier call's answer may have cancelled the turn (`cancel`) just as it
            # woke this one: then it is not asked (the wake-up beat the cancel).
            await trio.lowlevel.checkpoint_if_cancelled()
            self._busy = True
            try:
                return await self._ask(request)
            finally:
                self._busy = False
        finally:
            self._waiting.discard(key)
            self._changed.set()
            self._changed = trio.Event()

    async def _ask(self, request: ApprovalRequest) -> Decision:
        write = self._terminal.write
        write(self._show(request) + QUESTION)
        decision: Decision | None = None
        with trio.CancelScope() as scope:
            self._asking = scope
            try:
                decision = await self._answer()
            finally:
                self._asking = None
        # A Ctrl-C wins even over an answer read in the same instant.
        if scope.cancel_called or decision is None:
            write("\n")  # the answer was not finished: the next line starts afresh
            return Decision("cancel", by=BY, note="Ctrl-C while asked")
        return decision

    async def _answer(self) -> Decision:
        while True:
            line = await self._terminal.readline()
            if line is None:
                self._terminal.write("\n")  # Ctrl-D echoes no newline
                return Decision("reject_once", by=BY, note="end of input")
            outcome = parse_answer(line)
            if outcome is not None:
                return Decision(outcome, by=BY)
            self._terminal.write(f"{ACCEPTED}\n{QUESTION}")
