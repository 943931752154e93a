"""Run the conformance machines and report what they did. Used by `trio-agents conformance`.

Every run has a seed (drawn when none is given) and uses no example database, so the seed
alone reproduces it. A failure is reported with the shrunk program Hypothesis found, turned
into a runnable Python script.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hypothesis.core
from hypothesis import settings as Settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from ._agent_machine import AgentFactory, AgentMachine
from ._lifecycle_machine import LifecycleMachine, RuntimeFactory
from ._machine import ConformanceMachine, machine_for
from ._profiles import profile
from ._shell_machine import ShellFactory, ShellMachine, shell_settings

__all__ = ["MachineReport", "reproduction", "run_conformance"]


@dataclass(frozen=True)
class MachineReport:
    """What one machine did: examples, checked steps, distinct histories it produced, the
    seed, and a failure with its shrunk program if any."""

    machine: str
    examples: int
    checks: int
    histories: int
    seconds: float
    seed: int
    failure: BaseException | None
    program: str | None

    @property
    def passed(self) -> bool:
        return self.failure is None


def run_conformance(
    factory: AgentFactory | None = None,
    *,
    runtime_factory: RuntimeFactory | None = None,
    shell_factory: ShellFactory | None = None,
    factory_spec: str | None = None,
    runtime_spec: str | None = None,
    shell_spec: str | None = None,
    profile_name: str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    progress: Callable[[str, int, float], object] | None = None,
    progress_every: float = 5.0,
) -> list[MachineReport]:
    """Run the agent machine against `factory`, the lifecycle machine against
    `runtime_factory` and the shell machine against `shell_factory` (each default: the
    built-in implementation). With none given all three run; otherwise only the machines
    whose target is given. `*_spec` are the `module:attr` names used in reproductions.
    `progress(machine, examples, seconds)` is called at most every `progress_every` seconds
    while a machine runs."""
    budget = Settings(profile(profile_name), database=None, report_multiple_bugs=False)
    if max_examples is not None:
        budget = Settings(budget, max_examples=max_examples)
    chosen_seed = seed if seed is not None else random.randrange(2**32)
    shell_budget = shell_settings(budget)
    if max_examples is not None:
        shell_budget = Settings(shell_budget, max_examples=max_examples)
    plan: list[
        tuple[str, type[ConformanceMachine], Callable[..., Any] | None, Settings, str | None]
    ] = [
        ("agent", AgentMachine, factory, budget, factory_spec),
        ("lifecycle", LifecycleMachine, runtime_factory, budget, runtime_spec),
        ("shell", ShellMachine, shell_factory, shell_budget, shell_spec),
    ]
    everything = factory is None and runtime_factory is None and shell_factory is None
    reports: list[MachineReport] = []
    for name, base, target, settings, spec in plan:
        if not everything and target is None:
            continue
        machine = machine_for(base, target)
        _report_progress(machine, name, progress, progress_every)
        reports.append(_run(name, machine, settings, chosen_seed, spec))
    return reports


def _report_progress(
    machine: type[RuleBasedStateMachine],
    name: str,
    progress: Callable[[str, int, float], object] | None,
    every: float,
) -> None:
    """Make `machine` call `progress` as examples start, at most every `every` seconds."""
    if progress is None:
        return
    started = time.monotonic()
    last = [started]
    original = machine.__init__

    def __init__(self: RuleBasedStateMachine) -> None:
        original(self)
        now = time.monotonic()
        if now - last[0] >= every:
            last[0] = now
            stats: dict[str, int] = getattr(machine, "stats", {})
            progress(name, stats.get("examples", 0), now - started)

    machine.__init__ = __init__  # type: ignore[method-assign]


def _run(
    name: str,
    machine: type[RuleBasedStateMachine],
    budget: Settings,
    seed: int,
    spec: str | None,
) -> MachineReport:
    def run() -> None:
        run_state_machine_as_test(machine, settings=budget)

    started = time.monotonic()
    failure: BaseException | None = None
    # run_state_machine_as_test builds its own @given test, which a seed() decorator on
    # `run` does not reach; force the seed the way Hypothesis's pytest plugin does for
    # --hypothesis-seed, for this run only.
    previous = hypothesis.core.global_force_seed
    hypothesis.core.global_force_seed = seed  # type: ignore[assignment]
    try:
        run()
    except Exception as exc:
        failure = exc
    finally:
        hypothesis.core.global_force_seed = previous
    elapsed = time.monotonic() - started
    stats: dict[str, int] = getattr(machine, "stats", {})
    histories: set[int] = getattr(machine, "histories", set())
    program = reproduction(name, failure, spec) if failure is not None else None
    return MachineReport(
        name,
        stats.get("examples", 0),
        stats.get("checks", 0),
        len(histories),
        elapsed,
        seed,
        failure,
        program,
    )


def reproduction(machine: str, failure: BaseException, spec: str | None) -> str | None:
    """A runnable script that replays the shrunk failing program, or None if Hypothesis
    attached none (the failure was not a rule violation)."""
    notes: list[str] = list(getattr(failure, "__notes__", []))
    steps: list[str] = []
    recording = False
    for line in notes:
        if line.startswith("state = "):
            recording = True
            continue
        if recording:
            if not line.startswith("state."):
                break
            steps.append(line)
    if not steps:
        return None
    base = {"agent": "AgentMachine", "lifecycle": "LifecycleMachine", "shell": "ShellMachine"}[
        machine
    ]
    lines = [
        f"# Replays the shrunk failing program of the {machine} machine; run it with python,",
        "# from any directory: the target is imported from the directory you run it in, else",
        "# from the one the conformance command ran in.",
        "import os",
        "import sys",
        "",
        f"sys.path[:0] = [os.getcwd(), {os.getcwd()!r}]",
        "",
        f"from trio_agents.testing import {base}  # noqa: E402",
    ]
    if machine == "agent":
        lines.append("from trio_agents.testing import RandomSeeder  # noqa: E402")
    if spec is not None:
        target_module, _, attr = spec.partition(":")
        lines += [
            f"from {target_module} import {attr} as target  # noqa: E402",
            "",
            "",
            f"class Machine({base}):",
            "    factory = staticmethod(target)",
            "",
            "",
            "state = Machine()",
        ]
    else:
        lines += ["", f"state = {base}()"]
    # teardown() closes the trio run even when a step raised, as the machine would.
    body = [step for step in steps if step != "state.teardown()"]
    lines += ["try:", *(f"    {step}" for step in body), "finally:", "    state.teardown()"]
    return "\n".join(lines) + "\n"
