"""A session's foreground `bash` commands run in the ACP client's terminal (`terminal/*`),
when the server was asked to (`AcpServer(client_terminal=True)`, `trio-agents acp
--client-terminal`) and `initialize` offered `clientCapabilities.terminal`.

The client runs the command on the user's machine, in its own environment, so our sandbox
does not confine it (D550): that is why it is opt-in. What still holds is what the server
decides before it asks: the approval (the session's mode), the working directory inside the
session's `cwd`, the timeout, and the environment settings it adds. One command's terminal:

    terminal/create ─► the call embeds it ─► terminal/wait_for_exit (the timeout: kill)
                   ─► terminal/output (the model's result) ─► terminal/release, always

A cancel of the turn (session/cancel) or a timeout sends `terminal/kill` and waits for the
exit, so the command is gone before the prompt answers `cancelled` (P20); `release` follows
on every path (D552).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import trio

from .._shell._bash_tools import failed, render_result
from .._shell._output import StreamOutput
from .._shell._types import RunResult, ShellSpec
from .._tool._seam import ToolContext, ToolResult
from ._jsonrpc import ClientRequestError

__all__ = ["END_GRACE", "ClientTerminal"]

logger = logging.getLogger("trio_agents.acp")

END_GRACE = 5.0
"""Seconds the client has to answer each of `terminal/kill` (with the exit it causes) and
`terminal/release` when a command is stopped; past that the server stops waiting, so a
client that does not answer cannot hold a cancelled turn for ever."""

Request = Callable[[str, Mapping[str, Any]], Awaitable[Any]]


class ClientTerminal:
    """Runs one session's foreground commands in its client's terminals: `run` is a
    `Foreground` for the `bash` tool (`_bash_tools.running_elsewhere`).

    `request` is the server's `client_request`; `show(call_id, terminal_id)` embeds a
    terminal in a call (queues the update, never blocks); `env` is added to the client's
    environment for every command; `output_limit` is the `outputByteLimit` asked for, in
    bytes (the client keeps the tail).
    """

    def __init__(
        self,
        request: Request,
        session_id: str,
        *,
        show: Callable[[str, str], None],
        env: Mapping[str, str],
        output_limit: int,
    ) -> None:
        self._request = request
        self._session_id = session_id
        self._show = show
        self._env = [{"name": name, "value": value} for name, value in env.items()]
        self._output_limit = output_limit

    async def run(self, spec: ShellSpec, context: ToolContext) -> ToolResult:
        """Run `spec` in a new client terminal and answer what it printed and how it ended.

        Always a checkpoint. An error the client answers is an error result naming the
        command; cancelled, the command is killed and its terminal released first.
        """
        params = {
            "sessionId": self._session_id,
            # `bash -c`, as the executor runs a command (S1): the client's shell may differ.
            "command": "bash",
            "args": ["-c", spec.command],
            "cwd": spec.workdir,
            "env": self._env,
            "outputByteLimit": self._output_limit,
        }
        try:
            created = await self._request("terminal/create", params)
        except ClientRequestError as exc:
            return _refused(spec, f"the editor could not start it in its terminal: {exc}")
        terminal_id = _terminal_id(created)
        if terminal_id is None:
            return _refused(spec, f"the editor answered terminal/create with {created!r}")
        self._show(context.call_id, terminal_id)
        ids = {"sessionId": self._session_id, "terminalId": terminal_id}
        ended = False
        status: object = None
        try:
            with trio.move_on_after(spec.timeout) as timer:
                status = await self._request("terminal/wait_for_exit", ids)
                ended = True
            if timer.cancelled_caught:
                await self._kill(ids)
                ended = True
            output = await self._request("terminal/output", ids)
        except ClientRequestError as exc:
            return _refused(spec, f"the editor's terminal {terminal_id} failed: {exc}")
        finally:
            # Shielded: a cancelled turn still kills its command (P20) and releases it.
            with trio.CancelScope(shield=True):
                if not ended:
                    await self._kill(ids)
                await self._ask("terminal/release", ids)
        result = _run_result(spec, output, status, timed_out=timer.cancelled_caught)
        return ToolResult(
            render_result(result), is_error=failed(result), details={"terminal": terminal_id}
        )

    async def _kill(self, ids: Mapping[str, str]) -> None:
        """Kill the command and wait until it has exited, each within `END_GRACE`."""
        if await self._ask("terminal/kill", ids):
            await self._ask("terminal/wait_for_exit", ids)

    async def _ask(self, method: str, ids: Mapping[str, str]) -> bool:
        """Send `method` for a terminal being stopped; whether the client answered it, in
        time, without an error (a failure is logged: the stop goes on)."""
        with trio.move_on_after(END_GRACE):
            try:
                await self._request(method, ids)
            except ClientRequestError as exc:
                logger.warning("%s of terminal %s: %s", method, ids["terminalId"], exc)
                return False
            return True
        logger.warning("%s of terminal %s: no answer in %gs", method, ids["terminalId"], END_GRACE)
        return False


def _refused(spec: ShellSpec, why: str) -> ToolResult:
    return ToolResult(f"cannot run {spec.command!r}: {why}", is_error=True)


def _terminal_id(created: object) -> str | None:
    if not isinstance(created, Mapping):
        return None
    terminal: object = cast("Mapping[str, Any]", created).get("terminalId")
    return terminal if isinstance(terminal, str) and terminal else None


def _exit_status(answer: object) -> tuple[int | None, str | None]:
    """(exit code, signal) of a `TerminalExitStatus`, read defensively."""
    if not isinstance(answer, Mapping):
        return None, None
    fields = cast("Mapping[str, Any]", answer)
    code, signal = fields.get("exitCode"), fields.get("signal")
    return (
        code if type(code) is int else None,
        signal if isinstance(signal, str) and signal else None,
    )


def _run_result(spec: ShellSpec, output: object, status: object, *, timed_out: bool) -> RunResult:
    """The outcome as the executor reports one, so the model reads the same result text: the
    terminal's output (stdout and stderr merged, as a terminal shows them) and its exit."""
    fields: Mapping[str, Any] = (
        cast("Mapping[str, Any]", output) if isinstance(output, Mapping) else {}
    )
    text = fields.get("output")
    text = text if isinstance(text, str) else ""
    truncated = fields.get("truncated") is True
    # The output's own exit status is the later one: a killed command's.
    exit_code, signal = _exit_status(fields.get("exitStatus") or status)
    stdout = StreamOutput(
        text=text,
        truncated=truncated,
        spill_path=None,
        total_bytes=len(text.encode("utf-8", "surrogatepass")),
        spill_error="the editor's terminal keeps only the last part" if truncated else None,
    )
    return RunResult(
        exit_code=exit_code,
        signal=signal,
        timed_out=timed_out,
        cancelled=False,
        timeout=spec.timeout,
        stdout=stdout,
        stderr=StreamOutput("", False, None, 0),
    )
