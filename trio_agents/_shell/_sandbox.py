"""Whether this machine can sandbox commands with bubblewrap, found out once per process, and
the argv of one sandboxed command.

The check runs bwrap once with the options every command gets (a PID namespace, the root
read-only, a fresh /proc): a missing executable, a kernel or container that refuses user or
PID namespaces, or a bwrap too old for an option all show up there, as bwrap's own words.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import trio

from .._errors import SandboxUnavailableError
from ._sandbox_policy import SandboxPolicy, bwrap_argv, hidden_targets

__all__ = [
    "SandboxVerdict",
    "check_sandbox",
    "fallback",
    "mark_warned",
    "probe",
    "probe_now",
    "sandboxed_argv",
    "sandboxed_status",
    "spill_root",
    "unavailable",
]

logger = logging.getLogger("trio_agents.shell")

PROBE_TIMEOUT = 10.0  # seconds; bwrap starts in milliseconds, a hung one is a refusal


@dataclass(frozen=True, slots=True)
class SandboxVerdict:
    """`bwrap` is the executable to use, or None with `reason` saying what is missing."""

    bwrap: str | None
    reason: str


_verdicts: dict[str, SandboxVerdict] = {}  # by the bwrap asked for: one probe per process
_warned = False


async def probe(bwrap: str | None) -> SandboxVerdict:
    """`probe_now` in a worker thread, unless its verdict is cached. A checkpoint."""
    cached = _verdicts.get(bwrap or "")
    if cached is not None:
        await trio.lowlevel.checkpoint()
        return cached
    return await trio.to_thread.run_sync(probe_now, bwrap)


def probe_now(bwrap: str | None) -> SandboxVerdict:
    """Run bwrap once with the sandbox's options around `true`, blocking (for at most
    PROBE_TIMEOUT real seconds, whatever clock trio runs on); cached per executable, for the
    life of the process."""
    key = bwrap or ""
    cached = _verdicts.get(key)
    if cached is not None:
        return cached
    found = shutil.which(bwrap or "bwrap")
    if found is None:
        verdict = SandboxVerdict(None, f"{bwrap or 'bwrap'} (bubblewrap) is not installed")
    else:
        argv = bwrap_argv(
            found, SandboxPolicy(), command=["true"], workdir="/", hidden={}, as_root=_as_root()
        )
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT,
                check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            verdict = SandboxVerdict(None, f"{found} could not be run ({exc})")
        else:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            if done.returncode == 0:
                verdict = SandboxVerdict(found, "")
            else:
                why = said[-1] if said else f"exit status {done.returncode}"
                verdict = SandboxVerdict(None, f"{found} cannot make a sandbox here: {why}")
    return _verdicts.setdefault(key, verdict)


async def check_sandbox(policy: SandboxPolicy) -> str | None:
    """The bwrap executable to sandbox commands with, or None when the policy allows running
    them unsandboxed and the machine cannot sandbox (logged once per process). A checkpoint.

    Raises SandboxUnavailableError when the machine cannot sandbox and the policy does not
    allow the fallback.
    """
    global _warned
    verdict = await probe(policy.bwrap)
    if verdict.bwrap is not None:
        return verdict.bwrap
    if not policy.allow_unsandboxed:
        raise SandboxUnavailableError(unavailable(verdict.reason))
    if not _warned:
        _warned = True
        logger.warning("%s", fallback(verdict.reason))
    return None


def unavailable(reason: str) -> str:
    """The one line that says the machine cannot sandbox, and what to do."""
    return (
        f"cannot sandbox shell commands: {reason}; install bubblewrap "
        "(e.g. `apt-get install bubblewrap`), or allow unsandboxed commands "
        "(--allow-unsandboxed, or SandboxPolicy(allow_unsandboxed=True))"
    )


def fallback(reason: str) -> str:
    """The one line that says commands run unsandboxed, and why."""
    return f"shell commands run WITHOUT a sandbox: {reason}"


def mark_warned() -> None:
    """The fallback has been announced (by the command line, on stderr): do not log it."""
    global _warned
    _warned = True


def spill_root() -> tuple[str, ...]:
    """Where every session's spill files live, when the private /tmp does not cover it: this
    process's temporary directory, if TMPDIR puts it elsewhere."""
    root = os.path.realpath(tempfile.gettempdir())
    return () if root == "/tmp" else (root,)


_SIGNALS = frozenset(int(s) for s in signal.Signals)


def sandboxed_status(code: int) -> int:
    """A sandboxed command's returncode as if it were bash's own: bwrap reports a command
    killed by signal N as exit status 128 + N (as a shell does), -N again here."""
    return 128 - code if code > 128 and code - 128 in _SIGNALS else code


def _kinds(paths: Iterable[str]) -> dict[str, bool]:
    """The paths that exist, each mapped to whether it is a directory."""
    kinds: dict[str, bool] = {}
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # missing (or unreadable even to us): nothing to hide
        kinds[path] = stat.S_ISDIR(mode)
    return kinds


def sandboxed_argv(
    bwrap: str,
    policy: SandboxPolicy,
    command: Sequence[str],
    workdir: str,
    *,
    hidden: Iterable[str] = (),
    exposed: Iterable[str] = (),
) -> list[str]:
    """The bwrap argv for one command: the policy's hidden paths, plus `hidden`, as they are
    on disk now (a secret created later is hidden from the next command)."""
    targets = hidden_targets(policy, hidden, os.environ.get("HOME"))
    # Absolute: bwrap would take a relative one from the workdir it is started in.
    workdir = os.path.abspath(workdir)
    return bwrap_argv(
        bwrap,
        policy,
        command=command,
        workdir=workdir,
        hidden=_kinds(targets),
        exposed=exposed,
        as_root=_as_root(),
    )


def _as_root() -> bool:
    return os.geteuid() == 0
