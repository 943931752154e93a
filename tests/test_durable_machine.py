"""The durable machine (rule L6): the built-in runtime passes it over a real SQLite file; its
crash leaves the file as a kill -9 would; a failure's printed reproduction replays."""

from __future__ import annotations

import pathlib
import sqlite3
import subprocess
import sys
from typing import cast

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from agent_conformance import ContractViolation, Draws, DurableMachine, check_durable_conformance
from agent_conformance._conformance import reproduction
from agent_conformance._machine import machine_for

from .support.known_bad._durable import repair_forgets_dangling_calls

ROOT = pathlib.Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.realtime  # real files, worker threads, the real clock

SMALL = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_the_builtin_runtime_passes_the_durable_machine() -> None:
    check_durable_conformance(settings=SMALL)


def draws(*values: object) -> st.DataObject:
    # What a printed reproduction passes where Hypothesis passes its data object.
    return cast("st.DataObject", Draws(*values))


def stored_types(path: pathlib.Path, sid: str) -> list[str]:
    """The record types of `sid` in the file, read with plain sqlite3 (not the library)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type FROM records WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
    finally:
        conn.close()
    return [kind for (kind,) in rows]


def test_a_crash_leaves_the_open_turn_in_the_file_and_the_resume_repairs_it() -> None:
    machine = machine_for(DurableMachine, None)()
    try:
        machine.start()
        machine.create(data=draws("a", False))  # not asking
        machine.send(data=draws("a"))
        machine.release_model(calls=2, data=draws("a", False))
        machine.finish_tool(data=draws("a"))
        machine.check()
        cut = ["turn/start", "user/message", "step/start", "assistant/message"]
        cut += ["tool/call", "tool/call", "tool/result"]
        assert stored_types(machine.path, "a") == cut
        # The crash resumes "a" at once: had the old runtime's teardown reached the file, it
        # would hold its closing records (`tool/result`, `step/end`, `turn/end {closed}`)
        # instead of the repair's interrupted ones.
        machine.crash()
        machine.check()
        records = machine.handles["a"].agent.session.records
        repair = records[len(cut) : len(cut) + 3]
        assert [r.type for r in repair] == ["tool/result", "step/end", "turn/end"]
        assert repair[0].data["interrupted"] is True
        assert repair[2].data["reason"]["kind"] == "interrupted"
        assert stored_types(machine.path, "a")[: len(cut) + 4] == [
            *cut,
            "tool/result",
            "step/end",
            "turn/end",
            "turn/start",
        ]
    finally:
        machine.teardown()
    assert not machine.path.parent.exists()  # the example's directory is removed


def test_a_failure_reproduction_replays_the_same_violation(tmp_path: pathlib.Path) -> None:
    machine = machine_for(DurableMachine, repair_forgets_dangling_calls)
    # Not shrunk (it costs real time): the first failing program replays as well.
    budget = settings(
        SMALL,
        derandomize=True,
        max_examples=60,
        phases=[Phase.generate],
        report_multiple_bugs=False,
    )
    with pytest.raises(ContractViolation) as info:
        run_state_machine_as_test(machine, settings=budget)
    # The same repair, read by a resume or by a restore alone (D418).
    found = info.value.property.name
    assert found in ("resume-answers-dangling-calls", "restore-repairs-once")
    program = reproduction(
        "durable", info.value, "tests.support.known_bad:repair_forgets_dangling_calls"
    )
    assert program is not None
    script = tmp_path / "repro.py"
    script.write_text(program)
    replay = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert replay.returncode == 1
    assert f"L6 ({found})" in replay.stderr, replay.stderr
