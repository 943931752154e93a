"""The third-party agents' install script and the conformance guide name the same versions.

The script is not run here (D102: hundreds of MB, not in CI); what is checked is that a
reader who runs it installs exactly the versions the findings table was recorded on.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "install-third-party-agents.sh"
CHECK = ROOT / "scripts" / "check-third-party-agent.sh"
GUIDE = ROOT / "docs" / "conformance.md"


def script_pins() -> dict[str, tuple[str, str]]:
    """name -> (npm package, exact version), from the script's `agents` list."""
    pins: dict[str, tuple[str, str]] = {}
    for name, package, version in re.findall(
        r'^\s*"(\S+) (\S+) (\S+) \S+"$', SCRIPT.read_text(), re.M
    ):
        pins[name] = (package, version)
    return pins


def guide_rows() -> dict[str, str]:
    """name -> version, from the guide's table of third-party agents."""
    text = GUIDE.read_text()
    section = text.split("## Third-party ACP agents", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| (\S+) \| (\d+\.\d+\.\d+) \|", section, re.M))


def test_every_pin_is_exact_and_in_the_guide() -> None:
    pins = script_pins()
    assert set(pins) == {"qwen-code", "codex-acp", "opencode"}, pins
    rows = guide_rows()
    for name, (package, version) in pins.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name}: {version} is not exact"
        assert rows.get(name) == version, f"{name}: script pins {version}, guide {rows.get(name)}"
        assert f"{package}@{version}" in GUIDE.read_text(), f"{package}@{version} not in guide"


@pytest.mark.parametrize("script", [SCRIPT, CHECK], ids=["install", "check"])
def test_scripts_are_executable_bash_that_parses(script: pathlib.Path) -> None:
    assert script.stat().st_mode & 0o111, f"{script.name} is not executable"
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    result = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_the_check_script_knows_every_pinned_agent_and_its_templates_exist() -> None:
    text = CHECK.read_text()
    for name in script_pins():
        assert f"\n  {name})" in text, f"check-third-party-agent.sh has no case for {name}"
    templates = re.findall(r"=@\$root/(scripts/third-party/[\w.-]+)", text)
    assert len(templates) == 2, templates
    for template in templates:
        assert "{base_url}" in (ROOT / template).read_text(), f"{template} never names {{base_url}}"


def test_the_check_script_refuses_an_agent_that_is_not_installed(tmp_path: pathlib.Path) -> None:
    result = subprocess.run(
        [str(CHECK), "qwen-code"],
        env={"THIRD_PARTY": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"qwen-code is not installed in {tmp_path}: run scripts/install-third-party-agents.sh"
    ]


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
