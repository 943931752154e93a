"""`serve_stdio`: one ACP connection on this process's stdin and stdout, with its own
runtime, for the whole life of the process."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import trio

from .._agent._options import AgentOptions
from .._agent._system_prompt import SystemPrompt, coding_system_prompt
from .._model._seam import Model
from .._runtime import open_runtime
from .._shell._bash_tools import BashTools
from .._shell._executor import ShellExecutor
from .._store._base import SessionStore
from .._version import VERSION
from ._server import AcpServer

__all__ = ["serve_stdio"]


async def serve_stdio(
    store: SessionStore | Path | None,
    model_factory: Callable[[], Model] | None = None,
    options: AgentOptions | None = None,
    *,
    models: Mapping[str, Callable[[], Model]] | None = None,
    mode: str = "ask",
    stop: trio.Event | None = None,
    shell: ShellExecutor | None = None,
    mcp_start_timeout: float = 10.0,
    system_prompt: SystemPrompt = coding_system_prompt,
    context_window: int | None = None,
    client_terminal: bool = False,
) -> None:
    """Serve ACP on stdin/stdout until end of input, in a runtime on `store` (a store, a
    SQLite path, or None for the default path), each session an agent with the bash tools
    and a model from `model_factory()` (or the first of `models`, which the editor can
    switch among), starting in `mode` (`AcpServer`'s), their commands run by `shell` (None:
    a ShellExecutor with default settings, sandboxed), each MCP server a session names given
    `mcp_start_timeout` seconds to start, each session's system prompt made from
    `system_prompt` (`AcpServer`'s), the models' context window `context_window` (`AcpServer`'s),
    foreground commands in the client's terminal when `client_terminal` (`AcpServer`'s).
    Stdout carries frames only. Returns
    after every session's agent and MCP servers are closed and every answer written.

    Setting `stop` ends the input as if stdin had ended: the same teardown follows (what
    SIGTERM does to `trio-agents acp`).

    Always a checkpoint. Raises what `open_runtime` raises for the store (TrioAgentsError for
    a file that is not a session store), OSError if stdin or stdout cannot be duplicated,
    and ValueError as `AcpServer` does (no model, both kinds, an unknown mode).
    """
    # Duplicates: trio makes the descriptors non-blocking and closes them when done.
    receive = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    send = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    bash = BashTools()
    async with open_runtime(store, shell=shell) as rt, receive, send:
        await rt.load(bash)
        server = AcpServer(
            rt,
            model_factory,
            models=models,
            mode=mode,
            bash=bash,
            options=options,
            version=VERSION,
            mcp_start_timeout=mcp_start_timeout,
            system_prompt=system_prompt,
            context_window=context_window,
            client_terminal=client_terminal,
        )
        async with trio.open_nursery() as nursery:
            if stop is not None:
                nursery.start_soon(_end_input_when, stop, receive)
            await server.serve(receive, send)
            nursery.cancel_scope.cancel(reason="the connection is over")


async def _end_input_when(stop: trio.Event, receive: trio.lowlevel.FdStream) -> None:
    await stop.wait()
    # The reader, waiting in receive_some, sees ClosedResourceError: its end of input. A
    # line read in part is still handled, as at a real end of input.
    await receive.aclose()
