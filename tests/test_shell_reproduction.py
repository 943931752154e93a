"""A printed reproduction of a shell-machine failure replays it: run as a script from the
repository root, it fails again, with a violation of the same property."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from agent_conformance import ContractViolation
from agent_conformance._conformance import run_conformance

from .support.known_bad._shell import empty_owner_is_nobody_unsandboxed

ROOT = pathlib.Path(__file__).parent.parent


@pytest.mark.subprocess
def test_a_printed_shell_reproduction_fails_the_same_way(tmp_path: pathlib.Path) -> None:
    [report] = run_conformance(
        shell_factory=empty_owner_is_nobody_unsandboxed,
        shell_spec="tests.support.known_bad._shell:empty_owner_is_nobody_unsandboxed",
        seed=1,
        max_examples=60,
    )
    assert isinstance(report.failure, ContractViolation), report.failure
    name = report.failure.property.name
    assert report.program is not None
    # The failing step drew its job from st.data(): the script replays the draw.
    assert "Draws(" in report.program, report.program
    script = tmp_path / "reproduce.py"
    script.write_text(report.program)
    replay = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replay.returncode != 0, replay.stdout + replay.stderr
    assert f"ContractViolation: {report.failure.rule} ({name})" in replay.stderr, replay.stderr
