"""The shrunk program a failing run prints replays the failure: run as a script, from
another directory, it fails with the same violation (the rule and the property)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from agent_conformance import ContractViolation
from agent_conformance._conformance import MachineReport, run_conformance

from .support.known_bad._agent import idle_cancel_emits
from .support.known_bad._lifecycle import detach_before_flush
from .support.scripts import private_imports

ROOT = pathlib.Path(__file__).parent.parent
KNOWN_BAD = "tests.support.known_bad"


def failing_report(machine: str, **targets: object) -> MachineReport:
    # Only the machine under test: the others would check (and shrink) the same target too.
    reports = run_conformance(seed=11, max_examples=200, machines=[machine], **targets)  # type: ignore[arg-type]
    [report] = [r for r in reports if r.machine == machine]
    assert not report.passed
    return report


def replay(report: MachineReport, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    assert report.program is not None
    script = tmp_path / "repro.py"
    script.write_text(report.program)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return subprocess.run(
        [sys.executable, str(script)], cwd=elsewhere, capture_output=True, text=True, check=False
    )


def assert_replays(report: MachineReport, tmp_path: pathlib.Path) -> None:
    failure = report.failure
    assert isinstance(failure, ContractViolation), failure
    assert report.program is not None
    assert private_imports(report.program) == [], "a reproduction imports public names only"
    replayed = replay(report, tmp_path)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    violation = f"{failure.rule} ({failure.property.name}): "
    last = re.findall(r"ContractViolation: (.*)$", replayed.stderr, re.M)
    assert last, replayed.stderr
    assert last[-1].startswith(violation), (violation, replayed.stderr)


@pytest.mark.subprocess
def test_an_agent_machine_failure_replays(tmp_path: pathlib.Path) -> None:
    report = failing_report(
        "agent", factory=idle_cancel_emits, factory_spec=f"{KNOWN_BAD}:idle_cancel_emits"
    )
    assert_replays(report, tmp_path)


@pytest.mark.subprocess
def test_a_lifecycle_machine_failure_replays(tmp_path: pathlib.Path) -> None:
    report = failing_report(
        "lifecycle",
        runtime_factory=detach_before_flush,
        runtime_spec=f"{KNOWN_BAD}:detach_before_flush",
    )
    assert_replays(report, tmp_path)
