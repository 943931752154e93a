"""The chat machine's named properties, rule by rule (rules C1-C4 of docs/contract.md's
"Command line" section, and L10 for the chat). Pure: no trio."""

from __future__ import annotations

from .._properties import Property

__all__ = [
    "ALWAYS_HOLDS",
    "ANSWER_RECORDED",
    "ASKS_FIRST",
    "EXIT_STATUS",
    "INTERRUPT_WHILE_ASKED",
    "MODES_APPLY",
    "PROPERTIES",
    "SIGNAL_TEARDOWN",
    "SYSTEM_PROMPT_SENT",
]

_M = "chat"

ASKS_FIRST = Property(
    "C1",
    "chat-asks-first",
    _M,
    "in mode ask, a bash call is shown and asked before it runs: y and a run it, n does not "
    "and the turn goes on, any other line asks again",
)
ANSWER_RECORDED = Property(
    "C1",
    "chat-answer-recorded",
    _M,
    'each answer typed is one tool/approval record, by "terminal", with its decision '
    "(allow_once, allow_always, reject_once, cancel); mode auto records none",
)
ALWAYS_HOLDS = Property(
    "C1",
    "chat-always-holds",
    _M,
    "after a, later bash calls of the session run without asking, in a resumed chat too",
)
INTERRUPT_WHILE_ASKED = Property(
    "C2",
    "chat-asked-interrupted",
    _M,
    "Ctrl-C while asked answers cancel: the call does not run, the turn ends aborted "
    '("approval cancelled", cause user) and the prompt comes back; end of input while asked '
    'answers reject_once (note "end of input"), the turn ends as the model ends it and the '
    "chat exits 0",
)
MODES_APPLY = Property(
    "C3",
    "chat-modes",
    _M,
    "/mode auto runs bash calls without asking, /mode read-only rejects them without asking "
    '(a decision by "policy"), /mode ask asks again; --auto starts in mode auto',
)
SYSTEM_PROMPT_SENT = Property(
    "C4",
    "chat-system-prompt",
    _M,
    "the chat sends the default coding system prompt, or the --system-prompt text in its "
    "place, or none for --system-prompt ''",
)
EXIT_STATUS = Property(
    "C5",
    "chat-exit-status",
    _M,
    "the chat exits 0 at the end of its input and 130 on Ctrl-C at the prompt; each turn it "
    "ran is in the store, and a resumed chat goes on with the session",
)
SIGNAL_TEARDOWN = Property(
    "L10",
    "chat-sigterm",
    _M,
    "SIGTERM while a command runs: the chat exits 143, the turn ends closed in the store, "
    "and no process of the command is left",
)

PROPERTIES: tuple[Property, ...] = (
    ASKS_FIRST,
    ANSWER_RECORDED,
    ALWAYS_HOLDS,
    INTERRUPT_WHILE_ASKED,
    MODES_APPLY,
    SYSTEM_PROMPT_SENT,
    EXIT_STATUS,
    SIGNAL_TEARDOWN,
)
"""Every property of the chat machine."""
