"""The copies that let the tests run as `nobody` from a checkout closed to others (D380):
each is whole, nobody can use it, and a tree nobody can already read is not copied."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest

from .support import unprivileged


def _as_nobody() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.fixture
def closed_dir() -> Iterator[pathlib.Path]:
    """A directory only its owner may enter, as `mktemp -d` makes it."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="trio-agents-closed-"))
    assert path.stat().st_mode & 0o777 == 0o700
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_the_requirements_are_the_packages_own_without_the_extras() -> None:
    names = {dist.metadata["Name"].lower() for dist in unprivileged.requirements("trio-agents")}
    assert {"trio", "hypothesis", "httpx", "h11", "mcp", "pydantic", "outcome"} <= names
    assert not names & {"pytest", "psycopg", "pgserver", "opentelemetry-sdk"}, names


@pytest.mark.subprocess
def test_the_copied_package_imports_and_serves_on_its_own() -> None:
    target = pathlib.Path(tempfile.mkdtemp(prefix="trio-agents-pycopy-"))
    try:
        target.chmod(0o755)
        unprivileged.copy_python(target / "python")
        script = (
            "import sys, trio, mcp, pydantic, trio_agents._cli as cli\n"
            "print(trio.__file__); print(cli.__file__)\n"
            "sys.argv = ['trio-agents', '--version']; cli.main()\n"
        )
        done = subprocess.run(
            [*_as_nobody(), sys.executable, "-c", script],
            env={"PYTHONPATH": str(target / "python"), "PATH": os.environ["PATH"]},
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        trio_file, cli_file, version = done.stdout.splitlines()
        assert trio_file.startswith(str(target))
        assert cli_file.startswith(str(target))
        assert version.startswith("trio-agents ")
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_a_tree_nobody_can_read_is_used_where_it_is() -> None:
    open_dir = pathlib.Path(tempfile.mkdtemp(prefix="trio-agents-opened-"))
    try:
        open_dir.chmod(0o755)
        (open_dir / "bin").mkdir()
        (open_dir / "bin" / "run").write_text("")
        assert unprivileged.open_to_nobody(open_dir, ["bin"], "bin/run") == open_dir
    finally:
        shutil.rmtree(open_dir, ignore_errors=True)


@pytest.mark.subprocess
def test_a_closed_tree_is_copied_whole_where_nobody_can_run_it(closed_dir: pathlib.Path) -> None:
    # A binary in `bin` that finds its neighbour in `lib` by a relative path, as
    # PostgreSQL's do: both copied, at the same relative places.
    (closed_dir / "tool" / "bin").mkdir(parents=True)
    (closed_dir / "tool" / "lib").mkdir()
    (closed_dir / "tool" / "lib" / "word").write_text("found\n")
    run = closed_dir / "tool" / "bin" / "run"
    run.write_text('#!/bin/sh\ncat "$(dirname "$0")/../lib/word"\n')
    run.chmod(0o755)
    copy = unprivileged.open_to_nobody(closed_dir, ["tool"], "tool/bin/run")
    if os.geteuid() != 0:
        assert copy == closed_dir  # not root: we read it ourselves
        return
    assert copy != closed_dir
    assert not unprivileged.readable_by_nobody(run)
    assert unprivileged.readable_by_nobody(copy / "tool" / "bin" / "run")
    done = subprocess.run(
        [*_as_nobody(), str(copy / "tool" / "bin" / "run")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "found\n"), done.stderr
    # Made once in a process: asked again, the same copy.
    assert unprivileged.open_to_nobody(closed_dir, ["tool"], "tool/bin/run") == copy


def test_a_dead_processs_copies_are_swept_and_a_live_ones_kept() -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    made: list[pathlib.Path] = []
    try:
        for owner in (dead, str(os.getpid())):
            path = pathlib.Path(tempfile.mkdtemp(prefix=unprivileged.PREFIX))
            (path / "owner").write_text(owner)
            made.append(path)
        swept = unprivileged.sweep_dead_copies()
        assert made[0] in swept
        assert not made[0].exists()
        assert made[1] not in swept
        assert made[1].exists()
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
