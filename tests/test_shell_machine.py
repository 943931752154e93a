"""The shell state machine passes on the built-in executor (issue 5, acceptance 5); the
seeded defects it must catch are in tests/test_known_bad.py."""

from __future__ import annotations

import pytest

from agent_conformance import check_shell_conformance
from agent_conformance._profiles import profile
from agent_conformance._shell_machine import shell_settings


@pytest.mark.subprocess
def test_the_builtin_executor_passes_the_shell_machine() -> None:
    check_shell_conformance(settings=shell_settings(profile()))
