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


def test_script_is_executable_bash_that_parses() -> None:
    assert SCRIPT.stat().st_mode & 0o111, "the install script is not executable"
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    result = subprocess.run([bash, "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_prefix_is_gitignored() -> None:
    assert ".third-party/" in (ROOT / ".gitignore").read_text().splitlines()
