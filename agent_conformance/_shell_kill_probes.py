"""The shell machine's probes of how a command ends (rule S1): one that outlives its
timeout (ignoring SIGTERM, or trapping it, with a child that cleans up on it), and one its
caller cancels. Each runs on real processes and reads /proc; an outcome a starved command
on a loaded machine explains is tried again, and only one seen in every try is a violation
(D393)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Final

import trio

from trio_agents import RunResult, ShellExecutor, ShellRequest, ShellSpec

from ._properties import Property
from ._shell_probes import PAST_TIMEOUT, STDIN_WAIT
from ._shell_properties import GROUP_KILLED, OUTCOME_FIELDS

__all__ = ["PAST_TIMEOUT_TRIES", "probe_cancelled", "probe_past_timeout"]


# A past-timeout probe whose outcome a starved command explains (it was SIGKILLed before
# it ran its SIGTERM trap, or ran past the bound) is tried again, up to this many times in
# all; only an outcome seen in every try is a violation (D393).
PAST_TIMEOUT_TRIES = 4
# Real seconds a process of a group SIGKILLed as run() returned may take to leave the process
# table, on a loaded machine, before it counts as left alive (S1's margin; D399, D446).
SURVIVOR_MARGIN = 5.0
_POLL = 0.01  # seconds between looks for a leader's mark (another process's file: no event)
# What a try of the past-timeout probe returns when the command never started before its
# SIGKILL after the grace: nothing to judge (D506).
NEVER_STARTED: Final[tuple[Property, str]] = (OUTCOME_FIELDS, "the command never started")


async def probe_past_timeout(
    shell: ShellExecutor, workdir: str, *, deaf: bool, exit_code: int = 3
) -> None:
    """A foreground command, and a child of it, outlive the timeout: `deaf`, they ignore
    SIGTERM, so only SIGKILL after the grace ends them, within timeout + grace + a margin;
    otherwise the leader traps TERM and exits `exit_code` (timed out all the same, also when
    that is 0). Either way nothing of the group is left and the outcome's fields say exactly
    what happened.

    A loaded machine may not run the command's trap within a short grace: then a SIGKILL is
    what happens. So a SIGKILL of a trapping command is right when the command had begun
    its trap (it got SIGTERM) and the run lasted the timeout and the grace; one with no sign
    of SIGTERM, or a run past the bound, is tried again, and is a violation only when every
    try shows it. A try whose command never started (a loaded machine's sandbox had not
    started it when the SIGKILL came, after the grace) shows nothing, and spares the
    verdict (D506)."""
    unseen = 0
    for tried in range(1, PAST_TIMEOUT_TRIES + 1):
        starved = await _past_timeout_once(shell, workdir, deaf=deaf, exit_code=exit_code)
        if starved is None:
            return
        if starved is NEVER_STARTED:
            unseen += 1
            continue
        if tried == PAST_TIMEOUT_TRIES and not unseen:
            prop, happened = starved
            prop.fail(f"{happened} (in {tried} of {tried} tries)")


async def _past_timeout_once(
    shell: ShellExecutor, workdir: str, *, deaf: bool, exit_code: int
) -> tuple[Property, str] | None:
    """One try of `probe_past_timeout`: raises a violation no machine's speed explains;
    returns (property, what happened) for one a starved command may explain; None when the
    try showed everything right."""
    armed = os.path.join(workdir, f"armed-{time.monotonic_ns()}")
    termed = f"{armed}.term"
    # The trap's first act leaves a mark: the command got SIGTERM and ran. (A deaf command
    # ignores the signal, so its child inherits that; it has no trap to mark.)
    on_term = "''" if deaf else f"'echo > {termed}; exit {exit_code}'"
    # The leader writes its pid once the trap is set and the child runs. Its processes are
    # found by the `armed` path in their command lines, not by that pid: in a sandbox it is
    # a number of the sandbox's own PID namespace. A deaf leader's child inherits its deaf
    # ear; a trapping leader's child cleans up on SIGTERM for a moment after the leader has
    # gone, which the grace must cover too: it is the group's grace (S1).
    grace = float(getattr(shell, "grace", 3.0))
    cleanup = round(min(0.2, grace / 3), 3)
    child = f"(exec -a {armed}-child sleep 30)"
    if not deaf:
        on_child_term = f"'echo > {armed}.child-term; sleep {cleanup}; echo > {armed}.cleaned'"
        child = f"(trap {on_child_term} TERM; echo > {armed}.child-ready; {child} & wait)"
        # Which PID namespace it ran in: a sandbox of its own ends with its first process
        # (the leftovers die with it, D132), so there the grace cannot be the group's.
        child += f" & readlink /proc/self/ns/pid > {armed}.ns"
    command = f"trap {on_term} TERM; {child} & echo $$ > {armed}; wait; exit 7"
    spec = shell.resolve(ShellRequest(command, workdir=workdir, timeout=PAST_TIMEOUT))
    bound = spec.timeout + grace + max(0.5, grace)
    result, seconds, hung = await _run_bounded(shell, spec, armed, bound)
    trap_set = _read_pid(armed) is not None
    got_term = _exists(termed)
    OUTCOME_FIELDS.check(
        result.timeout == spec.timeout,
        f"the outcome's timeout is {result.timeout}, the spec's {spec.timeout}",
    )
    if hung:
        return GROUP_KILLED, (
            f"a command that ignores SIGTERM still ran {seconds:.2f}s after it started, with "
            f"a timeout of {spec.timeout}s and a grace of {grace}s (the machine SIGKILLed it)"
        )
    killed = (None, "SIGKILL", True, False)
    trapped = killed if deaf else (exit_code, None, True, False)
    if not trap_set:
        # SIGTERM came before the pid was written: before the trap was set (bash died of
        # it), or after it (the trap's outcome), on a machine slow enough. Both are right.
        expected: list[tuple[object, ...]] = [(None, "SIGTERM", True, False), trapped]
    else:
        survivors = await _still_marked(armed, SURVIVOR_MARGIN)
        GROUP_KILLED.check(
            not survivors,
            f"run() of a command past its timeout returned, leaving processes {survivors} of "
            f"its group alive {SURVIVOR_MARGIN:g} s later",
        )
        expected = [trapped]
    outcome = (result.exit_code, result.signal, result.timed_out, result.cancelled)
    what = "ignores SIGTERM" if deaf else f"traps SIGTERM and exits {exit_code}"
    wrong = (
        f"a command that {what}, past its timeout, reported (exit_code, signal, "
        f"timed_out, cancelled) = {outcome}, not {' or '.join(map(str, expected))}"
    )

    def group_grace() -> tuple[Property, str] | None:
        # Judged once the outcome is right: a wrong outcome is the finding to report.
        return None if deaf else _check_group_grace(armed, seconds, spec.timeout, grace, cleanup)

    if outcome in expected:
        return group_grace()
    if outcome == killed:
        # Killed before its trap ended (or before bash, starved, even set it or wrote its
        # pid: SIGKILL pending beats SIGTERM pending): right if SIGTERM came first and the
        # grace passed.
        if seconds < spec.timeout + grace:
            OUTCOME_FIELDS.fail(
                f"{wrong}: SIGKILLed {seconds:.2f}s after it started, before its timeout "
                f"({spec.timeout}s) and grace ({grace}s) had passed"
            )
        if got_term:
            return group_grace()
        if not trap_set:
            # The sandbox had not started the command by the end of the grace (a loaded
            # machine): the kill after the grace is right, and this try shows nothing of
            # the TERM it never saw (D506).
            return NEVER_STARTED
        return OUTCOME_FIELDS, f"{wrong}, and it never ran its SIGTERM trap"
    OUTCOME_FIELDS.fail(wrong)


def _check_group_grace(
    armed: str, seconds: float, timeout: float, grace: float, cleanup: float
) -> tuple[Property, str] | None:
    """The trapping leader's child set its own SIGTERM trap (it wrote `.child-ready`), and
    its trap cleans up for a moment. Unless the run lasted the timeout and the whole grace,
    that cleanup must have ended (`.cleaned`): a SIGKILL sooner cut the group's grace short,
    which no machine's speed explains. A child whose trap never ran is a starved outcome
    when the grace did pass (retried), a violation when the group was not even TERMed."""
    if not _exists(f"{armed}.child-ready"):
        return None  # SIGTERM came before the child set its trap: nothing to judge
    if _namespace(f"{armed}.ns") != os.readlink("/proc/self/ns/pid"):
        return None  # a PID namespace of its own (or unknown): it ends with its leader
    if _exists(f"{armed}.cleaned"):
        return None
    if seconds < timeout + grace:
        GROUP_KILLED.fail(
            f"the leader of a command past its timeout exited on SIGTERM, and its child, "
            f"which cleans up on SIGTERM for {cleanup}s, was SIGKILLed "
            f"{'during' if _exists(f'{armed}.child-term') else 'before'} its cleanup, "
            f"{seconds:.2f}s after the run started: before the timeout ({timeout}s) and the "
            f"grace ({grace}s) had passed, so the grace covered the leader, not the group"
        )
    if _exists(f"{armed}.child-term"):
        return None  # its cleanup outlasted the grace on a loaded machine: SIGKILL is right
    return GROUP_KILLED, (
        f"a child that traps SIGTERM, in the group of a command past its timeout, never ran "
        f"its trap ({seconds:.2f}s; grace {grace}s): its group got no SIGTERM"
    )


async def probe_cancelled(shell: ShellExecutor, workdir: str) -> None:
    """A foreground command, and a child of it, ignore SIGTERM; the caller cancels the run
    once both run. The cancel kills the whole group (S1): SIGTERM, the grace, SIGKILL, even
    though the caller is cancelled, so when `run` is left (Cancelled, or an outcome that
    says `cancelled`) nothing of the group is alive. A run not left within the grace and a
    margin is SIGKILLed from here and tried again; it is a violation only when every try
    shows it."""
    for tried in range(1, PAST_TIMEOUT_TRIES + 1):
        hung = await _cancelled_once(shell, workdir)
        if hung is None:
            return
        if tried == PAST_TIMEOUT_TRIES:
            GROUP_KILLED.fail(f"{hung} (in {tried} of {tried} tries)")


async def _cancelled_once(shell: ShellExecutor, workdir: str) -> str | None:
    armed = os.path.join(workdir, f"cancelled-{time.monotonic_ns()}")
    command = f"trap '' TERM; (exec -a {armed}-child sleep 30) & echo $$ > {armed}; wait; exit 7"
    # A timeout far past the cancel: only the cancel may end this command.
    spec = shell.resolve(ShellRequest(command, workdir=workdir, timeout=60.0))
    grace = float(getattr(shell, "grace", 3.0))
    result: RunResult | None = None
    cancelled_at: list[float] = []
    hung = False

    async def cancel_when_running(scope: trio.CancelScope) -> None:
        # Both processes are up once the leader wrote its pid (the child was started
        # first). A real process's file, read every 10 ms (a FIFO would block a thread on a
        # command that never writes); a start slower than 10 s is cancelled all the same.
        for _ in range(1000):
            if _read_pid(armed) is not None and len(_marked(armed)) >= 2:
                break
            await trio.sleep(0.01)
        cancelled_at.append(trio.current_time())
        scope.cancel()
        nonlocal hung
        await trio.sleep(grace + max(0.5, grace) + STDIN_WAIT)
        hung = True
        for pid in _marked(armed):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:
            nursery.start_soon(cancel_when_running, scope)
            result = await shell.run(spec)
        nursery.cancel_scope.cancel()
    # A SIGKILLed process needs the CPU once more to leave the process table: on a loaded
    # machine, up to five seconds (D399); one never SIGKILLed stays.
    survivors = await _still_marked(armed, SURVIVOR_MARGIN)
    if hung:
        return (
            f"a run cancelled by its caller, of a command that ignores SIGTERM, was not "
            f"left {grace + max(0.5, grace) + STDIN_WAIT:.2f}s after the cancel (grace "
            f"{grace}s; the machine SIGKILLed the group)"
        )
    for pid in survivors:  # the finding is that they were left; they go now
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    GROUP_KILLED.check(
        not survivors,
        f"run() of a command that ignores SIGTERM, cancelled by its caller, was left "
        f"({'Cancelled' if result is None else 'returning an outcome'}) with processes "
        f"{survivors} of its group alive: the kill stopped at the cancel",
    )
    if result is not None:
        OUTCOME_FIELDS.check(
            bool(cancelled_at) and result.cancelled,
            f"run() of a command cancelled by its caller returned an outcome with "
            f"cancelled={result.cancelled} (timed_out={result.timed_out})",
        )
    return None


async def _run_bounded(
    shell: ShellExecutor, spec: ShellSpec, armed: str, bound: float
) -> tuple[RunResult, float, bool]:
    """Run `spec`; if processes of its group still run `bound` seconds after the command was
    seen to start, SIGKILL them from here (so a run that never escalates still returns).
    Returns (result, seconds, whether they had to be killed from here).

    The bound counts from the leader's mark (`armed`), not from the call: on a loaded
    machine a sandbox may take longer to start than the timeout and the grace together,
    and the timeout is the command's, not its start's. A leader never seen (starved, and
    killed before it wrote its mark) is given the bound from the call, twice over. A group
    that is dead while run() has not returned is given the survivors' margin, then is a
    violation of its own: run() must return once its group is gone."""
    hung = False
    # trio's clock: the real one in a run, a test's own clock in a test of the probe.
    started = trio.current_time()

    async def watchdog() -> None:
        nonlocal hung
        with trio.move_on_after(bound):
            while not _exists(armed):  # noqa: ASYNC110 - another process's file
                await trio.sleep(_POLL)
        await trio.sleep(bound)
        alive = _marked(armed)
        if not alive:
            await trio.sleep(SURVIVOR_MARGIN)
            GROUP_KILLED.fail(
                f"run() of a command past its timeout had not returned "
                f"{trio.current_time() - started:.2f}s after it was called, its group dead"
            )
        hung = True
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watchdog)
        result = await shell.run(spec)
        nursery.cancel_scope.cancel()
    return result, trio.current_time() - started, hung


async def _still_marked(marker: str, margin: float) -> list[int]:
    """The live processes marked `marker` once `margin` seconds have passed, or none as soon
    as none is left: a process SIGKILLed just before run() returned may take a moment to die
    on a loaded machine (the runtime waits only its grace for that); one that was never
    killed is still there."""
    with trio.move_on_after(margin):
        while _marked(marker):  # noqa: ASYNC110 - no event for a stranger's exit
            await trio.sleep(0.01)
    return _marked(marker)


_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def _marked(marker: str) -> list[int]:
    """The live processes whose command line holds `marker`, from /proc. Zombies are dead,
    and so is a process with a SIGKILL pending: it was killed, and only waits for a CPU to
    leave, which a loaded machine may not give it for seconds (D525)."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker.encode() not in cmdline.read():
                    continue  # most are not: one read each, this runs every few ms
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                alive = stat_file.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
            if alive and not _kill_pending(entry):
                found.append(int(entry))
        except OSError:
            continue  # exited while we looked
    return found


def _kill_pending(pid: str) -> bool:
    """Whether process `pid` has a SIGKILL pending, for the process or one of its threads."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & _SIGKILL_BIT:
                return True
    return False


def _namespace(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read().strip() or None
    except OSError:
        return None


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _read_pid(path: str) -> int | None:
    try:
        with open(path) as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return None
