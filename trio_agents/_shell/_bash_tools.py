"""The `BashTools` plugin: the model-facing `bash`, `bash_output` and `bash_kill` tools.

Ownership lives on the job inside the executor (`rt.shell`), not in this plugin: the caller's
token is the calling agent's id, stamped on every background job it starts. Reloading the
plugin therefore changes nothing about who may read or kill a job (rule S3). The plugin only
holds what belongs to its fiber: the binding of its tools to the runtime and the job-done
listener that turns a finished job into a notice for its owner (rule S4). A job that
finishes while the plugin is unloaded (during a reload) loses its notice; its output stays
readable.

The tool objects are stable: an agent created with `bash_tools.tools` keeps them across
reloads. While the plugin is not loaded they answer with an error the model can read.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import trio

from .._errors import (
    AgentClosedError,
    AlreadyLoadedError,
    SandboxUnavailableError,
    ShellClosedError,
)
from .._tool._seam import Tool, ToolContext, ToolResult
from ._executor import JobOutput, RunResult, ShellExecutor, ShellRequest
from ._output import StreamOutput
from ._types import ShellSpec

if TYPE_CHECKING:
    from .._fiber import Fiber
    from .._runtime import Runtime

__all__ = ["BashTools", "Foreground", "failed", "render_result", "running_elsewhere", "status_line"]

Foreground = Callable[[ShellSpec, "ToolContext"], Awaitable["ToolResult"]]
"""Runs a foreground `bash` command somewhere other than the executor (an ACP client's
terminal): given the resolved command and the call, it answers the call's result."""


class BashTools:
    """A plugin (`await rt.load(bash_tools)`) providing `bash`, `bash_output`, `bash_kill`.

    Give `bash_tools.tools` to the agents that may use a shell. Load one instance per
    runtime; `rt.reload(bash_tools)` re-binds the same tool objects.

    name: the plugin's name; `Runtime.load` names the plugin's fiber after it.
    tools: the `bash`, `bash_output` and `bash_kill` tools, the same objects for the life of
        the instance; while the plugin is not loaded they answer with an error result.
    """

    name = "bash-tools"

    def __init__(self) -> None:
        self._runtime: Runtime | None = None
        # Each tool asks for the runtime the plugin is bound to now (None while unloaded).
        self.tools: tuple[Tool, ...] = (
            _Bash(self._bound),
            _BashOutput(self._bound),
            _BashKill(self._bound),
        )

    async def apply(self, fiber: Fiber) -> None:
        """Bind the tools to `fiber`'s runtime and route finished jobs' notices to their
        owners, until `fiber` closes. Always a checkpoint. Raises ValueError if this
        instance is loaded already (in this runtime or another)."""
        if self._runtime is not None:
            raise AlreadyLoadedError(
                "this BashTools is already loaded in a runtime; use rt.reload() to apply it "
                "again, or make another instance for another runtime"
            )
        runtime = fiber.runtime
        self._runtime = runtime
        fiber.callback(self._unbind)
        # Pushed last, so it runs first: no notice is delivered by a half-unloaded plugin.
        fiber.callback(runtime.shell.on_job_done(self._on_job_done))
        await trio.lowlevel.checkpoint()

    def _unbind(self) -> None:
        self._runtime = None

    def _bound(self) -> Runtime | None:
        return self._runtime

    def _on_job_done(self, job_id: str, owner: str | None, result: RunResult) -> None:
        """Route a finished job's notice to the live agent whose id is its owner; drop it
        when there is no owner or the owner is gone."""
        runtime = self._runtime
        if owner is None or runtime is None or result.cancelled:
            return  # unowned, unloaded, or killed (whoever killed it has the outcome)
        agent = runtime.agents.get(owner)
        if agent is None:
            return
        # AgentClosedError: it closed between the lookup and the inject, so it is gone.
        with contextlib.suppress(AgentClosedError):
            agent.inject(
                f"background job {job_id} finished {status_line(result)}. "
                "Read its output with bash_output."
            )


UNAVAILABLE = ToolResult(
    "the bash tools are not loaded right now (their plugin is closed or being reloaded); "
    "try again later",
    is_error=True,
)


def _error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


class _BashToolBase:
    name = ""
    description = ""
    parameters: Mapping[str, Any] = {}

    def __init__(self, bound: Callable[[], Runtime | None]) -> None:
        self._bound = bound

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        runtime = self._bound()
        if runtime is None:
            await trio.lowlevel.checkpoint()
            return UNAVAILABLE
        return await self.run(runtime, arguments, context)

    async def run(
        self, runtime: Runtime, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult:  # pragma: no cover - overridden
        raise NotImplementedError


class _Bash(_BashToolBase):
    """`bash`; `foreground`, when given, runs foreground commands instead of the executor
    (background jobs stay on the executor: `bash_output`, `bash_kill` and the job-done
    notices are the executor's)."""

    name = "bash"
    description = (
        "Run a shell command with `bash -c` in a fresh shell. Foreground calls return its "
        "output and exit status; with run_in_background the command becomes a background "
        "job whose output you read with bash_output and which you stop with bash_kill."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run."},
            "description": {
                "type": "string",
                "description": "What the command does, in 5-10 words (shown to the user).",
            },
            "timeout_ms": {
                "type": "number",
                "description": "Foreground timeout in milliseconds (capped by the runtime).",
            },
            "workdir": {
                "type": "string",
                "description": "Directory to run in; a relative path is taken from the "
                "session's working directory.",
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Start the command as a background job and return at once.",
            },
        },
        "required": ["command", "description"],
        "additionalProperties": False,
    }

    def __init__(
        self, bound: Callable[[], Runtime | None], foreground: Foreground | None = None
    ) -> None:
        super().__init__(bound)
        self._foreground = foreground

    def elsewhere(self, foreground: Foreground) -> _Bash:
        """This tool, bound as it is, with its foreground commands run by `foreground`."""
        return _Bash(self._bound, foreground)

    async def run(
        self, runtime: Runtime, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            await trio.lowlevel.checkpoint()
            return _error(f"invalid command {command!r}: give a non-empty string")
        description = arguments.get("description")
        if not isinstance(description, str) or not description.strip():
            await trio.lowlevel.checkpoint()
            return _error(
                f"invalid description {description!r}: say in 5-10 words what the command does"
            )
        timeout_ms = arguments.get("timeout_ms")
        if timeout_ms is not None and (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, int | float)
            or not (0 < timeout_ms < math.inf)
        ):
            await trio.lowlevel.checkpoint()
            return _error(f"invalid timeout_ms {timeout_ms!r}: give a positive number")
        background = arguments.get("run_in_background", False)
        if not isinstance(background, bool):
            await trio.lowlevel.checkpoint()
            return _error(f"invalid run_in_background {background!r}: give true or false")
        shell = runtime.shell
        place = _place(runtime, context, arguments.get("workdir"))
        if isinstance(place, ToolResult):
            return place
        root, workdir = place
        request = ShellRequest(
            command,
            workdir=workdir,
            root=root,
            timeout=timeout_ms / 1000 if timeout_ms is not None else None,
            # The agent's id: a background job's owner, and for every command the session
            # whose spill directory its output goes to.
            owner=context.agent_id,
        )
        spec = shell.resolve(request)
        if not background and self._foreground is not None:
            return await self._foreground(spec, context)
        try:
            if background:
                job_id = await shell.start(spec)
                return ToolResult(f"started background job {job_id}")
            result = await shell.run(spec)
        except OSError as exc:
            return _error(f"cannot run the command in {spec.workdir!r}: {exc}")
        except ShellClosedError as exc:
            return _error(f"cannot start a job now: {exc}")
        except SandboxUnavailableError as exc:
            return _error(str(exc))
        return ToolResult(render_result(result), is_error=failed(result))


def running_elsewhere(tools: Sequence[Tool], foreground: Foreground) -> tuple[Tool, ...]:
    """`tools` with their `bash` tool (a `BashTools`' one, bound as it is) replaced by one
    whose foreground commands `foreground` runs; any other tool as it is."""
    return tuple(tool.elsewhere(foreground) if isinstance(tool, _Bash) else tool for tool in tools)


def failed(result: RunResult) -> bool:
    """Whether a foreground command failed: it exited non-zero, died of a signal, timed out
    or was killed. Its result is then an error result (D210), as an editor shows it."""
    return (
        bool(result.exit_code) or result.signal is not None or result.timed_out or result.cancelled
    )


def _place(
    runtime: Runtime, context: ToolContext, requested: object
) -> tuple[str, str] | ToolResult:
    """(the session's working directory, the command's workdir inside it), both resolved; or
    the error result that says the workdir is not inside it. The working directory is the
    session's (header `cwd`), else the executor's. A relative workdir is taken from it; an
    absolute one, or one that leads out through `..` or a symlink, is refused unless it
    resolves inside it (D485). Only that directory is bound writable, so a symlink swapped
    in after this check still leads to a read-only view."""
    agent = runtime.agents.get(context.agent_id)
    cwd = agent.session.header.get("cwd") if agent is not None else None
    base = cwd if isinstance(cwd, str) and cwd else (runtime.shell.cwd or os.getcwd())
    root = os.path.realpath(base)
    if requested is None or requested == "":
        return root, root
    if not isinstance(requested, str) or "\0" in requested:
        return _error(f"invalid workdir {requested!r}: give a directory path")
    workdir = os.path.realpath(os.path.join(root, requested))
    if workdir != root and not workdir.startswith(root.rstrip("/") + "/"):
        return _error(
            f"workdir {requested!r} is outside the session's working directory {root}: "
            "give a directory inside it, or a path relative to it"
        )
    return root, workdir


JOB_ID_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "job_id": {"type": "string", "description": "The id bash returned, e.g. bash-1."}
    },
    "required": ["job_id"],
    "additionalProperties": False,
}


def _check_access(shell: ShellExecutor, job_id: object, context: ToolContext) -> str | ToolResult:
    """The job id if the caller may touch the job (rule S3), else the refusal."""
    if not isinstance(job_id, str) or not job_id:
        return _error(f"invalid job_id {job_id!r}: give the id bash returned, e.g. bash-1")
    owner = shell.owner_of(job_id)
    # `is not None`, not truthiness: "" is a real owner, matched only by "".
    if owner is not None and owner != context.agent_id:
        return _error(f"job {job_id} belongs to another session")
    if not shell.has_job(job_id):
        return _error(f"unknown job {job_id!r}; bash returns the id when it starts one")
    return job_id


class _BashOutput(_BashToolBase):
    name = "bash_output"
    description = "Read a background job's output produced since your last read, and its status."
    parameters = JOB_ID_PARAMETERS

    async def run(
        self, runtime: Runtime, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult:
        await trio.lowlevel.checkpoint()
        shell = runtime.shell
        job_id = _check_access(shell, arguments.get("job_id"), context)
        if isinstance(job_id, ToolResult):
            return job_id
        return ToolResult(render_output(shell.read_output(job_id)))


class _BashKill(_BashToolBase):
    name = "bash_kill"
    description = "Stop a background job and every process it started."
    parameters = JOB_ID_PARAMETERS

    async def run(
        self, runtime: Runtime, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult:
        shell = runtime.shell
        job_id = _check_access(shell, arguments.get("job_id"), context)
        if isinstance(job_id, ToolResult):
            await trio.lowlevel.checkpoint()
            return job_id
        finished = shell.result(job_id)
        if finished is not None:
            await trio.lowlevel.checkpoint()
            return ToolResult(f"job {job_id} had already finished {status_line(finished)}")
        # The caller learns the outcome here, so no notice repeats it.
        result = await shell.kill(job_id, notify=False)
        return ToolResult(f"killed background job {job_id} {status_line(result)}")


# -- rendering (pure) ----------------------------------------------------------------------


def status_line(result: RunResult | None) -> str:
    """`[status: running]`, `[status: killed by SIGTERM]`, `[status: completed, exit code:
    N]` or `[status: completed, signal: SIGSEGV]` (it died of a signal by itself)."""
    if result is None:
        return "[status: running]"
    if result.cancelled:
        return f"[status: killed by {result.signal}]" if result.signal else "[status: killed]"
    if result.signal is not None:
        return f"[status: completed, signal: {result.signal}]"
    return f"[status: completed, exit code: {result.exit_code}]"


def render_output(output: JobOutput) -> str:
    text = output.text or "(no new output)"
    if output.lossy:
        paths = ", ".join(output.spill_paths) or "(unavailable)"
        text += f"\n[some output was dropped from memory; full output: {paths}]"
    separator = "" if text.endswith("\n") else "\n"
    return f"{text}{separator}{status_line(output.result)}"


def _spill_text(stream: StreamOutput) -> str:
    if stream.spill_path is not None:
        return stream.spill_path
    return f"(unavailable: {stream.spill_error})" if stream.spill_error else "(unavailable)"


def render_result(result: RunResult) -> str:
    """A foreground result as the model reads it. The exit marker is always the last line:
    `[killed by signal: SIG]`, or `[exit code: N]` when N is not 0."""
    body = result.stdout.text
    if result.stdout.truncated:
        body += f"\n[output truncated; full output: {_spill_text(result.stdout)}]"
    if result.stderr.text or result.stderr.truncated:
        if body and not body.endswith("\n"):
            body += "\n"
        body += "[stderr]\n" + result.stderr.text
        if result.stderr.truncated:
            body += f"\n[stderr truncated; full output: {_spill_text(result.stderr)}]"
    text = body.rstrip("\n") or "(no output)"
    if result.timed_out:
        text += f"\n[timed out after {result.timeout:g}s]"
    if result.signal is not None:
        text += f"\n[killed by signal: {result.signal}]"
    elif result.exit_code:
        text += f"\n[exit code: {result.exit_code}]"
    return text
