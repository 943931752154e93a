"""Run the ACP machine against one agent command and report as the other machines do: the
examples, checked steps, distinct histories, seed, and the shrunk program of a failure."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase
from hypothesis import settings as Settings
from hypothesis.stateful import run_state_machine_as_test

from .._conformance import MachineReport, found_in
from .._profiles import profile
from .._seed import forcing_seed
from ._client import AcpTarget
from ._machine import AcpMachine, acp_machine

__all__ = ["AcpRun", "acp_settings", "preflight", "reproduction", "run_acp_conformance"]


def acp_settings(base: Settings) -> Settings:
    """Every example starts an agent process: a fifteenth of the examples of `base` (20 for
    the `ci` profile), a third of its steps."""
    return Settings(
        base,
        max_examples=max(5, base.max_examples // 15),
        stateful_step_count=max(5, base.stateful_step_count // 3),
    )


def preflight(target: AcpTarget) -> tuple[type[AcpMachine], BaseException | None]:
    """One example of one step: the agent starts, answers `initialize` and `session/new`,
    and exits at the end of its input. A failure here is reported as is (no search could
    shrink it, and each example of a search would wait for the same timeout)."""
    machine = acp_machine(target)
    try:
        state = machine()
    except Exception as exc:
        return machine, exc
    try:
        state.check()
        state.new_session()  # an agent that needs configuring says so here, once
        state.check()
    except Exception as exc:
        state.teardown()
        return machine, exc
    try:
        state.teardown()
    except Exception as exc:
        return machine, exc
    return machine, None


@dataclass(frozen=True)
class AcpRun:
    """What one ACP run found: the machine's report, what the agent advertised (`agentInfo`,
    `loadSession`), and how often each kind of cancel landed where it was aimed (an agent
    without a shell tool never runs one, so its mid-tool cancels land elsewhere), and how
    many permission requests each kind of answer met (an agent that never asks: none)."""

    report: MachineReport
    advertised: Mapping[str, Any]
    landed: Mapping[str, int]
    asked: Mapping[str, int] = field(default_factory=dict[str, int])


def run_acp_conformance(
    target: AcpTarget,
    *,
    profile_name: str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    shrink: bool = True,
    progress: Callable[[str, int, float], object] | None = None,
    interrupted: Callable[[], bool] | None = None,
) -> AcpRun:
    """Run the ACP machine against `target`. Once `interrupted()` is true, the run stops
    with KeyboardInterrupt before its next example (the command line's first Ctrl-C)."""
    chosen_seed = seed if seed is not None else random.randrange(2**32)
    started = time.monotonic()
    probe, failure = preflight(target)
    if failure is not None:
        report = MachineReport(
            "acp", 1, 0, 0, time.monotonic() - started, chosen_seed, failure, None
        )
        return AcpRun(report, probe.advertised, {})
    budget = acp_settings(
        Settings(profile(profile_name), database=None, report_multiple_bugs=False)
    )
    if max_examples is not None:
        budget = Settings(budget, max_examples=max_examples)
    if not shrink:
        budget = Settings(budget, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    machine = acp_machine(target)
    if progress is not None or interrupted is not None:
        _report_progress(machine, progress, started, interrupted)
    failure = None
    try:
        with forcing_seed(chosen_seed):
            run_state_machine_as_test(machine, settings=budget)
    except Exception as exc:
        # A violation Hypothesis could not replay is reported as that violation (D392).
        failure = found_in(exc, machine.violations)
    stats = machine.stats
    program = reproduction(target, failure) if failure is not None else None
    report = MachineReport(
        "acp",
        stats["examples"],
        stats["checks"],
        len(machine.histories),
        time.monotonic() - started,
        chosen_seed,
        failure,
        program,
    )
    landed = {k.removeprefix("landed "): v for k, v in stats.items() if k.startswith("landed ")}
    asked = {k.removeprefix("asked "): v for k, v in stats.items() if k.startswith("asked ")}
    return AcpRun(report, machine.advertised, landed, asked)


def _report_progress(
    machine: type[AcpMachine],
    progress: Callable[[str, int, float], object] | None,
    started: float,
    interrupted: Callable[[], bool] | None,
) -> None:
    last = [started]
    original = machine.__init__

    def __init__(self: AcpMachine) -> None:
        if interrupted is not None and interrupted():
            raise KeyboardInterrupt  # before the example starts anything
        original(self)
        now = time.monotonic()
        if progress is not None and now - last[0] >= 5.0:
            last[0] = now
            progress("acp", machine.stats["examples"], now - started)

    machine.__init__ = __init__  # type: ignore[method-assign]


def reproduction(target: AcpTarget, failure: BaseException) -> str | None:
    """A Python script replaying the shrunk program against the same command, or None when
    Hypothesis attached none."""
    notes: list[str] = list(getattr(failure, "__notes__", []))
    steps: list[str] = []
    recording = False
    for line in notes:
        if line.startswith("state = "):
            recording = True
            continue
        if recording and line.startswith("state."):
            steps.append(line)
        elif recording:
            break
    body = [step for step in steps if step != "state.teardown()"]
    if not body:
        return None
    lines = [
        "# Replays the shrunk failing program of the ACP machine against the same command.",
        "from agent_conformance import AcpTarget, acp_machine",
        "",
        f"state = acp_machine({target!r})()",
        "try:",
        *(f"    {step}" for step in body),
        "finally:",
        "    state.teardown()",
    ]
    return "\n".join(lines) + "\n"
