"""Every mistake a new user makes on `trio-agents conformance` is one line naming the flag,
the value and what to do, with exit status 2 (130 for Ctrl-C), never a traceback (issue 19)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pexpect
import pytest

from trio_agents._cli._main import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--target", "nosuchmodule:factory"],
            "trio-agents conformance: --target nosuchmodule:factory: no module named "
            "'nosuchmodule' here",
        ),
        (
            ["--runtime-target", "mybad:nope"],
            "trio-agents conformance: --runtime-target mybad:nope: no module named 'mybad'",
        ),
        (
            ["--shell-target", "tests.support.not_an_agent:nothing"],
            "trio-agents conformance: --shell-target tests.support.not_an_agent:nothing: "
            "module 'tests.support.not_an_agent' has no 'nothing'",
        ),
        (
            ["--target", ""],
            "trio-agents conformance: --target must look like 'package.module:factory', got ''",
        ),
        (
            ["--target", "no_colon_here"],
            "trio-agents conformance: --target must look like 'package.module:factory', "
            "got 'no_colon_here'",
        ),
    ],
)
def test_a_target_that_does_not_load_is_one_line_naming_its_flag(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", *argv]) == 2
    assert one_line(capsys).startswith(expected)


def test_a_machine_whose_target_is_not_given_is_one_line_saying_which_flag_to_add(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--shell-target", "tests.support.known_bad:leader_only_kill", "--machine", "durable"]
    assert main(["conformance", *argv]) == 2
    assert one_line(capsys) == (
        "trio-agents conformance: --machine: the durable machine checks a runtime target, and "
        "none is given: add --runtime-target, or leave out the durable machine"
    )


def test_the_machine_names_of_the_command_are_the_suites() -> None:
    from agent_conformance._cli._run import MACHINE_NAMES
    from agent_conformance._conformance import MACHINES

    assert tuple(MACHINES) == MACHINE_NAMES


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_max_examples_must_be_positive(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["conformance", "--max-examples", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"argument --max-examples: must be a positive integer, got {value!r}" in err


def test_an_object_without_the_agent_methods_is_named_with_what_it_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = "tests.support.not_an_agent:missing_methods"
    assert main(["conformance", "--target", target, "--max-examples", "5"]) == 2
    assert one_line(capsys) == (
        f"trio-agents conformance: --target {target}: the factory yielded a Half, which lacks "
        "cancel, wait_idle, status, session, steer, inject: an agent needs the methods of "
        "trio_agents.Agent (an agent without steer or inject declares it: "
        "conformance_features = Features(steer=False, inject=False))"
    )


def test_a_factory_of_the_wrong_signature_says_how_it_is_called(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = "tests.support.not_an_agent:wrong_signature"
    assert main(["conformance", "--target", target, "--max-examples", "5"]) == 2
    line = one_line(capsys)
    assert line.startswith(f"trio-agents conformance: --target {target}: the factory ")
    assert "cannot be called as factory(model, tools, events, options)" in line


def test_a_target_is_found_in_the_current_directory(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my_agent_here.py").write_text(
        "from agent_conformance._agent_machine import builtin_agent_factory as factory\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert main(["conformance", "--target", "my_agent_here:factory", "--max-examples", "5"]) == 0
    out = capsys.readouterr().out
    assert "agent machine: passed" in out


def test_the_output_ends_by_saying_what_was_checked_and_where_it_is_explained(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = "agent_conformance._agent_machine:builtin_agent_factory"
    assert main(["conformance", "--target", target, "--max-examples", "5"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert re.match(r"checked (\d+) properties on 1 machine: agent \(\1\); all held\.", last), last
    assert last.endswith("docs/conformance.md")


def test_help_gives_the_defaults_and_how_long_a_profile_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["conformance", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: ci, or $TRIO_AGENTS_PROFILE" in text
    assert "ci: about a minute" in text
    assert "300 for ci, 5000 for deep" in text
    assert "default: a random seed" in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("trio-agents ")


def interrupted_run(*args: str, after: str) -> tuple[int | None, str]:
    """`trio-agents conformance ARGS` in a terminal, sent Ctrl-C (to its whole foreground
    group, as a terminal does) once it printed `after`: its exit status and its output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child: pexpect.spawn[str] = pexpect.spawn(
        sys.executable,
        ["-m", "trio_agents._cli", "conformance", *args],
        env=env,
        encoding="utf-8",
        timeout=120,
    )
    try:
        child.expect(after)
        child.sendintr()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    return child.exitstatus, child.before or ""


@pytest.mark.subprocess
def test_ctrl_c_prints_the_seed_and_what_passed_and_exits_130() -> None:
    # One machine done, the next one running.
    status, text = interrupted_run(
        "--seed", "7", "--max-examples", "40", "--jobs", "1", after="agent machine: passed"
    )
    assert status == 130
    assert "Traceback" not in text
    # The next machine may finish before the interrupt reaches it: "agent" comes first.
    assert "trio-agents conformance: interrupted; machines passed so far: agent" in text
    assert "; replay this run with --seed 7" in text


@pytest.mark.subprocess
def test_ctrl_c_stops_every_lane_once_and_says_so_once() -> None:
    # Two machines at a time, each in a process of its own (D417): the terminal's Ctrl-C
    # reaches the command, which passes it on; each machine stops before its next example.
    status, text = interrupted_run(
        "--seed", "7", "--max-examples", "40", "--jobs", "2", after="machine: passed"
    )
    assert status == 130, text
    assert "Traceback" not in text
    assert text.count("interrupted; machines passed so far: ") == 1, text
    assert "; replay this run with --seed 7" in text
    assert " properties on " not in text  # no summary of a run that did not end


@pytest.mark.subprocess
def test_ctrl_c_stops_the_main_jobs_acp_machine_too() -> None:
    status, text = interrupted_run("--seed", "7", "--machine", "acp", after="profile ci")
    assert status == 130, text
    assert "Traceback" not in text
    assert "acp machine: passed" not in text
    assert "interrupted; machines passed so far: none; replay this run with --seed 7" in text


def test_a_check_function_returns_a_report_and_takes_any_settings() -> None:
    from hypothesis import settings

    from agent_conformance import check_shell_conformance

    # Hypothesis's default deadline (200 ms) would fail a real-process example at once.
    report = check_shell_conformance(settings=settings(max_examples=12))
    assert report.passed
    assert report.machine == "shell"
    assert report.examples >= 10
    assert report.seed is not None
    assert {p.rule for p in report.checked} >= {"S1"}


LANE_THREAD_SIGINT = """
import os, signal, sys, threading
from agent_conformance._cli._lanes import run_lanes

handled = threading.Event()
signal.signal(signal.SIGINT, lambda signum, frame: handled.set())

def lane():
    # Only this thread takes SIGINT, so the kernel hands it here: its C handler only marks
    # it, and the Python handler runs when the main thread next runs bytecode.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    main = threading.main_thread().ident
    while sys._current_frames()[main].f_code.co_name != "_wait_for_tstate_lock":
        pass  # until the main thread waits for this lane
    os.kill(os.getpid(), signal.SIGINT)
    print("handled" if handled.wait(60) else "not handled", flush=True)

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
run_lanes([lane], 1)
"""


@pytest.mark.subprocess
def test_a_sigint_a_lane_thread_receives_reaches_the_handler_while_the_lanes_run() -> None:
    # The terminal's Ctrl-C must stop a run whichever thread the kernel chose (D517): a
    # main thread in an unbounded join would run the handler only once every lane ended.
    done = subprocess.run(
        [sys.executable, "-c", LANE_THREAD_SIGINT],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout == "handled\n", done.stdout + done.stderr
