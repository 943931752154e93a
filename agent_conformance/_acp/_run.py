"""Run the ACP machine against one agent command and report as the other machines do: the
examples, checked steps, distinct histories, seed, and the shrunk program of a failure."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings as Settings

from .._conformance import MachineReport, command_budget, first_failure, report_progress
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
    budget = command_budget(acp_settings, profile_name, max_examples, shrink)
    machine = acp_machine(target)
    if progress is not None or interrupted is not None:
        report_progress(machine, "acp", progress, 5.0, interrupted)
    failure = first_failure(machine, budget, chosen_seed)
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
