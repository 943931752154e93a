"""The third-party agents' list (scripts/third-party/agents.toml), the conformance guide and
the matrix name the same versions; the scripts that install and check them refuse clearly.

Nothing is installed here (D102: hundreds of MB, not in CI); what is checked is that a
reader who runs the install script gets exactly the versions the findings and the matrix
were recorded on.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "install-third-party-agents.sh"
CHECK = ROOT / "scripts" / "check-third-party-agent.sh"
GUIDE = ROOT / "docs" / "conformance.md"
MATRIX = ROOT / "docs" / "matrix" / "acp-matrix.json"
sys.path.insert(0, str(ROOT / "scripts"))

import acp_matrix  # noqa: E402


def guide_rows() -> dict[str, str]:
    """name -> version, from the guide's table of third-party agents."""
    text = GUIDE.read_text()
    section = text.split("## Third-party ACP agents", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| (\S+) \| (\d+\.\d+\.\d+) \|", section, re.M))


def test_every_pin_is_exact_and_in_the_guide_and_the_matrix() -> None:
    agents = [a for a in acp_matrix.load(acp_matrix.AGENTS) if a.source != "builtin"]
    assert len(agents) >= 8, [a.name for a in agents]
    rows = guide_rows()
    matrix = {a["name"]: a for a in json.loads(MATRIX.read_text())["agents"]}
    for agent in agents:
        assert re.fullmatch(r"\d+\.\d+\.\d+", agent.version), f"{agent.name}: {agent.version}"
        assert rows.get(agent.name) == agent.version, (
            f"{agent.name}: the list pins {agent.version}, the guide {rows.get(agent.name)}"
        )
        assert matrix[agent.name]["version"] == agent.version, agent.name
        for template in agent.config.values():
            assert (ROOT / "scripts" / "third-party" / template).exists(), template


@pytest.mark.parametrize("script", [SCRIPT, CHECK], ids=["install", "check"])
def test_scripts_are_executable_bash_that_parses(script: pathlib.Path) -> None:
    assert script.stat().st_mode & 0o111, f"{script.name} is not executable"
    bash = shutil.which("bash")
    assert bash is not None
    result = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def run_script(
    script: pathlib.Path, prefix: pathlib.Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {"THIRD_PARTY": str(prefix), "PATH": "/usr/bin:/bin", "PYTHON": sys.executable}
    return subprocess.run(
        [str(script), *args], env=env, capture_output=True, text=True, check=False
    )


def test_the_check_script_refuses_an_agent_that_is_not_installed(tmp_path: pathlib.Path) -> None:
    result = run_script(CHECK, tmp_path, "qwen-code")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"acp_matrix.py: error: qwen-code is not installed in {tmp_path}: run "
        "scripts/install-third-party-agents.sh qwen-code"
    ]


def test_an_unknown_agent_is_one_line(tmp_path: pathlib.Path) -> None:
    result = run_script(SCRIPT, tmp_path, "no-such-agent")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("acp_matrix.py: error: no agent 'no-such-agent' in "), line


def test_prefix_is_gitignored() -> None:
    assert ".third-party/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_real_acp_clients_are_pinned_to_exact_versions() -> None:
    """The Node SDK and acpx, which the client tests install with npm into `.ci/`: an exact
    version each (a range would let a new release change what the tests check), and acpx's
    pin is the one its design decision names."""
    node = (ROOT / "tests" / "test_acp_node_client.py").read_text()
    acpx = (ROOT / "tests" / "test_acpx_client.py").read_text()
    assert re.search(r'^SDK = "@agentclientprotocol/sdk@\d+\.\d+\.\d+"$', node, re.M)
    (version,) = re.findall(r'^VERSION = "(\d+\.\d+\.\d+)"$', acpx, re.M)
    assert f"`acpx@{version}`" in (ROOT / "docs" / "design.md").read_text()
