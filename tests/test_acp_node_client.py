"""`trio-agents acp` driven by the official Node ACP client, `@agentclientprotocol/sdk` 0.25.1
(issue 6, acceptance 2; issue 17, acceptance 2: one permission request, allowed), and at
2.4.0 for the session methods ACP stabilised in 2026 (D507). The tests install each pinned
package with npm into `.ci/` (ignored by git) the first time they run."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

from agent_conformance._acp import _schema as schema

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / ".ci" / "node"
SDK = "@agentclientprotocol/sdk@0.25.1"
# The 2.x app API, stable v1 by default: resume, close and `$/cancel_request`.
NODE_2026_DIR = ROOT / ".ci" / "node-2.4.0"
SDK_2026 = "@agentclientprotocol/sdk@2.4.0"

pytestmark = pytest.mark.subprocess


def _installed(where: pathlib.Path, package: str) -> pathlib.Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        # A skip is not a pass: say what to install, as the sandbox's tests do.
        pytest.fail("the Node ACP client tests need node and npm: apt-get install nodejs npm")
    version = package.rsplit("@", 1)[1]
    marker = where / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    if not marker.exists() or f'"version": "{version}"' not in marker.read_text():
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(where), "--no-audit", "--no-fund", package],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return where


@pytest.fixture(scope="module")
def sdk_dir() -> pathlib.Path:
    return _installed(NODE_DIR, SDK)


@pytest.fixture(scope="module")
def sdk_2026_dir() -> pathlib.Path:
    return _installed(NODE_2026_DIR, SDK_2026)


def _drive(driver: str, sdk: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """Run `driver` (in tests/support) with the SDK installed in `sdk` against a server of
    this checkout storing in `tmp_path`; it prints PASS when every check of it held."""
    agent = [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(tmp_path / "s.db")]
    script = pathlib.Path(__file__).parent / "support" / driver
    result = subprocess.run(
        ["node", str(script), str(sdk), str(tmp_path), *agent],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("PASS")


def test_the_node_client_runs_the_echo_and_cancel_scenario(
    sdk_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    _drive("acp_node_client.mjs", sdk_dir, tmp_path)


def test_the_node_client_at_2_4_resumes_closes_deletes_and_cancels_a_request(
    sdk_2026_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    _drive("acp_node_client_2026.mjs", sdk_2026_dir, tmp_path)


def test_the_suites_schema_is_the_one_the_pinned_sdk_publishes(sdk_2026_dir: pathlib.Path) -> None:
    # The oracle of P7 and of every in-process server test (item 7 of issue 37): ACP v1's
    # JSON schema as the newest published SDK ships it, vendored unchanged.
    published = sdk_2026_dir / "node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
    vendored = pathlib.Path(schema.__file__).with_name("acp-schema-v1.json")
    assert vendored.read_bytes() == published.read_bytes()
    assert SDK_2026.endswith("@" + schema.SCHEMA_SOURCE.split()[1])
