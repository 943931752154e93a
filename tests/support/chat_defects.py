"""Seeded-defect chats: `python -m tests.support.chat_defects NAME ARGS...` runs
`trio-agents chat ARGS...` with one realistic mistake patched in. The chat machine must fail
on each with the property `DEFECTS` names (tests/test_chat_machine.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trio_agents._agent import _approval, _mode_policy
from trio_agents._agent._system_prompt import coding_system_prompt
from trio_agents._cli import _chat, _chat_approval, _signals


@dataclass(frozen=True)
class ChatSeeded:
    """A seeded defect of the chat machine: its name (the catalogue's), the property that
    must catch it, and other properties of the same rule it may trip first."""

    name: str
    property: str
    also: tuple[str, ...] = ()
    machine: str = "chat"


def _other_line_taken_as_no() -> None:
    parse = _chat_approval.parse_answer
    # Anything but yes or always is taken as a refusal, instead of being asked again.
    _chat_approval.parse_answer = lambda line: parse(line) or "reject_once"


def _answer_recorded_by_approver() -> None:
    # The generic approver's name, not the terminal's.
    _chat_approval.BY = "approver"  # type: ignore[misc]


def _always_forgotten_on_resume() -> None:
    # A resumed session starts with no "always" answers: they were kept in memory only.
    _approval.remembered_decisions = lambda records: {}


def _ctrl_c_answers_no() -> None:
    decision = _approval.Decision

    def made(outcome: Any, *, by: str, note: str | None = None) -> Any:
        # Ctrl-C while asked is taken as "no", and the turn goes on.
        return decision("reject_once" if outcome == "cancel" else outcome, by=by, note=note)

    _chat_approval.Decision = made  # type: ignore[attr-defined, assignment]


def _read_only_asks_unknown_tools() -> None:
    verdict = _mode_policy.ModePolicy.verdict

    def fail_open(self: Any, request: Any) -> Any:
        if self.mode == "read-only" and request.tool != "bash_output":
            return "ask"  # a tool it does not know is asked about, not rejected
        return verdict(self, request)

    _mode_policy.ModePolicy.verdict = fail_open  # type: ignore[method-assign]


def _system_text_added_to_default() -> None:
    run = _chat.run

    def added(args: Any) -> int:
        text = args.system_prompt
        if isinstance(text, str) and text:
            # The text is appended to the default prompt instead of replacing it.
            def prompt(cwd: str, tools: Any) -> str:
                return coding_system_prompt(cwd, tools) + "\n" + text

            args.system_prompt = prompt
        return run(args)

    _chat.run = added


def _interrupt_exits_zero() -> None:
    # A Ctrl-C at the prompt taken for a normal end.
    _chat.EXIT_INTERRUPTED = 0  # type: ignore[misc]


def _sigterm_status_unshifted() -> None:
    _signals.exit_status = lambda signum: signum  # 15, not 128 + 15


DEFECTS: dict[str, tuple[Callable[[], None], ChatSeeded]] = {
    "other-line-taken-as-no": (
        _other_line_taken_as_no,
        ChatSeeded("other-line-taken-as-no", "chat-asks-first"),
    ),
    "answer-recorded-by-approver": (
        _answer_recorded_by_approver,
        ChatSeeded("answer-recorded-by-approver", "chat-answer-recorded"),
    ),
    "always-forgotten-on-resume": (
        _always_forgotten_on_resume,
        ChatSeeded("always-forgotten-on-resume", "chat-always-holds"),
    ),
    "ctrl-c-while-asked-answers-no": (
        _ctrl_c_answers_no,
        ChatSeeded("ctrl-c-while-asked-answers-no", "chat-asked-interrupted"),
    ),
    "read-only-asks-unknown-tools": (
        _read_only_asks_unknown_tools,
        ChatSeeded("read-only-asks-unknown-tools", "chat-modes"),
    ),
    "system-text-added-to-default": (
        _system_text_added_to_default,
        ChatSeeded("system-text-added-to-default", "chat-system-prompt"),
    ),
    "interrupt-exits-zero": (
        _interrupt_exits_zero,
        ChatSeeded("interrupt-exits-zero", "chat-exit-status"),
    ),
    "sigterm-status-unshifted": (
        _sigterm_status_unshifted,
        ChatSeeded("sigterm-status-unshifted", "chat-sigterm"),
    ),
}

CHAT_SEEDED: tuple[ChatSeeded, ...] = tuple(seeded for _, seeded in DEFECTS.values())
"""Every seeded defect of the chat machine."""


def main() -> int:
    name = sys.argv[1]
    DEFECTS[name][0]()
    from trio_agents._cli import main as cli

    return cli(["chat", *sys.argv[2:]])


if __name__ == "__main__":
    sys.exit(main())
