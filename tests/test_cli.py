"""`trio-agents conformance` passes on the built-in runtime and fails on a known-bad one."""

from __future__ import annotations

import pytest

from trio_agents.cli import main


def test_conformance_passes_on_the_builtin_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--max-examples", "30"]) == 0
    out = capsys.readouterr().out
    assert "agent machine: passed, " in out


def test_conformance_fails_on_a_known_bad_target(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["conformance", "--target", "tests.known_bad:idle_cancel_emits", "--max-examples", "300"]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "agent machine: FAILED" in out


def test_conformance_rejects_a_malformed_target() -> None:
    with pytest.raises(SystemExit, match=r"package\.module:factory"):
        main(["conformance", "--target", "no_colon_here"])
