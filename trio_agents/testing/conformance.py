"""Run the conformance machines and report what they did. Used by `trio-agents conformance`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from .agent_machine import AgentFactory, AgentMachine, builtin_agent_factory
from .lifecycle_machine import LifecycleMachine
from .profiles import profile

__all__ = ["MachineReport", "run_conformance"]


@dataclass(frozen=True)
class MachineReport:
    """What one machine did: its examples and checked steps, and a failure if any."""

    machine: str
    examples: int
    checks: int
    seconds: float
    failure: BaseException | None

    @property
    def passed(self) -> bool:
        return self.failure is None


def run_conformance(
    factory: AgentFactory | None = None,
    *,
    profile_name: str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
) -> list[MachineReport]:
    """Run every conformance machine against `factory` and report on each."""
    budget = profile(profile_name)
    if max_examples is not None:
        budget = Settings(budget, max_examples=max_examples)
    chosen = factory if factory is not None else builtin_agent_factory
    counts = {"examples": 0, "checks": 0}

    class Counted(AgentMachine):
        stats = counts

    Counted.factory = staticmethod(chosen)
    Counted.__name__ = "AgentMachine"
    reports = [_run("agent", Counted, counts, budget, seed)]
    if factory is None:
        # The lifecycle machine drives a whole runtime; an --target agent factory has none.
        life_counts = {"examples": 0, "checks": 0}

        class Lifecycle(LifecycleMachine):
            stats = life_counts

        Lifecycle.__name__ = "LifecycleMachine"
        reports.append(_run("lifecycle", Lifecycle, life_counts, budget, seed))
    return reports


def _run(
    name: str,
    machine: type[RuleBasedStateMachine],
    counts: dict[str, int],
    budget: Settings,
    seed: int | None,
) -> MachineReport:
    def run() -> None:
        run_state_machine_as_test(machine, settings=budget)

    started = time.monotonic()
    failure: BaseException | None = None
    try:
        (hypothesis_seed(seed)(run) if seed is not None else run)()
    except Exception as exc:
        failure = exc
    elapsed = time.monotonic() - started
    return MachineReport(name, counts["examples"], counts["checks"], elapsed, failure)
