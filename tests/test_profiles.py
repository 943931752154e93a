"""The Hypothesis profiles draw a fresh seed on every run, on a CI machine too (D314)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agent_conformance._profiles import PROFILES, profile

PROBE = """
from hypothesis import settings
from agent_conformance._profiles import PROFILES
settings.register_profile("ours", PROFILES["ci"])
settings.load_profile("ours")
print(PROFILES["ci"].derandomize, PROFILES["deep"].derandomize,
      settings(max_examples=3).derandomize)
"""


def test_on_a_ci_machine_the_profiles_are_not_derandomised() -> None:
    # Hypothesis loads its own derandomised `ci` profile when CI is set; ours must not
    # inherit it.
    env = {**os.environ, "CI": "true"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False", "False"]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_is_chosen_by_name(name: str) -> None:
    assert profile(name) is PROFILES[name]
    assert profile(name).deadline is None


def test_an_unknown_profile_is_one_line_naming_it_and_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown profile 'shallow'; choose one of ci, deep"):
        profile("shallow")
