"""The foreground shell executor on real processes (issue 5, acceptance 1). Every test checks
the process table itself, not the executor's bookkeeping."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest
import trio

from trio_agents._shell._executor import ShellExecutor, ShellRequest

from .support.processes import gone, host_pid, with_marker

pytestmark = pytest.mark.subprocess


def executor(**kwargs: object) -> ShellExecutor:
    return ShellExecutor(grace=0.5, **kwargs)  # type: ignore[arg-type]


async def test_a_command_runs_and_reports_its_output_and_exit_code() -> None:
    ex = executor()
    result = await ex.run(ex.resolve(ShellRequest("echo out; echo err >&2; exit 3")))
    assert (result.exit_code, result.signal, result.timed_out) == (3, None, False)
    assert result.stdout.text == "out\n"
    assert result.stderr.text == "err\n"


async def test_a_timeout_kills_the_grandchild_too(tmp_path: pathlib.Path) -> None:
    pids = tmp_path / "pids"
    ex = executor(cwd=str(tmp_path))  # the sandbox lets a command write in its workdir
    # Found by its name afterwards: a sandboxed `$!` is a pid of the sandbox's own namespace.
    marker = f"grandchild-{tmp_path.name}"
    command = f"(exec -a {marker} sleep 1000) & echo $! > {pids}; wait"
    # One second is ample for bash to fork and write a pid even on a loaded machine.
    result = await ex.run(ex.resolve(ShellRequest(command, timeout=1.0)))
    assert result.timed_out
    assert int(pids.read_text()) > 0  # it was started
    assert with_marker(marker) == []


async def test_a_command_that_traps_term_and_exits_0_after_its_timeout() -> None:
    ex = executor()
    command = "trap 'exit 0' TERM; while true; do sleep 0.02; done"
    result = await ex.run(ex.resolve(ShellRequest(command, timeout=0.2)))
    assert (result.timed_out, result.exit_code, result.signal) == (True, 0, None)


async def test_a_command_that_kills_itself_reports_its_signal() -> None:
    ex = executor()
    result = await ex.run(ex.resolve(ShellRequest("kill -TERM $$")))
    assert (result.signal, result.exit_code) == ("SIGTERM", None)
    assert (result.timed_out, result.cancelled) == (False, False)


async def test_secrets_in_the_parent_environment_never_reach_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("MY_API_KEY", "CLIENT_SECRET", "GITHUB_TOKEN", "DB_PASSWORD", "aws_secret"):
        monkeypatch.setenv(name, "hunter2")
    monkeypatch.setenv("HARMLESS", "visible")  # not allowed: only passed when asked for
    monkeypatch.setenv("LC_HARMLESS", "allowed")
    ex = executor()
    result = await ex.run(ex.resolve(ShellRequest("env")))
    assert "hunter2" not in result.stdout.text
    assert "HARMLESS=visible" not in result.stdout.text
    assert "LC_HARMLESS=allowed" in result.stdout.text
    assert "NO_COLOR=1" in result.stdout.text
    passing = executor(pass_env=["HARMLESS", "GITHUB_TOKEN"], env={"EXTRA": "given"})
    passed = await passing.run(passing.resolve(ShellRequest("env")))
    lines = passed.stdout.text.splitlines()
    assert {"HARMLESS=visible", "GITHUB_TOKEN=hunter2", "EXTRA=given"} <= set(lines)
    assert "MY_API_KEY=hunter2" not in lines


async def test_output_over_the_cap_spills_the_complete_stream_privately() -> None:
    ex = executor(max_output_bytes=1000)
    result = await ex.run(ex.resolve(ShellRequest("seq 1 20000")))
    expected = "".join(f"{n}\n" for n in range(1, 20001))
    out = result.stdout
    assert out.truncated
    assert out.spill_path is not None
    assert len(out.text.encode()) <= 1000
    assert expected.endswith(out.text)
    assert await trio.Path(out.spill_path).read_text() == expected
    assert stat.S_IMODE(os.stat(out.spill_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(out.spill_path)).st_mode) == 0o700


async def test_output_exactly_at_the_cap_is_not_truncated() -> None:
    ex = executor(max_output_bytes=1000)
    result = await ex.run(ex.resolve(ShellRequest("head -c 1000 /dev/zero | tr '\\0' x")))
    assert result.stdout.text == "x" * 1000
    assert not result.stdout.truncated
    assert result.stdout.spill_path is None


async def test_cancelling_a_foreground_run_kills_its_whole_group(tmp_path: pathlib.Path) -> None:
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    ex = executor(cwd=str(tmp_path))
    command = f"sleep 1000 & echo $$ $! > {fifo}; wait"
    pids: list[int] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            await ex.run(ex.resolve(ShellRequest(command, timeout=100)))

        nursery.start_soon(run)
        # The FIFO read returns once bash has written both pids: then cancel the run.
        pids.extend(host_pid(int(pid)) for pid in (await trio.Path(fifo).read_text()).split())
        nursery.cancel_scope.cancel()
    leader, grandchild = pids
    assert gone(leader)
    assert gone(grandchild)


async def test_a_process_left_behind_by_a_finished_command_is_killed(
    tmp_path: pathlib.Path,
) -> None:
    pids = tmp_path / "pids"
    ex = executor(cwd=str(tmp_path))
    marker = f"left-behind-{tmp_path.name}"
    command = f"(exec -a {marker} sleep 1000) & echo $! > {pids}"
    result = await ex.run(ex.resolve(ShellRequest(command)))
    assert result.exit_code == 0
    assert int(pids.read_text()) > 0  # it was started
    assert with_marker(marker) == []


def test_resolve_fills_defaults_and_rejects_a_bad_timeout() -> None:
    ex = ShellExecutor(cwd="/tmp", timeout=5, max_timeout=10)
    spec = ex.resolve(ShellRequest("true", timeout=60))
    assert (spec.workdir, spec.timeout, spec.owner) == ("/tmp", 10, None)
    with pytest.raises(ValueError, match=r"request\.timeout"):
        ex.resolve(ShellRequest("true", timeout=0))
