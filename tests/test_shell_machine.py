"""The shell state machine passes on the built-in executor (issue 5, acceptance 5); the
seeded defects it must catch are in tests/test_known_bad.py."""

from __future__ import annotations

import pytest

from trio_agents.testing import check_shell_conformance
from trio_agents.testing._profiles import profile
from trio_agents.testing._shell_machine import shell_settings


@pytest.mark.subprocess
def test_the_builtin_executor_passes_the_shell_machine() -> None:
    check_shell_conformance(settings=shell_settings(profile()))
