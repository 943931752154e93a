"""The seed a run forces on Hypothesis. No trio import.

`run_state_machine_as_test` builds its own `@given` test, which a `seed()` decorator does
not reach; a run forces its seed the way Hypothesis's pytest plugin does for
`--hypothesis-seed`, through `hypothesis.core.global_force_seed`, read once as each test
starts, and puts back what was there when it ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator

import hypothesis.core

__all__ = ["forcing_seed"]


@contextlib.contextmanager
def forcing_seed(seed: int | None) -> Generator[None]:
    """Within the block, Hypothesis tests use `seed` (None: as their settings say)."""
    previous = hypothesis.core.global_force_seed
    if seed is not None:
        hypothesis.core.global_force_seed = seed  # type: ignore[assignment]
    try:
        yield
    finally:
        hypothesis.core.global_force_seed = previous
