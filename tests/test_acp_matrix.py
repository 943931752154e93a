"""The matrix script and the GitHub composite action (issue 35, D478): the matrix runs the
suite on each agent of a list, replays each failure's reproduction in a fresh process to
confirm it, and writes JSON and HTML; the action's run step writes the three reports, the
job summary and the verdict output, and exits as the suite does."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MATRIX = ROOT / "scripts" / "acp_matrix.py"
ACTION = ROOT / "action.yml"
RUN_STEP = ROOT / "scripts" / "acp-action.sh"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

pytestmark = pytest.mark.subprocess

AGENTS = """
[[agent]]
name = "trio-agents"
version = "0.1.0"
source = "builtin"
command = ["{python}", "-m", "trio_agents._cli", "acp", "--model", "openai"]
api = "OpenAI chat completions"

[[agent]]
name = "banner"
version = "0"
source = "builtin"
command = ["{python}", "-m", "tests.support.acp_defects", "banner-on-stdout"]
options = ["--timeout", "10"]

[[agent]]
name = "absent"
version = "1.0.0"
source = "npm"
package = "no-such-package"
command = ["{prefix}/bin/absent"]
"""


def matrix(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MATRIX), *argv],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_matrix_has_each_agents_verdict_and_confirms_each_failure(
    tmp_path: pathlib.Path,
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    out = tmp_path / "matrix"
    done = matrix(
        "--agents", str(agents), "--prefix", str(tmp_path / "prefix"),
        "run", "--max-examples", "2", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((out / "acp-matrix.json").read_text())
    assert data["format"] == "trio-agents-acp-matrix/1"
    verdicts = {a["name"]: a["verdict"] for a in data["agents"]}
    assert verdicts == {
        "trio-agents": "CONFORMANT",
        "banner": "NOT CONFORMANT",
        "absent": "NOT RUN",
    }
    (absent,) = [a for a in data["agents"] if a["name"] == "absent"]
    assert absent["problem"] == "not installed: scripts/install-third-party-agents.sh absent"
    outcomes = {r["property"]: r["outcomes"] for r in data["requirements"]}
    assert outcomes["schema-valid"] == {"trio-agents": "passed", "banner": "failed"}
    (finding,) = data["findings"]
    assert (finding["agent"], finding["property"], finding["tier"]) == (
        "banner",
        "schema-valid",
        "MUST",
    )
    # Confirmed by running the written reproduction alone, in a fresh process.
    assert finding["confirmed"], finding["replay"]
    script = (out / finding["reproduction"]).read_text()
    assert script.startswith("# Replays the shrunk")
    # No path of this checkout: the script runs from any checkout (D481).
    assert repr(str(ROOT))[:-1] not in script, script
    page = (out / "acp-matrix.html").read_text()
    assert page.count('<td class="failed">') == 1
    assert "confirmed by a replay" in page


def test_a_wrong_agent_list_is_one_line(tmp_path: pathlib.Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[[agent]]\nname = "x"\nversion = "latest"\nsource = "npm"\ncommand = ["x"]\n'
    )
    done = matrix("--agents", str(agents), "run")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"acp_matrix.py: error: {agents}: x: version 'latest' is not a pin"
    )
    agents.write_text("[[agent]]\nname = 'x'\n")
    done = matrix("--agents", str(agents), "install")
    assert done.returncode == 2
    assert done.stderr.strip() == f"acp_matrix.py: error: {agents}: an agent has no 'version'"
    agents.write_text(
        '[[agent]]\nname = "x"\nversion = "1.0"\nsource = "npm"\ncommand = "x --acp"\n'
    )
    done = matrix("--agents", str(agents), "install")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"acp_matrix.py: error: {agents}: x: command must be a list of strings, e.g. "
        'command = ["command-word", "..."], not \'x --acp\''
    )
    agents.write_text('[[agent]]\nname = "x"\nversion = "1.0"\nsource = "npm"\ncommand = ["x"]\n')
    done = matrix("--agents", str(agents), "confirm", "--out", str(tmp_path / "none"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"acp_matrix.py: error: no matrix at {tmp_path / 'none' / 'acp-matrix.json'} to "
        "confirm: run `acp_matrix.py run` first"
    )


def test_the_action_is_composite_and_passes_every_input_to_its_run_step() -> None:
    text = ACTION.read_text()
    assert re.search(r"^runs:\n  using: composite$", text, re.M)
    inputs = re.findall(r"^  ([a-z-]+):\n    description:", text.split("\noutputs:")[0], re.M)
    assert "agent-command" in inputs
    for name in inputs:
        assert f"${{{{ inputs.{name} }}}}" in text, f"input {name} is never used"
    assert 'bash "${GITHUB_ACTION_PATH}/scripts/acp-action.sh"' in text
    assert '"${GITHUB_ACTION_PATH}[acp-conformance]"' in text


def test_the_actions_run_step_writes_the_reports_the_summary_and_the_verdict(
    tmp_path: pathlib.Path,
) -> None:
    agent = f"{sys.executable} -m tests.support.acp_defects banner-on-stdout"
    env = {
        **ENV,
        "ACP_PYTHON": sys.executable,
        "ACP_AGENT_COMMAND": agent,
        "ACP_ARGS": "--max-examples 2 --timeout '10'",
        "ACP_REPORT_DIR": str(tmp_path / "reports"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
    }
    done = subprocess.run(
        ["bash", str(RUN_STEP)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    names = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert names == ["console.txt", "junit.xml", "report.html", "report.json"]
    verdict = "NOT CONFORMANT: 1 MUST requirement(s) failed (TA-TRANSPORT-001)"
    output = (tmp_path / "output").read_text()
    assert output == f"verdict=NOT CONFORMANT\nheadline={verdict}\n"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith(f"## ACP conformance: {verdict}\n")
    assert "TA-TRANSPORT-001 schema-valid (P7): FAILED" in summary
    env["ACP_AGENT_COMMAND"] = "  "
    empty = subprocess.run(
        ["bash", str(RUN_STEP)], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert empty.returncode == 2
    assert (
        empty.stderr.strip() == "acp-action: ACP_AGENT_COMMAND is empty: name the agent's command"
    )
    env["ACP_AGENT_COMMAND"] = "node 'agent.js"
    unbalanced = subprocess.run(
        ["bash", str(RUN_STEP)], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert unbalanced.returncode == 2
    assert unbalanced.stderr.strip() == (
        'acp-action: ACP_AGENT_COMMAND "node \'agent.js" does not split into words: '
        "No closing quotation; balance its quotes"
    )


def test_a_run_of_some_agents_replaces_only_their_columns() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import acp_matrix

    def column(name: str, outcome: str) -> dict[str, object]:
        return {
            "agents": [{"name": name, "verdict": outcome}],
            "requirements": [{"id": "TA-X-001", "outcomes": {name: outcome}}],
            "findings": [{"agent": name}] if outcome == "failed" else [],
        }

    old = acp_matrix.merged(column("a", "failed"), column("b", "passed"), ["a", "b"])
    new = acp_matrix.merged(old, column("a", "passed"), ["a", "b"])
    assert [a["name"] for a in new["agents"]] == ["a", "b"]
    assert new["requirements"][0]["outcomes"] == {"a": "passed", "b": "passed"}
    assert new["findings"] == []


def test_a_run_past_its_time_is_interrupted_and_leaves_no_process() -> None:
    # The suite runs in a session of its own (its agents out of reach of a kill of the
    # script's group): past its time it is interrupted, to close them, and then gone (D481).
    sys.path.insert(0, str(ROOT / "scripts"))
    import acp_matrix

    marker = f"acp-matrix-overrun-{os.getpid()}"
    child = f"import time  # {marker}\ntime.sleep(600)"
    with pytest.raises(subprocess.TimeoutExpired):
        acp_matrix._run_bounded([sys.executable, "-c", child], timeout=2.0)  # pyright: ignore[reportPrivateUsage]
    left: list[str] = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                left.append(entry.name)
        except OSError:
            continue  # gone meanwhile
    assert not left
