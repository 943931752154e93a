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
from agent_conformance._durable_checks import title_problem
from agent_conformance._durable_restores import crash_points
from agent_conformance._machine import machine_for
from trio_agents import Record

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
        machine.send(data=draws("a", "hello"))
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
        max_examples=150,
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


# -- the pure checks the machine's rules use -------------------------------------------------


def _prompted(prompt: str) -> list[Record]:
    return [
        Record("turn/start", {"turn": 1}),
        Record("user/message", {"id": "m1", "content": prompt}),
    ]


@pytest.mark.parametrize(
    ("prompt", "title", "wrong"),
    [
        ("fix it\nplease", "fix it please", False),
        ("fix  it\r\n\tplease", "fix it please", False),
        ("fix it\nplease", "fix it\nplease", True),
        ("fix it", "fix", True),
        (" ".join(["word"] * 30), " ".join(["word"] * 15) + "\u2026", False),
        (" ".join(["word"] * 30), " ".join(["word"] * 15) + " wo...", False),
        (" ".join(["word"] * 30), " ".join(["word"] * 30), True),
        (" ".join(["word"] * 30), " ".join(["other"] * 10), True),
        ("hello", None, True),
    ],
)
def test_a_title_is_the_first_prompt_on_one_line(
    prompt: str, title: str | None, wrong: bool
) -> None:
    assert (title_problem(_prompted(prompt), title) is not None) is wrong
    assert title_problem([], None) is None
    assert title_problem([], "hello") is not None


def test_a_session_is_cut_only_inside_a_turn_after_a_record_committed_on_its_own() -> None:
    records = [
        *_prompted("go"),
        Record("step/start", {"turn": 1, "step": 1}),
        Record("assistant/message", {"content": "", "finish": "tool_calls"}),
        Record("tool/call", {"call_id": "c", "name": "t", "arguments": {}}),
        Record("tool/result", {"call_id": "c", "content": "ok", "is_error": False}),
        Record("step/end", {"turn": 1, "step": 1}),
        Record("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    # Never after turn/start alone (appended with its user/message), never once it ended.
    assert crash_points(records) == [2, 3, 4, 5, 6, 7]
