"""The README's example runs, and the static checks the project promises pass.

They run as subprocesses so that `pytest` alone is the whole CI gate.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from .support.layout import render_map

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def tool(name: str) -> str:
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} is not installed; install the test extra: pip install -e '.[test]'"
    return found


def test_readme_example_runs_and_shows_a_cancelled_turn() -> None:
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Example\n\n```python\n(.*?)```", text, re.S)
    assert code, "README has no example block"
    result = run(sys.executable, "-c", code.group(1))
    assert result.returncode == 0, result.stderr
    assert "tool/result" in result.stdout
    assert "cancelled: True" in result.stdout
    assert "status after the block: closed" in result.stdout


CHECKED = ("trio_agents", "agent_conformance", "tests", "examples", "benchmarks", "scripts")


@pytest.mark.parametrize(
    "argv",
    [
        ("ruff", "check", *CHECKED),
        ("ruff", "format", "--check", *CHECKED),
        ("mypy",),
        ("pyright",),
    ],
    ids=["ruff", "ruff-format", "mypy", "pyright"],
)
def test_static_check_passes(argv: tuple[str, ...]) -> None:
    result = run(tool(argv[0]), *argv[1:])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readmes_map_is_the_layer_table() -> None:
    """README.md's "Layout" map is drawn from tests/support/layout.py, the one source: a
    module added, moved or put in another layer shows there. To redraw it, print
    `render_map(ROOT)` and paste it into the README's block."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"## Layout\n\n```text\n(.*?)```", text, re.S)
    assert found, "README has no Layout map (a ```text block right under '## Layout')"
    assert found.group(1) == render_map(ROOT)
