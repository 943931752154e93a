"""The sandbox holds against a command that tries to get out (issue 16, acceptance 4).

Every command runs under bubblewrap: its own PID namespace (a kill of the server or of its
bwrap kills everything inside), a fresh /proc, the root read-only, a private /tmp, and the
store and the user's secrets hidden. Each test attacks from inside a real `bash` command and
checks what it got, and what is left, in this machine's /proc. bubblewrap is brought up by
the test session (tests/support/bwrap.py): these tests never skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import pytest
import trio

from trio_agents import (
    BashTools,
    Runtime,
    SandboxPolicy,
    SandboxUnavailableError,
    ShellExecutor,
    ShellRequest,
    SqliteStore,
    open_runtime,
)
from trio_agents.testing import ScriptedModel

from .support.processes import with_marker
from .support.sandbox_server import PYTHON, escapes

pytestmark = pytest.mark.subprocess

FAKE_SECRET = "sk-trio-agents-fake-secret-0123456789"
ESCAPES = 9
BOUND = 10.0  # seconds a real condition may take on two loaded cores


async def eventually(condition: str, check: object) -> None:
    """Poll `check()` (a real condition about other processes: no event tells us) until it
    is true, for at most BOUND seconds."""
    assert callable(check)
    with trio.move_on_after(BOUND):
        while not check():  # noqa: ASYNC110 - no event exists for another process's state
            await trio.sleep(0.02)
    assert check(), f"after {BOUND}s: not {condition}"


def escaped(marker: str) -> list[str]:
    """The escape techniques whose process is alive (found by its marker in /proc)."""
    names = list(escapes(marker, PYTHON))
    # The sleeper's argv[0] is exactly `{marker}-{n}` (`exec -a`): NUL-terminated in the
    # command line, unlike the job commands that mention it.
    return [names[n - 1] for n in range(1, ESCAPES + 1) if with_marker(f"{marker}-{n}\0")]


@asynccontextmanager
async def sandboxed_runtime(
    workdir: pathlib.Path, store: SqliteStore | None = None
) -> AsyncGenerator[Runtime, None]:
    shell = ShellExecutor(cwd=str(workdir), grace=0.3)
    async with open_runtime(store or SqliteStore(workdir / "sessions.db"), shell=shell) as rt:
        assert await rt.shell.check_sandbox()
        yield rt


async def start_escapes(rt: Runtime, owner: str, marker: str) -> None:
    for command in escapes(marker, PYTHON).values():
        await rt.shell.start(rt.shell.resolve(ShellRequest(command, owner=owner)))
    await eventually("every escape running", lambda: len(escaped(marker)) == ESCAPES)


async def test_S6_the_nine_escapes_die_with_their_agent(tmp_path: pathlib.Path) -> None:
    marker = f"sbx-{uuid.uuid4().hex[:12]}"
    bash = BashTools()
    async with sandboxed_runtime(tmp_path) as rt:
        await rt.load(bash)
        handle = await rt.agents.create(model=ScriptedModel(), tools=bash.tools, session_id="A")
        await start_escapes(rt, "A", marker)
        await handle.aclose()  # its teardown kills its jobs
        assert escaped(marker) == []  # nothing to wait for: the close waited
        assert with_marker(marker) == []  # nor the jobs' bwrap and bash


async def test_S6_the_nine_escapes_die_with_the_runtime(tmp_path: pathlib.Path) -> None:
    marker = f"sbx-{uuid.uuid4().hex[:12]}"
    async with sandboxed_runtime(tmp_path) as rt:
        await start_escapes(rt, "A", marker)
    assert escaped(marker) == []
    assert with_marker(marker) == []  # nor the jobs' bwrap and bash


async def test_without_the_sandbox_the_escapes_survive(tmp_path: pathlib.Path) -> None:
    """The control: the same commands unsandboxed get out (so the tests above can fail)."""
    marker = f"sbx-{uuid.uuid4().hex[:12]}"
    shell = ShellExecutor(cwd=str(tmp_path), grace=0.3, sandbox=None)
    try:
        async with open_runtime(SqliteStore(tmp_path / "s.db"), shell=shell) as rt:
            await start_escapes(rt, "A", marker)
        survivors = escaped(marker)
        assert {"setsid", "setsid -f", "set -m", "setpgid daemon", "setsid daemon"} <= set(
            survivors
        )
    finally:
        # The marked sleeps, and what `set -m` put in a group of its own without a marker
        # (its foreground `sleep`): everything still working in this test's directory.
        for pid in {*with_marker(marker), *working_in(tmp_path)}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def working_in(directory: pathlib.Path) -> list[int]:
    """The live processes whose working directory is `directory`, from /proc."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/cwd") == str(directory):
                    found.append(int(entry))
    return found


async def serve(workdir: pathlib.Path, marker: str) -> tuple[trio.Process, dict[str, str]]:
    """The stand-in server (tests/support/sandbox_server.py), once its escapes all run."""
    env = {**os.environ, "OPENAI_API_KEY": FAKE_SECRET}
    server = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.support.sandbox_server", str(workdir), marker],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=pathlib.Path(__file__).parent.parent,
    )
    assert server.stdout is not None
    output = b""
    with trio.fail_after(BOUND * 3):
        while not output.endswith(b"ready\n"):
            chunk = await server.stdout.receive_some()
            assert chunk, f"the server ended before it was ready: {output!r}"
            output += chunk
    await eventually("every escape running", lambda: len(escaped(marker)) == ESCAPES)
    return server, json.loads(output.splitlines()[0])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
async def test_S6_a_signalled_server_leaves_no_process(
    tmp_path: pathlib.Path, sig: signal.Signals
) -> None:
    marker = f"sbx-{uuid.uuid4().hex[:12]}"
    server, seen = await serve(tmp_path, marker)
    try:
        # What a command read of the server's environment: nothing, where the control
        # (an unsandboxed command) reads the secret from its parent, the server.
        assert FAKE_SECRET in seen["control"]
        assert FAKE_SECRET not in seen["sandboxed"]
        server.send_signal(sig)
        await server.wait()
        await eventually("every escape gone", lambda: escaped(marker) == [])
        await eventually("every job's bwrap and bash gone", lambda: with_marker(marker) == [])
    finally:
        server.kill()
        await server.wait()
        for pid in with_marker(marker):
            os.kill(pid, signal.SIGKILL)


async def test_S6_a_command_cannot_kill_another_sessions_job(tmp_path: pathlib.Path) -> None:
    marker = f"sbx-{uuid.uuid4().hex[:12]}"
    async with sandboxed_runtime(tmp_path) as rt:
        job = await rt.shell.start(
            rt.shell.resolve(ShellRequest(f"exec -a {marker} sleep 1000", owner="A"))
        )
        await eventually("A's job running", lambda: with_marker(marker) != [])
        # Every way a command finds a process: a /proc scan, ps, pkill, kill of each pid.
        # (Matched on argv[0], which only A's process has: the attack mentions it too.)
        attack = (
            "for p in /proc/[0-9]*; do "
            f"if [ \"$(tr '\\0' '\\n' < $p/cmdline 2>/dev/null | head -1)\" = {marker} ]; "
            "then echo found ${p#/proc/}; kill -9 ${p#/proc/}; fi; done; "
            f"echo ps=$(ps -eo args | grep -c '^{marker}'); pkill -9 -f '^{marker}'; "
            "echo pkill=$?"
        )
        result = await rt.shell.run(rt.shell.resolve(ShellRequest(attack, owner="B")))
        lines = result.stdout.text.split()
        assert "found" not in lines, result.stdout.text
        assert "ps=0" in lines, result.stdout.text
        assert "pkill=1" in lines, result.stdout.text  # "no process matched"
        assert rt.shell.result(job) is None  # A's job still runs
        assert with_marker(marker) != []
        await rt.shell.kill(job)


async def test_S7_a_command_cannot_read_the_store_or_another_sessions_spill_file(
    tmp_path: pathlib.Path,
) -> None:
    prompt = f"PROMPT-{uuid.uuid4().hex}"
    work = tmp_path / "work"
    work.mkdir()
    # The store in the workdir itself, the hardest place to hide it from.
    async with sandboxed_runtime(work, SqliteStore(work / "sessions.db")) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="A")
        handle.agent.send(prompt)
        await handle.agent.wait_idle()
        await rt.sessions.flush(handle.agent.session)
        on_disk = b"".join(p.read_bytes() for p in work.glob("sessions.db*") if p.is_file())
        assert prompt.encode() in on_disk  # it is there to be read
        job = await rt.shell.start(
            rt.shell.resolve(
                ShellRequest(f"head -c 200000 /dev/zero | tr '\\0' s; echo {prompt}", owner="A")
            )
        )
        done = await rt.shell.wait(job)
        spill = done.stdout.spill_path
        assert spill is not None
        assert prompt in await trio.Path(spill).read_text()
        attack = f"cat sessions.db* {spill}; grep -ral {prompt} . /tmp 2>/dev/null; true"
        result = await rt.shell.run(rt.shell.resolve(ShellRequest(attack, owner="B")))
        assert prompt not in result.stdout.text
        assert "No such file" in result.stderr.text  # the spill file is not there at all
        # Its own owner's commands read it: the tool result tells the agent to.
        own = await rt.shell.run(
            rt.shell.resolve(ShellRequest(f"grep -c {prompt} {spill}", owner="A"))
        )
        assert own.stdout.text.strip() == "1", own.stderr.text


async def test_S7_the_filesystem_is_read_only_but_the_workdir_and_a_private_tmp(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"  # under the workdir: the default secrets are hidden there too
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / ".netrc").write_text("machine x password hunter2")
    monkeypatch.setenv("HOME", str(home))  # the default secret paths are under ~
    outside = pathlib.Path(__file__).parent / f".sandbox-probe-{uuid.uuid4().hex}"
    # A name of its own: a /tmp/t the host already has would read as the sandbox's leak.
    private = f"/tmp/sandbox-tmp-{uuid.uuid4().hex}"
    shell = ShellExecutor(cwd=str(tmp_path), sandbox=SandboxPolicy(network=False))
    command = (
        f"echo w > in-workdir && echo ok-workdir; echo t > {private} && echo ok-tmp:$TMPDIR; "
        f"ls /tmp | grep -vc '^trio-agents-spill-'; echo x > {outside} || echo refused-outside; "
        f"cat {home}/.ssh/* {home}/.netrc; ls -A {home}/.ssh | wc -l; "
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '"
    )
    result = await shell.run(shell.resolve(ShellRequest(command)))
    out = result.stdout.text
    assert "ok-workdir" in out
    assert await trio.Path(tmp_path / "in-workdir").exists()
    assert "ok-tmp:/tmp" in out
    assert not await trio.Path(private).exists()
    assert "refused-outside" in out
    assert not await trio.Path(outside).exists()
    assert "PRIVATE KEY" not in out
    assert "hunter2" not in out
    # Its own /tmp: what it wrote, and the way to its workdir (which lies under /tmp here).
    top = tmp_path.relative_to("/tmp").parts[0]
    assert out.split("\n")[2].strip() == "2", out
    assert await trio.Path("/tmp", top).exists()
    assert out.split("\n")[-1].split() == ["lo"]  # --unshare-net: a network of its own


async def test_S7_run_by_root_a_command_has_no_capabilities_to_undo_its_sandbox(
    tmp_path: pathlib.Path,
) -> None:
    # As root, bwrap used to leave every capability: a command could remount / writable,
    # unmount /proc to see the host's processes, or mount a cgroup whose release_agent the
    # kernel then ran outside every namespace, owned by nothing (D384).
    if os.geteuid() != 0:  # unprivileged, bwrap drops them itself: nothing of ours to test
        pytest.fail("this test checks what root gets; run the suite as root, as CI does")
    outside = f"/var/tmp/sandbox-probe-{uuid.uuid4().hex}"
    shell = ShellExecutor(cwd=str(tmp_path))
    command = (
        "grep CapEff /proc/self/status; "
        "mount -o remount,bind,rw / 2>/dev/null && echo remounted; "
        f"echo x > {outside} 2>/dev/null && echo wrote-outside; "
        "umount -l /proc 2>/dev/null && echo unmounted-proc; "
        f"mkdir -p {tmp_path}/cg && mount -t cgroup -o none,name=probe cgroup {tmp_path}/cg "
        "2>/dev/null && echo mounted-cgroup; "
        "ls /proc | grep -c '^[0-9]'"
    )
    result = await shell.run(shell.resolve(ShellRequest(command)))
    out = result.stdout.text
    assert "CapEff:\t0000000000000000" in out, out
    for escaped in ("remounted", "wrote-outside", "unmounted-proc", "mounted-cgroup"):
        assert escaped not in out, out
    assert not await trio.Path(outside).exists()
    # It sees only its own processes: bwrap's init, the shell, ls and grep at most.
    assert int(out.split()[-1]) <= 5, out


async def test_S6_a_killed_sandboxed_job_gets_sigterm_and_the_grace_first(
    tmp_path: pathlib.Path,
) -> None:
    shell = ShellExecutor(cwd=str(tmp_path), grace=5.0)
    async with shell.running():
        command = (
            "trap 'echo cleaned > cleaned; exit 5' TERM; echo armed > armed; sleep 1000 & wait"
        )
        job = await shell.start(shell.resolve(ShellRequest(command)))
        await eventually("the trap set", (tmp_path / "armed").exists)
        result = await shell.kill(job)
    assert (result.exit_code, result.signal, result.cancelled) == (5, None, True)
    assert await trio.Path(tmp_path / "cleaned").read_text() == "cleaned\n"


async def test_a_machine_without_bubblewrap_refuses_or_falls_back_as_told(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = str(tmp_path / "no-bwrap")
    refusing = ShellExecutor(sandbox=SandboxPolicy(bwrap=missing))
    # The runtime opens (the check is the first command's, D170); no command runs.
    async with open_runtime(SqliteStore(tmp_path / "s.db"), shell=refusing) as rt:
        match = r"is not installed.*--allow-unsandboxed"
        with pytest.raises(SandboxUnavailableError, match=match):
            await rt.shell.run(rt.shell.resolve(ShellRequest(f"touch {tmp_path}/ran")))
        with pytest.raises(SandboxUnavailableError, match=match):
            await rt.shell.check_sandbox()
    assert not (tmp_path / "ran").exists()
    allowed = ShellExecutor(sandbox=SandboxPolicy(bwrap=missing, allow_unsandboxed=True))
    result = await allowed.run(allowed.resolve(ShellRequest("echo $$")))
    assert not allowed.sandboxed
    assert result.stdout.text.strip() != "2"  # a host pid: no namespace


@pytest.mark.parametrize("command", ["acp", "chat"])
async def test_the_cli_without_bubblewrap_refuses_in_one_line_or_says_it_falls_back(
    tmp_path: pathlib.Path, command: str
) -> None:
    # No bwrap on PATH (the interpreter is named by its full path, needing none).
    env = {**os.environ, "PATH": str(tmp_path / "empty"), "XDG_DATA_HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "trio_agents._cli", command, "--store", str(tmp_path / "s.db")]
    refused = await trio.run_process(
        argv, stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True, env=env,
        check=False,
    )  # fmt: skip
    said = refused.stderr.decode().splitlines()
    assert refused.returncode == 2, said
    assert len(said) == 1, said
    assert said[0].startswith(f"trio-agents {command}: cannot sandbox shell commands: bwrap")
    assert "--allow-unsandboxed" in said[0]
    allowed = await trio.run_process(
        [*argv, "--allow-unsandboxed"], stdin=subprocess.DEVNULL, capture_stdout=True,
        capture_stderr=True, env=env, check=False,
    )  # fmt: skip
    warned = [line for line in allowed.stderr.decode().splitlines() if "WITHOUT" in line]
    assert allowed.returncode == 0, allowed.stderr
    assert warned == [
        f"trio-agents {command}: shell commands run WITHOUT a sandbox: "
        "bwrap (bubblewrap) is not installed"
    ]
