"""The chat machine (D466): `trio-agents chat` passes it, and each seeded-defect chat fails
it with the property named for it."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys

import pytest

from agent_conformance._chat._machine import ChatTarget
from agent_conformance._chat._properties import PROPERTIES
from agent_conformance._chat._run import run_chat_conformance

from .support.chat_defects import CHAT_SEEDED, ChatSeeded

pytestmark = pytest.mark.subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_built_in_chat_passes_the_ci_profile() -> None:
    target = ChatTarget((sys.executable, "-m", "trio_agents._cli", "chat"))
    report = run_chat_conformance(target, seed=4242)
    assert report.failure is None, report.failure
    assert report.examples >= 10


# One seeded run, in a process of its own (Hypothesis is not to be run from threads): the
# name of the property that failed, or what happened instead.
SEEDED_RUN = """
import sys
from agent_conformance._chat._machine import ChatTarget
from agent_conformance._chat._run import run_chat_conformance
target = ChatTarget((sys.executable, "-m", "tests.support.chat_defects", sys.argv[1]))
report = run_chat_conformance(target, seed=1, max_examples=60, shrink=False)
prop = getattr(report.failure, "property", None)
print(prop.name if prop is not None else f"no violation: {report.failure!r}")
"""


@pytest.fixture(scope="module")
def seeded_verdicts() -> dict[str, str]:
    """Every seeded-defect chat, four at a time (each run mostly waits on its chats): the
    property each failed with, by defect."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def verdict(seeded: ChatSeeded) -> str:
        done = subprocess.run(
            [sys.executable, "-c", SEEDED_RUN, seeded.name],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        lines = done.stdout.strip().splitlines()
        return lines[-1] if lines else done.stderr[-2000:]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        found = pool.map(verdict, CHAT_SEEDED)
        return dict(zip([s.name for s in CHAT_SEEDED], found, strict=True))


@pytest.mark.parametrize("seeded", CHAT_SEEDED, ids=[s.name for s in CHAT_SEEDED])
def test_a_seeded_defect_is_caught_by_its_property(
    seeded: ChatSeeded, seeded_verdicts: dict[str, str]
) -> None:
    assert seeded_verdicts[seeded.name] in (seeded.property, *seeded.also)


def test_every_chat_property_has_a_seeded_defect() -> None:
    assert {p.name for p in PROPERTIES} == {s.property for s in CHAT_SEEDED}
