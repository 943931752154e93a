"""The main job's chat machine: the built-in runtime's `trio-agents chat`, driven over pipes
as a person types (D466)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ._lanes import OUTPUT, installed, progress, say

__all__ = ["BUILTIN_CHAT", "run_builtin_chat"]

BUILTIN_CHAT = "chat"


def run_builtin_chat(
    prog: str,
    profile: str | None,
    max_examples: int | None,
    seed: int,
    print_report: Callable[[Any], None],
    interrupted: Callable[[], bool] | None = None,
) -> Any:
    """Run the chat machine on `trio-agents chat` (this install's); its report, printed
    with `print_report`. None, after one line saying why, when there is no such command."""
    from .._chat._machine import ChatTarget  # Hypothesis, only when run
    from .._chat._properties import PROPERTIES  # (Hypothesis, too)
    from .._chat._run import run_chat_conformance  # (Hypothesis, too)

    found = installed("trio-agents")
    if found is None:
        say("  chat machine: not run: no trio-agents command here to start")
        return None
    report = run_chat_conformance(
        ChatTarget((found, "chat")),
        profile_name=profile,
        max_examples=max_examples,
        seed=seed,
        progress=progress,
        interrupted=interrupted,
    )
    report = dataclasses.replace(report, checked=PROPERTIES)
    with OUTPUT:  # one block, between the other lanes' (D417)
        print_report(report)
    return report
