"""Spill files (issue 16, item 5): one private directory per session, held by descriptor and
never trusted by its path again. A directory that was removed, replaced or symlinked is
refused; another user cannot write into one; each is removed when its session closes, and
the executor's root when the executor does. Real processes, real files."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import sys

import pytest
import trio

from trio_agents import ShellExecutor, ShellRequest, SpillDirectoryError, ToolContext, ToolResult
from trio_agents.testing import ScriptedModel

from .support.helpers import bash_runtime

pytestmark = pytest.mark.subprocess

BIG = "seq 1 5000"  # 23,893 bytes: past the 1,000-byte cap below
EXPECTED = "".join(f"{n}\n" for n in range(1, 5001))


def executor() -> ShellExecutor:
    return ShellExecutor(grace=0.3, max_output_bytes=1000)


async def spill(ex: ShellExecutor, owner: str | None) -> str:
    result = await ex.run(ex.resolve(ShellRequest(BIG, owner=owner)))
    assert result.stdout.spill_path is not None, result.stdout
    return result.stdout.spill_path


async def test_a_sessions_spill_lands_in_its_own_private_directory_and_reads_back() -> None:
    ex = executor()
    async with ex.running():
        path = await spill(ex, "A")
        directory = ex.spill_directory("A")
        assert os.path.dirname(path) == directory
        assert await trio.Path(path).read_text() == EXPECTED
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        root = os.path.dirname(directory)
        assert stat.S_IMODE(os.lstat(root).st_mode) == 0o700
        assert os.listdir(root) == [os.path.basename(directory)]  # nothing else in it


async def test_concurrent_sessions_get_separate_directories() -> None:
    ex = executor()
    async with ex.running():
        paths: dict[str, str] = {}

        async def one(owner: str) -> None:
            paths[owner] = await spill(ex, owner)

        async with trio.open_nursery() as nursery:
            for owner in ("A", "B", "C"):
                nursery.start_soon(one, owner)
        directories = {owner: os.path.dirname(path) for owner, path in paths.items()}
        assert len(set(directories.values())) == 3
        for owner, directory in directories.items():
            assert ex.spill_directory(owner) == directory
            assert os.listdir(directory) == [os.path.basename(paths[owner])]
        assert len({os.path.dirname(d) for d in directories.values()}) == 1  # one root


async def test_a_replaced_directory_is_refused_and_nothing_lands_in_the_new_one(
    tmp_path: pathlib.Path,
) -> None:
    ex = executor()
    async with ex.running():
        first = await spill(ex, "A")
        directory = ex.spill_directory("A")
        os.rename(directory, tmp_path / "moved")  # what a command of the session could do
        os.mkdir(directory, 0o700)  # the impostor, at the same path
        with pytest.raises(SpillDirectoryError, match=f"{directory} was replaced"):
            ex.spill_directory("A")
        result = await ex.run(ex.resolve(ShellRequest(BIG, owner="A")))
        assert (result.stdout.truncated, result.stdout.spill_path) == (True, None)
        assert result.stdout.spill_error is not None
        assert "was replaced" in result.stdout.spill_error
        assert os.listdir(directory) == []  # nothing was written into the impostor
        assert not await trio.Path(first).exists()
        # Another session is not affected.
        assert os.path.dirname(await spill(ex, "B")) == ex.spill_directory("B")
        os.rmdir(directory)  # the impostor is not the executor's to remove
    # Everything else is removed, the root included.
    assert not await trio.Path(os.path.dirname(directory)).exists()


async def test_a_symlinked_directory_is_refused_and_the_agent_is_told(
    tmp_path: pathlib.Path,
) -> None:
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    async with bash_runtime() as (rt, bash):
        rt.shell.max_output_bytes = 1000
        bash_tool = next(t for t in bash.tools if t.name == "bash")
        context = ToolContext("A", "call-1", 1, 1)

        async def call(command: str) -> str:
            answer = await bash_tool({"command": command, "description": "test"}, context)
            assert isinstance(answer, ToolResult)
            return answer.content

        told = await call(BIG)
        path = told.rsplit("full output: ", 1)[1].rstrip("]")
        # The agent is told a path it can read with its own tool.
        assert await call(f"cat {path} | wc -l") == "5000"
        directory = rt.shell.spill_directory("A")
        shutil.rmtree(directory)
        os.symlink(attacker, directory)
        answer = await call(BIG)
        assert "full output: (unavailable: the spill directory" in answer
        assert "was replaced by a symlink" in answer
        assert os.listdir(attacker) == []
        with pytest.raises(SpillDirectoryError, match="symlink"):
            rt.shell.spill_directory("A")
        os.unlink(directory)  # the link is not the executor's to remove
    assert not await trio.Path(os.path.dirname(directory)).exists()
    assert await trio.Path(attacker).is_dir()  # and what it pointed to is left alone


async def test_a_removed_directory_is_refused_not_recreated() -> None:
    ex = executor()
    async with ex.running():
        directory = os.path.dirname(await spill(ex, "A"))
        shutil.rmtree(directory)
        with pytest.raises(SpillDirectoryError, match="is gone"):
            ex.spill_directory("A")
        result = await ex.run(ex.resolve(ShellRequest(BIG, owner="A")))
        assert result.stdout.spill_path is None
        assert not await trio.Path(directory).exists()


async def test_a_replaced_root_is_refused() -> None:
    ex = executor()
    async with ex.running():
        directory = os.path.dirname(await spill(ex, "A"))
        root = os.path.dirname(directory)
        os.rename(root, root + "-moved")
        try:
            os.mkdir(root, 0o700)
            os.mkdir(directory, 0o700)
            with pytest.raises(SpillDirectoryError, match=f"{root} was replaced"):
                ex.spill_directory("A")
        finally:
            shutil.rmtree(root + "-moved")
            shutil.rmtree(root)


async def test_a_background_jobs_spill_paths_are_checked_when_read(
    tmp_path: pathlib.Path,
) -> None:
    ex = executor()
    async with ex.running():
        job = await ex.start(ex.resolve(ShellRequest(BIG, owner="A")))
        await ex.wait(job)
        (path,) = ex.read_output(job).spill_paths
        directory = os.path.dirname(path)
        os.rename(directory, tmp_path / "moved")
        os.mkdir(directory, 0o700)
        assert ex.read_output(job, (0, 0)).spill_paths == ()
        os.rmdir(directory)
    assert not await trio.Path(os.path.dirname(directory)).exists()


async def test_closing_a_session_removes_its_directory_and_closing_the_executor_the_root() -> None:
    async with bash_runtime() as (rt, bash):
        rt.shell.max_output_bytes = 1000
        handles = {
            name: await rt.agents.create(model=ScriptedModel(), tools=bash.tools, session_id=name)
            for name in ("A", "B")
        }
        paths = {name: await spill(rt.shell, name) for name in handles}
        unowned = await spill(rt.shell, None)
        await handles["A"].aclose()
        assert not await trio.Path(os.path.dirname(paths["A"])).exists()
        assert await trio.Path(paths["B"]).exists()
        root = os.path.dirname(os.path.dirname(paths["B"]))
    assert not await trio.Path(root).exists()
    assert not await trio.Path(unowned).exists()


async def test_a_foreground_run_outside_running_spills_and_kill_owned_removes_it() -> None:
    ex = executor()
    path = await spill(ex, "A")
    assert await trio.Path(path).exists()
    await ex.kill_owned("A")
    assert not await trio.Path(os.path.dirname(path)).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
async def test_another_local_user_can_neither_write_nor_read_there() -> None:
    ex = executor()
    async with ex.running():
        path = await spill(ex, "A")
        directory = os.path.dirname(path)
        as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        for command in (
            ["touch", os.path.join(directory, "planted")],
            ["cat", path],
            ["ls", directory],
            ["touch", os.path.join(os.path.dirname(directory), "planted")],
        ):
            done = await trio.run_process([*as_nobody, *command], capture_stderr=True, check=False)
            assert done.returncode != 0, command
            assert b"Permission denied" in done.stderr, done.stderr
        assert os.listdir(directory) == [os.path.basename(path)]


async def test_an_executor_never_run_leaves_no_spill_directory_at_exit() -> None:
    script = (
        "import trio\n"
        "from trio_agents import ShellExecutor, ShellRequest\n"
        "ex = ShellExecutor(max_output_bytes=100)\n"
        "r = trio.run(ex.run, ex.resolve(ShellRequest('seq 1 1000', owner='A')))\n"
        "print(r.stdout.spill_path)\n"
    )
    done = await trio.run_process(
        [sys.executable, "-c", script], capture_stdout=True, capture_stderr=True
    )
    path = done.stdout.decode().strip()
    assert path.endswith("-stdout.log"), done
    assert not await trio.Path(os.path.dirname(os.path.dirname(path))).exists()


MAKE_ROOT = """
import os, signal, sys
from trio_agents._shell._spill import SpillRoot
root = SpillRoot(sys.argv[1])
print(root.path, flush=True)
if sys.argv[2] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.read()
"""


@pytest.mark.subprocess
def test_a_spill_root_a_killed_process_left_is_removed_by_the_next_one(
    tmp_path: pathlib.Path,
) -> None:
    # A server killed by SIGKILL cannot remove its spill root: the next root made beside it
    # does, once nobody holds it and it is old enough not to be one just made (D519).
    import subprocess
    import time

    from trio_agents._shell._spill import SpillRoot

    children: list[subprocess.Popen[str]] = []

    def make(how: str) -> pathlib.Path:
        child = subprocess.Popen(
            [sys.executable, "-c", MAKE_ROOT, str(tmp_path), how],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(child)
        assert child.stdout is not None
        return pathlib.Path(child.stdout.readline().strip())

    try:
        left, young, held = make("die"), make("die"), make("live")
        assert children[0].wait() == children[1].wait() == -9
        old = time.time() - 3600
        for path in (left, held):
            os.utime(path, (old, old))
        SpillRoot(str(tmp_path)).remove()
        assert not left.exists()
        assert held.exists()  # its process lives
        assert young.exists()  # too young to tell from one being made
    finally:
        for child in children:
            assert child.stdin is not None
            assert child.stdout is not None
            child.stdin.close()
            child.wait()
            child.stdout.close()
