"""The shell executor: commands as `bash -c` in their own process group, on trio subprocesses.

Every command runs in a new session (so its own process group), with stdin closed and an
environment scrubbed of names that look like credentials (KEY, SECRET, TOKEN, PASSWORD). A
timeout or a cancellation kills the whole group: SIGTERM, a grace period, SIGKILL. When a
foreground command's leader exits, whatever it left running in its group is killed the same
way, so a foreground call never leaves a process behind (the most reported defect in peer
agents is orphaned processes).

Outcome fields are independent: a command that traps TERM and exits 0 after its timeout
reports `timed_out=True, exit_code=0, signal=None`.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import trio

from .collector import OutputCollector, StreamOutput

__all__ = ["RunResult", "ShellExecutor", "ShellRequest", "ShellSpec", "scrubbed_environment"]

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD", re.IGNORECASE)
QUIET_TOOLS: Mapping[str, str] = {
    "NO_COLOR": "1",
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}


def scrubbed_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) without credential-like names, plus
    settings that keep tools from paging or colouring their output."""
    source = os.environ if base is None else base
    env = {name: value for name, value in source.items() if not SECRET_NAME.search(name)}
    env.update(QUIET_TOOLS)
    return env


@dataclass(frozen=True, slots=True)
class ShellRequest:
    """What a caller asks for; `ShellExecutor.resolve` fills in every default."""

    command: str
    workdir: str | None = None
    timeout: float | None = None
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class ShellSpec:
    """A fully resolved command. `owner` is required but may be None: a forgotten owner is
    a visible None, never a missing field. The executor stores it and never interprets it."""

    command: str
    workdir: str
    timeout: float
    owner: str | None


@dataclass(frozen=True, slots=True)
class RunResult:
    exit_code: int | None  # None when a signal ended the process
    signal: str | None  # e.g. "SIGTERM"
    timed_out: bool
    cancelled: bool
    timeout: float
    stdout: StreamOutput
    stderr: StreamOutput


class ShellExecutor:
    """Runs commands. `timeout`, `max_timeout` and `grace` are seconds."""

    def __init__(
        self,
        *,
        cwd: str | None = None,
        timeout: float = 120.0,
        max_timeout: float = 600.0,
        max_output_bytes: int = 64_000,
        grace: float = 3.0,
    ) -> None:
        for name, value in (
            ("timeout", timeout),
            ("max_timeout", max_timeout),
            ("max_output_bytes", max_output_bytes),
            ("grace", grace),
        ):
            if not (0 < value < math.inf):
                raise ValueError(f"{name} must be positive and finite, got {value!r}")
        self.cwd = cwd
        self.timeout = timeout
        self.max_timeout = max_timeout
        self.max_output_bytes = max_output_bytes
        self.grace = grace

    def resolve(self, request: ShellRequest) -> ShellSpec:
        """Fill every default: workdir, the timeout (capped at `max_timeout`), the owner."""
        if request.timeout is not None and not (0 < request.timeout < math.inf):
            raise ValueError(
                f"request.timeout must be a positive number of seconds, got {request.timeout!r}"
            )
        timeout = min(request.timeout or self.timeout, self.max_timeout)
        workdir = request.workdir or self.cwd or os.getcwd()
        return ShellSpec(request.command, workdir, timeout, request.owner)

    async def run(self, spec: ShellSpec) -> RunResult:
        """Run `spec` in the foreground. Returns for any exit, timeout included; raises only
        when the command cannot be started (a bad workdir, no bash). If the caller is
        cancelled, the group is killed (shielded, bounded by the grace) and Cancelled
        propagates."""
        process = await trio.lowlevel.open_process(
            ["bash", "-c", spec.command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=spec.workdir,
            env=scrubbed_environment(),
            start_new_session=True,
        )
        out = OutputCollector(self.max_output_bytes, "stdout")
        err = OutputCollector(self.max_output_bytes, "stderr")
        timed_out = False
        try:
            async with trio.open_nursery() as nursery:
                assert process.stdout is not None
                assert process.stderr is not None
                nursery.start_soon(_pump, process.stdout, out)
                nursery.start_soon(_pump, process.stderr, err)
                with trio.move_on_after(spec.timeout) as timer:
                    await process.wait()
                timed_out = timer.cancelled_caught
                # Timed out, or the leader exited: nothing of this group may outlive the call.
                await self.kill_group(process)
                # A process that escaped the group could hold the pipes open forever.
                nursery.cancel_scope.deadline = trio.current_time() + self.grace
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.kill_group(process)
            raise
        finally:
            stdout, stderr = out.finish(), err.finish()
        code = process.returncode
        assert code is not None
        return RunResult(
            exit_code=code if code >= 0 else None,
            signal=signal.Signals(-code).name if code < 0 else None,
            timed_out=timed_out,
            cancelled=False,
            timeout=spec.timeout,
            stdout=stdout,
            stderr=stderr,
        )

    async def kill_group(self, process: trio.Process) -> None:
        """SIGTERM the process's group, wait up to the grace for the leader, then SIGKILL
        whatever of the group is left. Idempotent; errors for a group already gone are
        ignored."""
        _signal_group(process.pid, signal.SIGTERM)
        with trio.move_on_after(self.grace):
            await process.wait()
        _signal_group(process.pid, signal.SIGKILL)
        await process.wait()
        # A signal is delivered asynchronously: only return once the kernel has removed
        # every member of the group (init reaps the reparented ones), or the grace is over.
        # No event tells us that processes which are not our children have exited (and the
        # group's members are unknown), so this is a bounded poll.
        with trio.move_on_after(self.grace):
            while _signal_group(process.pid, 0):  # noqa: ASYNC110
                await trio.sleep(GROUP_POLL)


GROUP_POLL = 0.005  # seconds between checks that a killed group is gone


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False if the group no longer exists (or is not ours)."""
    if pgid <= 0:
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _pump(stream: trio.abc.ReceiveStream, collector: OutputCollector) -> None:
    async for chunk in stream:
        collector.feed(bytes(chunk))
