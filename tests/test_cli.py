"""`trio-agents conformance` passes on the built-in runtime and fails on a known-bad one."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

from trio_agents._cli._main import main
from trio_agents._version import VERSION

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent


@pytest.mark.subprocess  # the shell machine runs real processes
def test_conformance_passes_on_the_builtin_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    # Few examples: the machines' own tests search far more; this is the whole command's path.
    assert main(["conformance", "--max-examples", "10"]) == 0
    out = capsys.readouterr().out
    assert "agent machine: passed, " in out
    assert "lifecycle machine: passed, " in out
    assert "shell machine: passed, " in out
    assert "mcp machine: passed, " in out
    assert "acp machine: passed, " in out  # the built-in runtime's ACP server (D409)
    assert "commands ran in the bubblewrap sandbox" in out  # bwrap works here (D134)


@pytest.mark.subprocess
def test_conformance_fails_on_a_known_bad_shell_executor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Found is caught: shrinking a failure of real processes took minutes on a loaded runner.
    argv = ["conformance", "--shell-target", "tests.support.known_bad:leader_only_kill"]
    code = main([*argv, "--no-shrink"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "shell machine: FAILED" in out
    assert "agent machine" not in out  # only the machine whose target is given runs
    assert "S1 (group-killed)" in out  # a process of a killed group survived


def test_the_acp_machine_is_named_acp_and_only_for_the_builtin_runtime(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "conformance",
        "--machine",
        "acp",
        "--shell-target",
        "tests.support.known_bad:leader_only_kill",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "trio-agents conformance: --machine: the acp machine checks the built-in runtime's "
        "ACP server; check another ACP agent with trio-agents conformance --acp -- CMD"
    )


def test_machine_runs_only_the_machines_named(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["conformance", "--machine", "lifecycle", "--machine", "durable", "--max-examples", "3"]
    code = main([*argv, "--seed", "5"])
    out = capsys.readouterr().out
    assert code == 0, out
    ran = re.findall(r"^  (\w+) machine: passed", out, re.MULTILINE)
    # Two lanes by default (D417): the reports come as the machines end, the summary in order.
    assert sorted(ran) == ["durable", "lifecycle"], out
    assert re.search(r"on 2 machines: lifecycle \(\d+\), durable \(\d+\); all held", out), out


@pytest.mark.subprocess  # the lanes are processes
def test_a_machine_run_in_a_lane_runs_as_it_does_alone(capsys: pytest.CaptureFixture[str]) -> None:
    # Each lane is the same command with --machine NAME and the run's seed: the report of a
    # machine is the same, line for line, whichever way it ran (D417).
    argv = ["conformance", "--machine", "lifecycle", "--machine", "agent", "--max-examples", "20"]
    reports: list[list[str]] = []
    for jobs in ("1", "2"):
        assert main([*argv, "--seed", "11", "--jobs", jobs]) == 0
        out = capsys.readouterr().out
        lines = [line for line in out.splitlines() if re.match(r"  \w+ machine: passed", line)]
        reports.append(sorted(re.sub(r"\(\d+\.\d+s\)", "", line) for line in lines))
    assert reports[0] == reports[1]
    assert len(reports[0]) == 2


def test_conformance_fails_on_a_known_bad_target(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "conformance",
            "--target",
            "tests.support.known_bad:idle_cancel_emits",
            "--max-examples",
            "300",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "agent machine: FAILED" in out


def test_conformance_rejects_a_malformed_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--target", "no_colon_here"]) == 2
    assert "package.module:factory" in capsys.readouterr().err


def test_a_third_party_agent_passes_through_its_public_surface(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["conformance", "--target", "examples.third_party_agent:factory", "--max-examples", "60"]
    )
    assert code == 0, capsys.readouterr().out


@pytest.mark.subprocess  # the shell machine runs real processes
def test_the_same_seed_replays_the_same_run(capsys: pytest.CaptureFixture[str]) -> None:
    outs: list[str] = []
    raws: list[str] = []  # as printed: when the two differ, the report that says why
    # The machines whose programs replay exactly: the shell, MCP and ACP machines run real
    # processes on the real clock, and their lines would be left out below anyway.
    exact = ["agent", "lifecycle", "durable", "function", "model"]
    for _ in range(2):
        machines = [f"--machine={name}" for name in exact]
        main(["conformance", "--max-examples", "12", "--seed", "12345", *machines])
        out = capsys.readouterr().out
        raws.append(out)
        # The progress lines ("  ... N examples so far") come every 5 s of wall time.
        lines = [
            line
            for line in out.splitlines()
            if not line.startswith("  ... ") and not line.startswith("checked ")
        ]
        # In two lanes (D417) the reports come in the order the machines end.
        outs.append(re.sub(r"\(\d+\.\d+s\)", "", "\n".join(sorted(lines))))
    assert outs[0] == outs[1], f"first run:\n{raws[0][-6000:]}\nsecond run:\n{raws[1][-6000:]}"
    assert "seed 12345" in outs[0]


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "target", ["tests.support.known_bad:idle_cancel_emits", "examples.third_party_agent:factory"]
)
def test_both_names_of_the_command_give_the_same_verdicts_for_a_seed(target: str) -> None:
    """`agent-conformance` is the suite's own command; `trio-agents conformance` is the same
    command under the runtime's name (D385): for one seed, the same verdicts, each message
    under the name the user typed. (The example counts are not compared: how a seeded run
    explores can shift with what else the process imported, D385.)"""
    args = ["--target", target, "--max-examples", "40", "--seed", "9"]
    verdicts: list[tuple[int, list[str], list[str]]] = []
    for argv, prog in (
        ([str(BIN / "agent-conformance"), *args], "agent-conformance"),
        ([str(BIN / "trio-agents"), "conformance", *args], "trio-agents conformance"),
    ):
        result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        assert result.returncode in (0, 1), result.stdout + result.stderr
        assert result.stdout.startswith(f"{prog}: "), result.stdout
        assert f"replay this run: {prog} " in result.stdout or result.returncode == 0
        machines = re.findall(r"^  (\w+ machine: (?:passed|FAILED))", result.stdout, re.M)
        rules = re.findall(r"^    ([A-Z][0-9]+ \([\w-]+\))", result.stdout, re.M)[:1]
        verdicts.append((result.returncode, machines, rules))
    assert verdicts[0] == verdicts[1]
    assert (verdicts[0][0] == 1) == target.endswith("idle_cancel_emits")


@pytest.mark.subprocess
def test_a_failure_prints_a_seed_and_a_reproduction_that_fails_the_same_way(
    tmp_path: pathlib.Path,
) -> None:
    argv = [
        str(BIN / "trio-agents"),
        "conformance",
        "--target",
        "tests.support.known_bad:idle_cancel_emits",
        "--seed",
        "7",
    ]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "seed 7" in result.stdout
    program = re.search(
        r"shrunk reproduction \(run it with python\):\n(.*?)\n    replay", result.stdout, re.S
    )
    assert program, result.stdout
    script = tmp_path / "repro.py"
    script.write_text("\n".join(line[6:] for line in program.group(1).splitlines()) + "\n")
    # From a fresh directory, as a user who saved it would run it.
    fresh = tmp_path / "elsewhere"
    fresh.mkdir()
    replay = subprocess.run(
        [sys.executable, str(script)], cwd=fresh, capture_output=True, text=True, check=False
    )
    assert replay.returncode == 1
    # The replay fails with the very violation the report printed.
    reported = re.search(r"^    ([A-Z][0-9]+ \([a-z0-9-]+\): .*)$", result.stdout, re.M)
    assert reported, result.stdout
    assert reported.group(1) in replay.stderr


def test_acp_with_an_unconfigured_endpoint_says_which_variable_to_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    assert main(["acp", "--model", "openai"]) == 2
    assert "OPENAI_MODEL is not set" in capsys.readouterr().err


def test_the_version_is_the_one_in_pyproject_and_in_the_installed_metadata() -> None:
    # One string in two places (D379): the package's constant, read at every start without
    # importing importlib.metadata, and pyproject's, which the installed metadata says.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == VERSION
    assert importlib.metadata.version("trio-agents") == VERSION
    done = subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == f"trio-agents {VERSION}"
    suite = subprocess.run(
        [sys.executable, "-m", "agent_conformance._cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert suite.stdout.strip() == f"agent-conformance {VERSION}"
