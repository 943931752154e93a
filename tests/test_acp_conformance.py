"""The ACP mode (issue 15, acceptance 3): `trio-agents conformance --acp -- CMD` passes on our
own `trio-agents acp --model openai` and gives a clear verdict, never a hang, for an agent
that crashes, never answers, or writes garbage. The seeded-defect servers are
tests/test_acp_seeded.py's."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKOUT = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
VIOLATION = re.compile(r"^    [A-Z][0-9]+ \(([a-z0-9-]+)\): ", re.MULTILINE)
OUR_SERVER = (sys.executable, "-m", "trio_agents._cli", "acp", "--model", "openai")


def conformance(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "trio_agents._cli", "conformance", "--acp", *args]
    return subprocess.run(
        command, env=CHECKOUT, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_our_own_server_passes_the_ci_profile(tmp_path: pathlib.Path) -> None:
    # Conformant by its own suite, every tier: each requirement reached, and held.
    report = tmp_path / "report.json"
    done = conformance("--seed", "4242", "--report-json", str(report), "--", *OUR_SERVER)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "acp machine: passed" in done.stdout
    assert "session/load checked" in done.stdout
    assert "  verdict: CONFORMANT\n" in done.stdout
    outcomes = {row["id"]: row["outcome"] for row in json.loads(report.read_text())["requirements"]}
    # An agent may read a linked file from disk or through the client (the protocol's
    # choice): a run where ours did not read an edited file through it does not check
    # TA-FS-001.
    if outcomes["TA-FS-001"] in ("not applicable", "not reached"):
        outcomes["TA-FS-001"] = "passed"
    assert outcomes == dict.fromkeys(outcomes, "passed")


@pytest.mark.parametrize(
    ("variant", "examples", "limited"),
    [
        # Many agents keep a session only once it took a prompt, which the spec allows
        # (D479).
        ("lists-only-prompted", "12", False),
        # Three live sessions a process: most of the sixty made at once are refused, and so
        # is one sent alone after them, so it is a limit, not a finding (D518).
        ("sessions-capped", "12", True),
    ],
)
def test_a_correct_variant_passes_the_listing_rules(
    variant: str, examples: str, limited: bool, tmp_path: pathlib.Path
) -> None:
    report = tmp_path / "report.json"
    agent = (sys.executable, "-m", "tests.support.acp_defects", variant)
    done = conformance(
        "--seed", "1", "--max-examples", examples, "--only", "TA-LIST-001,TA-LIST-002",
        "--report-json", str(report), "--", *agent,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text())
    assert data["one_session_a_process"] is limited, done.stdout
    outcomes = {row["id"]: row["outcome"] for row in data["requirements"]}
    assert outcomes["TA-LIST-001"] == outcomes["TA-LIST-002"] == "passed", outcomes


def test_a_v1_only_agent_gets_the_v2_rules_as_not_applicable(tmp_path: pathlib.Path) -> None:
    # It answers 1 to a client asking for 2, which the negotiation allows (D527).
    report = tmp_path / "report.json"
    agent = (sys.executable, "-m", "tests.support.acp_defects", "v1-only")
    args = ("--seed", "1", "--max-examples", "5", "--only", "P24,P25,P26,P27")
    done = conformance(*args, "--report-json", str(report), "--", *agent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  verdict: CONFORMANT\n" in done.stdout
    outcomes = {row["id"]: row["outcome"] for row in json.loads(report.read_text())["requirements"]}
    assert outcomes["TA-V2-001"] == "passed"
    for number in range(2, 8):
        assert outcomes[f"TA-V2-00{number}"] == "not applicable", outcomes


def test_an_agent_of_one_session_a_process_gets_a_verdict(tmp_path: pathlib.Path) -> None:
    # A second session/new refused is no finding, and the rules go on with one (D482).
    report = tmp_path / "report.json"
    agent = (sys.executable, "-m", "tests.support.acp_defects", "one-session-a-process")
    done = conformance(
        "--seed", "1", "--max-examples", "4", "--report-json", str(report), "--", *agent
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the agent refused a second session/new in one process" in done.stdout
    data = json.loads(report.read_text())
    assert data["one_session_a_process"] is True
    assert not [row for row in data["requirements"] if row["outcome"] == "failed"]


def test_an_agent_that_exits_at_once_gets_a_verdict() -> None:
    done = conformance("--timeout", "5", "--", sys.executable, "-c", "import sys; sys.exit(3)")
    assert done.returncode == 1
    assert (
        "P1 (request-answered): initialize got no answer before the agent exited; "
        "it exited with code 3"
    ) in done.stdout


def _still_running(code: str) -> list[int]:
    """Pids of live processes whose command line holds `code`, from /proc."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if code.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_an_agent_that_never_answers_gets_a_verdict_within_the_timeout() -> None:
    never = "import time; time.sleep(600)  # never-answers"
    done = conformance("--timeout", "2", "--", sys.executable, "-c", never, timeout=60)
    assert done.returncode == 1
    assert "initialize got no answer within 2 s; it is still running" in done.stdout
    assert _still_running("# never-answers") == []  # the suite killed it


def test_an_agent_that_writes_garbage_gets_a_verdict() -> None:
    garbage = "import sys, time; print('hello, editor', flush=True); time.sleep(600)  # garbage"
    done = conformance("--timeout", "2", "--", sys.executable, "-c", garbage, timeout=60)
    assert done.returncode == 1
    assert "P7 (schema-valid): the agent wrote a line that is not JSON" in done.stdout
    assert _still_running("# garbage") == []  # the suite killed it


def test_usage_errors_are_one_line() -> None:
    missing = conformance()
    assert missing.returncode == 2
    assert "name the agent's command after `--`" in missing.stderr
    absent = conformance("--", "no-such-agent-command")
    assert absent.returncode == 2
    assert "'no-such-agent-command' is not a command" in absent.stderr
    bad_env = conformance("--env", "NOEQUALS", "--", sys.executable)
    assert bad_env.returncode != 0
    assert "write it as NAME=TEMPLATE" in bad_env.stderr


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--env", "A=b"], "--env applies only with --acp; add --acp, or leave it out"),
        (["--timeout", "20"], "--timeout applies only with --acp"),
        (["--grace", "3", "--timeout", "5"], "--timeout, --grace apply only with --acp"),
        (["--", "true"], "the agent command 'true' applies only with --acp"),
        (
            ["--acp", "--target", "m:f", "--", "true"],
            "--target names a Python implementation, which --acp does not check",
        ),
    ],
)
def test_a_flag_of_the_other_mode_is_refused_not_ignored(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `conformance --env A=b` once ran the whole Python suite, the flag unread.
    from trio_agents._cli._main import main

    with pytest.raises(SystemExit) as exited:
        main(["conformance", *argv])
    assert exited.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"trio-agents conformance: error: {says}"), last


def test_an_agent_that_refuses_session_new_is_not_checked_and_says_why(tmp_path: Any) -> None:
    script = tmp_path / "refuses.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if m.get('method') == 'initialize':\n"
        "        r = {'protocolVersion': 1, 'agentCapabilities': {}}\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n"
        "    elif 'id' in m:\n"
        "        e = {'code': -32000, 'message': 'Authentication required'}\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'error': e}), flush=True)\n"
    )
    done = conformance("--timeout", "5", "--", sys.executable, str(script))
    assert done.returncode == 1
    assert "acp machine: NOT CHECKED: the agent refused session/new" in done.stdout
    assert "Authentication required" in done.stdout


def test_a_violation_that_does_not_replay_is_reported_as_that_violation(tmp_path: Any) -> None:
    """D392 for the ACP runner: an agent whose defect shows in one process only (the
    third started: the first two are the preflight's, its own and the one asked for v2,
    D527) fails an example, and Hypothesis's replay
    passes. The report names the violation and says it did not replay, not a crash."""
    counter = tmp_path / "started"
    script = tmp_path / "once.py"
    script.write_text(
        "import os, sys\n"
        f"with open({str(counter)!r}, 'a+') as f:\n"
        "    f.write('x'); f.seek(0); n = len(f.read())\n"
        "defect = ['-m', 'tests.support.acp_defects', 'session-new-answered-twice']\n"
        "plain = ['-m', 'trio_agents._cli', 'acp', '--model', 'openai']\n"
        "os.execv(sys.executable, [sys.executable, *(defect if n == 3 else plain)])\n"
    )
    done = conformance("--seed", "1", "--max-examples", "8", "--", sys.executable, str(script))
    assert done.returncode == 1, done.stdout + done.stderr
    assert VIOLATION.search(done.stdout) is not None, done.stdout
    assert "(answer-unique): " in done.stdout
    assert "it did not replay" in done.stdout
    assert "the implementation crashed" not in done.stdout


def test_ctrl_c_stops_the_run_before_its_next_example() -> None:
    command = [sys.executable, "-m", "trio_agents._cli", "conformance", "--acp", "--seed", "3"]
    with subprocess.Popen(
        [*command, "--", *OUR_SERVER],
        env=CHECKOUT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as run:
        assert run.stdout is not None
        assert "profile ci" in run.stdout.readline()  # printed once Ctrl-C is handled
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    assert run.returncode == 130, out + err
    assert "interrupted; replay this run with --seed 3" in err
    assert "Traceback" not in err
    assert "acp machine: passed" not in out
