"""One command's process: start it in its own session, pump its pipes, kill its group, read how
it ended. What the executor (`_shell/_executor.py`) does to every process, foreground or background,
apart from which command it is and who asked.

A kill is SIGTERM to the group, a grace period, then SIGKILL; a group with nobody left is never
signalled, since the kernel may have reused its id (D24a). Under bubblewrap, bwrap leads the
group: it is spared the SIGTERM, which would end its sandbox at once and take the grace from
the command's own processes, but not the SIGKILL (D132).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable, Mapping

import trio

from ._group import GROUP_POLL, group_gone, group_has_live_members, signal_group, signal_members
from ._network import attach
from ._output import OutputCollector, StreamOutput
from ._sandbox import SandboxedCommand, sandboxed_status
from ._types import RunResult, ShellSpec

__all__ = ["kill_at_once", "outcome", "pump", "spawn", "terminate_group"]

# The longest interval between looks for members of a sandbox's group that appeared after
# its SIGTERM: each look reads /proc, and the grace may be seconds long.
_LATE_MEMBER_POLL_MAX = 0.1


async def spawn(
    spec: ShellSpec, env: Mapping[str, str], *, sandboxed: SandboxedCommand | None = None
) -> trio.Process:
    """`bash -c` (or `sandboxed`, the same wrapped in a sandbox) in a new session (its own
    process group), stdin closed, with `env` only."""
    if sandboxed is None:
        return await trio.lowlevel.open_process(
            ["bash", "-c", spec.command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=spec.workdir,
            env=env,
            start_new_session=True,
        )
    try:
        process = _popen_here(sandboxed, spec.workdir, env)
    except BaseException:
        if sandboxed.network is not None:
            sandboxed.network.close()
        raise
    finally:
        sandboxed.close()
    handshake = sandboxed.network
    if handshake is None:
        await trio.lowlevel.checkpoint()
        return process
    try:
        sandboxed.helper = await attach(handshake, userns=sandboxed.userns)
    except BaseException:
        # The command never ran: bwrap still waits at its block descriptor.
        with trio.CancelScope(shield=True):
            kill_at_once([process])
            await process.wait()
        raise
    finally:
        handshake.close()
    return process


def _popen_here(sandboxed: SandboxedCommand, workdir: str, env: Mapping[str, str]) -> trio.Process:
    """Start bwrap from this thread, the one trio runs on, blocking it for the fork and exec
    (a few milliseconds). `trio.lowlevel.open_process` forks in a worker thread, and bwrap's
    --die-with-parent (the parent-death signal) is tied to the thread that forked, not the
    process: the worker went idle and exited after 10 s, and took with it every command it
    had started, a background job, a long build (D488). This thread lives as long as the
    runtime's commands may, and no longer."""
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    try:
        popen = subprocess.Popen(
            sandboxed.argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout_w,
            stderr=stderr_w,
            cwd=workdir,  # bwrap chdirs the command; this says at once that it is missing
            env=env,
            start_new_session=True,
            pass_fds=sandboxed.pass_fds,
            preexec_fn=sandboxed.preexec,
        )
    except BaseException:
        os.close(stdout_r)
        os.close(stderr_r)
        raise
    finally:
        os.close(stdout_w)
        os.close(stderr_w)
    # trio has no public way to adopt a started process; this is what open_process does.
    return trio._subprocess.Process._create(  # pyright: ignore[reportPrivateUsage]
        popen, None, trio.lowlevel.FdStream(stdout_r), trio.lowlevel.FdStream(stderr_r)
    )


async def pump(stream: trio.abc.ReceiveStream, collector: OutputCollector) -> None:
    """Feed everything `stream` delivers to `collector`, until the end of the stream."""
    async for chunk in stream:
        collector.feed(bytes(chunk))


async def terminate_group(process: trio.Process, grace: float, *, sandboxed: bool) -> None:
    """SIGTERM the process's group (under bwrap, every member but bwrap), wait up to `grace`
    for the whole group, SIGKILL whatever is left, and wait up to `grace` again for the kernel
    to remove it. Idempotent; errors for a group already gone are ignored. Always a
    checkpoint."""
    if process.returncode is not None and not group_has_live_members(process.pid):
        # All gone: do not signal a group id the kernel may have reused.
        await trio.lowlevel.checkpoint()
        return
    if not sandboxed:
        signal_group(process.pid, signal.SIGTERM)
    # The grace is for the whole group, not only the leader: a grandchild that cleans
    # up on TERM gets its chance too.
    with trio.move_on_after(grace):
        if sandboxed:
            await _terminate_sandbox(process)
        await process.wait()
        await group_gone(process.pid)
    signal_group(process.pid, signal.SIGKILL)
    await process.wait()
    # A signal is delivered asynchronously: only return once the kernel has removed
    # every member of the group (init reaps the reparented ones), or the grace is over.
    # No event tells us that processes which are not our children have exited (and the
    # group's members are unknown), so this is a bounded poll.
    with trio.move_on_after(grace):
        await group_gone(process.pid)


async def _terminate_sandbox(process: trio.Process) -> None:
    """SIGTERM every member of a sandbox's group but bwrap, until bwrap has exited.

    bwrap itself dies of SIGTERM, and its sandbox with it at once: the command's processes
    get the TERM and the grace, bwrap only the final SIGKILL. Members are signalled one by
    one, again as they appear: a TERM sent while bwrap still sets the sandbox up reaches
    only the namespace's init, which drops it (it has no handler), and the command, started
    a moment later on a loaded machine, would never see one (D500). The look is repeated
    with a growing interval: the window is the sandbox's start-up, and each look reads
    /proc."""
    sent: set[int] = set()
    interval = GROUP_POLL
    while process.returncode is None:
        signal_members(process.pid, signal.SIGTERM, spare=process.pid, sent=sent)
        with trio.move_on_after(interval):
            await process.wait()
        interval = min(interval * 2, _LATE_MEMBER_POLL_MAX)


def kill_at_once(processes: Iterable[trio.Process]) -> int:
    """SIGKILL the group of each of `processes` that may still have a member, without waiting;
    return how many groups were signalled. Never blocks."""
    signalled = 0
    for process in processes:
        # As in terminate_group: a group with nobody left may have had its id reused.
        if process.returncode is None or group_has_live_members(process.pid):
            signalled += signal_group(process.pid, signal.SIGKILL)
    return signalled


def outcome(
    process: trio.Process,
    *,
    timed_out: bool,
    cancelled: bool,
    timeout: float,
    stdout: StreamOutput,
    stderr: StreamOutput,
    sandboxed: bool = False,
) -> RunResult:
    """How the exited `process` ended, with what it printed; under bwrap, the command's own
    status, decoded from bwrap's."""
    code = process.returncode
    assert code is not None, "the process has not exited"
    if sandboxed:
        code = sandboxed_status(code)
    return RunResult(
        exit_code=code if code >= 0 else None,
        signal=signal.Signals(-code).name if code < 0 else None,
        timed_out=timed_out,
        cancelled=cancelled,
        timeout=timeout,
        stdout=stdout,
        stderr=stderr,
    )
