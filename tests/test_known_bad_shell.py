"""The shell machine's seeded defects (tests/support/known_bad/_shell.py), each caught by the
property docs/conformance.md names for it. A file of their own: they run real processes and
take as long as all the others together, so the workers share them (D483, D498)."""

from __future__ import annotations

import pytest

from .support.known_bad import Seeded
from .support.known_bad.catching import check_caught, no_local_constants, params

__all__ = ["no_local_constants"]  # the autouse fixture, found here by pytest


@pytest.mark.parametrize("seeded", params(lambda machine: machine == "shell"))
def test_the_suite_catches_a_seeded_defect(seeded: Seeded) -> None:
    check_caught(seeded)
