"""The shell and MCP machines' seeded defects (tests/support/known_bad/_shell.py and
_mcp.py), each caught by the property docs/conformance.md names for it. A file of their own:
they run real processes and take as long as all the others together, so the workers share
them (D483, D498); and they run four at a time, each in a process of its own, since they
mostly wait (D524)."""

from __future__ import annotations

import pytest

from .support.known_bad import SEEDED, Seeded
from .support.known_bad.pooled import CAUGHT, run_pooled

pytestmark = pytest.mark.subprocess

ON_PROCESSES = [s for s in SEEDED if s.machine in ("shell", "mcp")]


@pytest.fixture(scope="module")
def verdicts() -> dict[str, str]:
    # The slowest first: started last, they would run alone at the end.
    late = ("empty-owner-is-nobody", "spill-trusted-by-path", "spill-world-readable")
    order = sorted(ON_PROCESSES, key=lambda s: s.name not in late)
    return run_pooled(s.name for s in order)


@pytest.mark.parametrize("seeded", ON_PROCESSES, ids=[s.name for s in ON_PROCESSES])
def test_the_suite_catches_a_seeded_defect(seeded: Seeded, verdicts: dict[str, str]) -> None:
    assert verdicts[seeded.name] == CAUGHT, verdicts[seeded.name]
