"""Run the chat machine against one chat command and report as the other machines do."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from hypothesis import settings as Settings

from .._conformance import MachineReport, command_budget, first_failure, report_progress
from ._machine import ChatTarget, chat_machine

__all__ = ["chat_settings", "run_chat_conformance"]


def chat_settings(base: Settings) -> Settings:
    """Every example starts a chat process, often several: a thirtieth of the examples of
    `base` (10 for the `ci` profile, which so stays within its 90 s on two cores), at
    least 15 steps (a question's answer, a resume and what follows need several)."""
    return Settings(
        base,
        max_examples=max(5, base.max_examples // 30),
        stateful_step_count=max(15, base.stateful_step_count // 2),
    )


def run_chat_conformance(
    target: ChatTarget,
    *,
    profile_name: str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    shrink: bool = True,
    progress: Callable[[str, int, float], object] | None = None,
    interrupted: Callable[[], bool] | None = None,
) -> MachineReport:
    """Run the chat machine against `target`. Once `interrupted()` is true, the run stops
    with KeyboardInterrupt before its next example (the command line's first Ctrl-C)."""
    chosen_seed = seed if seed is not None else random.randrange(2**32)
    started = time.monotonic()
    budget = command_budget(chat_settings, profile_name, max_examples, shrink)
    machine = chat_machine(target)
    report_progress(machine, "chat", progress, 5.0, interrupted)
    failure = first_failure(machine, budget, chosen_seed)
    stats = machine.stats
    return MachineReport(
        "chat",
        stats["examples"],
        stats["checks"],
        len(machine.histories),
        time.monotonic() - started,
        chosen_seed,
        failure,
        None,
    )
