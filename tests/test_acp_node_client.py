"""`trio-agents acp` driven by the official Node ACP client, `@agentclientprotocol/sdk` 0.25.1
(issue 6, acceptance 2; issue 17, acceptance 2: one permission request, allowed). The test
installs the pinned package with npm into `.ci/node/` (ignored by git) the first time it
runs."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / ".ci" / "node"
SDK = "@agentclientprotocol/sdk@0.25.1"

pytestmark = pytest.mark.subprocess


@pytest.fixture(scope="module")
def sdk_dir() -> pathlib.Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the Node ACP client test")
    marker = NODE_DIR / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    if not marker.exists() or '"version": "0.25.1"' not in marker.read_text():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund", SDK],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return NODE_DIR


def test_the_node_client_runs_the_echo_and_cancel_scenario(
    sdk_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    agent = [
        sys.executable,
        "-m",
        "trio_agents._cli",
        "acp",
        "--store",
        str(tmp_path / "s.sqlite3"),
    ]
    driver = pathlib.Path(__file__).parent / "support" / "acp_node_client.mjs"
    result = subprocess.run(
        ["node", str(driver), str(sdk_dir), str(tmp_path), *agent],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("PASS")
