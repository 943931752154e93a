"""Seeded defects the conformance suite must catch (the list grows with issue 4)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from hypothesis import HealthCheck, settings

from trio_agents.testing.agent_machine import check_agent_conformance

from .known_bad import idle_cancel_emits, steering_lost_at_turn_end

BUDGET = settings(
    max_examples=300,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize(
    "factory",
    [idle_cancel_emits, steering_lost_at_turn_end],
    ids=["b-idle-cancel-emits", "f-steering-lost-at-turn-end"],
)
def test_the_agent_machine_catches_a_seeded_defect(factory: object) -> None:
    with pytest.raises(Exception) as info:  # noqa: PT011 - any violation counts
        check_agent_conformance(factory, settings=BUDGET)  # type: ignore[arg-type]
    # Conformance violations (assertions of the machine), not a crash of the harness.
    leaves = list(leaf_exceptions(info.value))
    assert leaves
    assert all(isinstance(leaf, AssertionError) for leaf in leaves), leaves


def leaf_exceptions(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        for inner in group.exceptions:
            yield from leaf_exceptions(inner)
    else:
        yield exc
