"""Run the chat machine against one chat command and report as the other machines do."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from hypothesis import Phase
from hypothesis import settings as Settings
from hypothesis.stateful import run_state_machine_as_test

from .._conformance import MachineReport, found_in
from .._profiles import profile
from .._seed import forcing_seed
from ._machine import ChatMachine, ChatTarget, chat_machine

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
    budget = chat_settings(
        Settings(profile(profile_name), database=None, report_multiple_bugs=False)
    )
    if max_examples is not None:
        budget = Settings(budget, max_examples=max_examples)
    if not shrink:
        budget = Settings(budget, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    machine = chat_machine(target)
    _watch(machine, progress, started, interrupted)
    failure = None
    try:
        with forcing_seed(chosen_seed):
            run_state_machine_as_test(machine, settings=budget)
    except Exception as exc:
        # A violation Hypothesis could not replay is reported as that violation (D392).
        failure = found_in(exc, machine.violations)
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


def _watch(
    machine: type[ChatMachine],
    progress: Callable[[str, int, float], object] | None,
    started: float,
    interrupted: Callable[[], bool] | None,
) -> None:
    last = [started]
    original = machine.__init__

    def __init__(self: ChatMachine) -> None:
        if interrupted is not None and interrupted():
            raise KeyboardInterrupt  # before the example starts anything
        original(self)
        now = time.monotonic()
        if progress is not None and now - last[0] >= 5.0:
            last[0] = now
            progress("chat", machine.stats["examples"], now - started)

    machine.__init__ = __init__  # type: ignore[method-assign]
