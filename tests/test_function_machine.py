"""The function machine (F4-F7, design D431): the built-in `function_tool` passes it, and a
maker of tools given with `--function-target` is checked alone."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, Phase, settings

from agent_conformance import ContractViolation, check_function_conformance
from agent_conformance._conformance import reproduction
from trio_agents._cli._main import main

from .support.known_bad._function import thread_abandoned

SMALL = settings(
    max_examples=40,
    stateful_step_count=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_the_builtin_function_tool_passes_the_function_machine() -> None:
    report = check_function_conformance(settings=SMALL, seed=3)
    assert report.passed
    assert {p.rule for p in report.checked} == {"F4", "F5", "F6", "F7"}


def test_a_maker_given_alone_is_the_only_target_checked(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["conformance", "--function-target", "trio_agents:function_tool"]
    code = main([*argv, "--seed", "1", "--jobs", "1", "--max-examples", "10"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "function machine: passed" in out
    assert "agent machine" not in out  # only the machine whose target is given runs


def test_a_seeded_maker_fails_with_its_rule_and_a_reproduction_that_replays_it() -> None:
    # Found is caught: shrinking a failure replays hundreds of examples, a minute here.
    found = settings(SMALL, phases=[Phase.generate], max_examples=100)
    with pytest.raises(ContractViolation, match=r"F7 \(sync-call-not-abandoned\)") as info:
        check_function_conformance(thread_abandoned, settings=found, seed=1)
    script = reproduction("function", info.value, "tests.support.known_bad:thread_abandoned")
    assert script is not None
    assert "state.cancel_sync_call(data=Draws(" in script, script
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "F7 (sync-call-not-abandoned)" in ran.stderr


def test_the_function_machine_wants_its_own_target(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["conformance", "--shell-target", "tests.support.known_bad:leader_only_kill"]
    assert main([*argv, "--machine", "function"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "trio-agents conformance: --machine: the function machine checks a function target, "
        "and none is given: add --function-target, or leave out the function machine"
    )
