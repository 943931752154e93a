"""The shell executor's plain data: what a caller asks for (`ShellRequest`), the resolved
command (`ShellSpec`), how a command ended (`RunResult`) and a background job's output read
(`JobOutput`). Pure (no trio import): frozen values the executor, the bash tools and the
conformance machine all pass around, apart from the processes that produce them."""

from __future__ import annotations

from dataclasses import dataclass

from ._output import StreamOutput

__all__ = ["JobOutput", "RunResult", "ShellRequest", "ShellSpec"]


@dataclass(frozen=True, slots=True)
class ShellRequest:
    """What a caller asks for; `ShellExecutor.resolve` fills in every default.

    command: run as `bash -c command`.
    workdir: where to run it; a relative one is taken from the executor's `cwd` (None: `cwd`
        itself).
    timeout: seconds the command may run in the foreground (None: the executor's default).
    owner: the session the command belongs to: its spill directory, and for a background
        job the owner token it is stored with (None: unowned, the shared directory).
    root: the directory a sandboxed command may write, which holds `workdir` (the session's
        working directory; a relative one is taken from `cwd`; None: the workdir itself).
    """

    command: str
    workdir: str | None = None
    timeout: float | None = None
    owner: str | None = None
    root: str | None = None


@dataclass(frozen=True, slots=True)
class ShellSpec:
    """A fully resolved command. `owner` is required but may be None: a forgotten owner is
    a visible None, never a missing field. The executor stores it and never interprets it,
    beyond keeping one spill directory per owner.

    command: run as `bash -c command`.
    workdir: the directory to run it in.
    timeout: seconds it may run in the foreground (`run`); a background job has none.
    root: the directory a sandboxed command may write (None: `workdir`); the bash tool makes
        it the session's working directory, and keeps `workdir` inside it (D485).
    """

    command: str
    workdir: str
    timeout: float
    owner: str | None
    root: str | None = None


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a command ended, and what it printed. The fields are independent: a command
    that traps TERM and exits 0 after its timeout has `timed_out=True, exit_code=0`.

    exit_code: the leader's exit status, None when a signal ended it.
    signal: the signal that ended the leader (e.g. `"SIGTERM"`), None when it exited.
    timed_out: whether the foreground timeout expired (never for a background job).
    cancelled: whether the executor killed it (`kill`, an owner closing, the executor
        closing) rather than it ending by itself.
    timeout: the spec's timeout in seconds (a background job's was not applied).
    stdout: what it wrote to stdout: the retained tail, and the spill file past the cap.
    stderr: the same for stderr.
    """

    exit_code: int | None  # None when a signal ended the process
    signal: str | None  # e.g. "SIGTERM"
    timed_out: bool
    cancelled: bool
    timeout: float
    stdout: StreamOutput
    stderr: StreamOutput


@dataclass(frozen=True, slots=True)
class JobOutput:
    """Output of a background job since given offsets (stdout, stderr), and its state.

    `lossy` means part of the output since the offsets was dropped from memory; the complete
    streams are in `spill_paths`. `result` is set once the job is `done`.

    text: the output since the offsets: stdout, then `[stderr]` and stderr.
    next_offsets: the (stdout, stderr) offsets the next read starts from.
    """

    text: str
    next_offsets: tuple[int, int]
    lossy: bool
    spill_paths: tuple[str, ...]
    done: bool
    result: RunResult | None
