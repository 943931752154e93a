"""The check every seeded defect of this package gets (tests/test_known_bad.py and
tests/test_known_bad_shell.py, one file per worker's share): caught, on every run
(derandomised), by the property docs/conformance.md names for it: a ContractViolation, not a
crash."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import cast

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from agent_conformance import ContractViolation
from agent_conformance._conformance import MACHINES
from agent_conformance._machine import machine_for

from . import SEEDED, Seeded

__all__ = [
    "AGENT_EXAMPLES",
    "BUDGET",
    "check_caught",
    "forbid_local_constants",
    "leaf_exceptions",
    "marks_for",
    "no_local_constants",
    "params",
    "the_violation",
]

BUDGET = settings(
    # The same examples every run: a seeded defect is either caught on every run or never,
    # never on some runs only (a random search of this budget missed (k) once in many runs).
    derandomize=True,
    max_examples=300,
    stateful_step_count=30,
    deadline=None,
    database=None,
    # Found is caught: each property raises a type of its own, so the first failing example
    # already names the property, and shrinking it (most of the cost, over real processes
    # and files) would prove nothing more. Printed reproductions are tested on their own
    # (tests/test_reproductions.py, tests/test_shell_reproduction.py).
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)


AGENT_EXAMPLES = 1000


# Defects whose finding is a process left running: Python warns of its process object and
# pipes when they are collected, which is that finding again, not a leak of the test.
LEAVES_PROCESSES = {"cancelled-run-leaves-group"}


def marks_for(seeded: Seeded) -> list[pytest.MarkDecorator]:
    # The shell and MCP machines run real processes on the real clock.
    marks = [pytest.mark.subprocess] if seeded.machine in ("shell", "mcp") else []
    if seeded.name in LEAVES_PROCESSES:
        marks.append(pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"))
        marks.append(pytest.mark.filterwarnings("ignore::ResourceWarning"))
    return marks


@pytest.fixture(autouse=True)
def no_local_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis draws, now and then, a literal found in the code under test (every module
    of trio_agents and agent_conformance it sees loaded), so a derandomised run's examples
    changed whenever a module with new literals was added anywhere (two seeded defects went
    uncaught when a seccomp module came, D496). The search here must depend on the
    machines and their seeds alone: it draws from Hypothesis's own constants only."""
    from hypothesis.internal.conjecture import providers

    monkeypatch.setattr(providers, "_get_local_constants", _no_constants())
    providers.CONSTANTS_CACHE.cache.clear()


def forbid_local_constants() -> None:
    """`no_local_constants` for a whole process (a seeded check run in one of its own)."""
    from hypothesis.internal.conjecture import providers

    setattr(providers, "_get_local_constants", _no_constants())  # noqa: B010 - an internal
    providers.CONSTANTS_CACHE.cache.clear()


def _no_constants() -> Callable[[], object]:
    from hypothesis.internal.conjecture import providers

    # Internals, reached by name: a change in them fails this fixture at once.
    names = vars(providers)
    constants, sorted_set, float_to_int = (
        names["Constants"],
        names["SortedSet"],
        names["float_to_int"],
    )
    empty = constants(
        integers=sorted_set(),
        floats=sorted_set(key=float_to_int),
        bytes=sorted_set(),
        strings=sorted_set(),
    )
    return lambda: empty


def params(machines: Callable[[str], bool]) -> list[object]:
    """The seeded defects of the machines `machines` accepts, as parameters with their marks."""
    return [pytest.param(s, id=s.name, marks=marks_for(s)) for s in SEEDED if machines(s.machine)]


def check_caught(seeded: Seeded) -> None:
    """Run `seeded`'s machine on it, derandomised; it must fail with the property named."""
    spec = MACHINES[seeded.machine]
    machine = machine_for(spec.base, seeded.target)
    # The agent machine's examples are cheap and its rules many: some defects need a queue
    # of prompts behind a running turn, which a third of its derandomised sample may lack.
    budget = settings(BUDGET, max_examples=AGENT_EXAMPLES) if seeded.machine == "agent" else BUDGET
    with pytest.raises(Exception) as info:  # noqa: PT011 - checked below
        run_state_machine_as_test(machine, settings=spec.budget(budget))
    violation = the_violation(info.value)
    assert violation.property.name in (seeded.property, *seeded.also), (
        f"{seeded.name} was caught by {violation.property.name}, "
        f"not by {seeded.property}: {violation}"
    )


def the_violation(exc: BaseException) -> ContractViolation:
    # One conformance violation (a check of the machine), not a crash of the harness.
    leaves = list(leaf_exceptions(exc))
    assert len(leaves) == 1, leaves
    assert isinstance(leaves[0], ContractViolation), exc
    return leaves[0]


def leaf_exceptions(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        for inner in group.exceptions:
            yield from leaf_exceptions(inner)
    else:
        yield exc
