"""`trio-agents acp`: serve the Agent Client Protocol on this process's stdin and stdout.

Stdout carries protocol frames only; logs go to stderr. End of stdin closes every session's
agent (the store keeps the sessions) and the process exits 0. SIGTERM, SIGHUP and SIGINT
end the input the same way, and the process exits 128 + the signal's number; a second
signal during that teardown forces the exit (`_signals`). A store that cannot be opened
(a path through a file, a read-only file, not a store) is one line on stderr and exit 2,
before any frame is read; a store that fails while serving (a full disk) is one line and
exit 1.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from .._agent._options import AgentOptions
from .._agent._system_prompt import SystemPrompt
from .._errors import (
    PersistenceError,
    StoreBrokenError,
    StoreConnectionError,
    StoreFileError,
    StoreLockedError,
    TrioAgentsError,
)
from .._model._seam import Model
from .._nursery import service_nursery
from .._shell._dumpable import make_non_dumpable
from .._shell._executor import ShellExecutor
from .._shell._sandbox import probe_now
from .._shell._sandbox_policy import SandboxPolicy
from .._store._base import SessionStore
from .._store._postgres import PostgresStore
from .._store._sqlite import SqliteStore, default_store_path
from .._version import VERSION
from ..acp import serve_stdio
from ..acp._modes import DEFAULT_MODE, MODES
from ._args import (
    add_max_steps,
    add_model,
    add_pass_env,
    add_sandbox,
    add_store,
    add_system_prompt,
    configure_logging,
    sandbox_policy,
    store_directory_problem,
)
from ._model_choice import MODELS, offered_models
from ._signals import Quit, teardown_limit, watching_signals

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    acp = commands.add_parser("acp", help="serve the Agent Client Protocol on stdio")
    add_store(acp)
    add_model(
        acp,
        default="offline",
        help="the model every session uses (default: offline, which needs no network)",
    )
    add_max_steps(
        acp, help="end a turn after this many model calls (ACP stop reason max_turn_requests)"
    )
    acp.add_argument(
        "--mode",
        choices=list(MODES),
        default=DEFAULT_MODE,
        help="each session's mode until the editor switches it: ask (ask the editor before a"
        " command; the default), auto (never ask), read-only (run no command)",
    )
    acp.add_argument(
        "--mcp-start-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long session/new and session/load wait for each MCP server the editor names"
        " to start and answer initialize (default: 10)",
    )
    acp.add_argument(
        "--context-window",
        type=_tokens,
        default=None,
        metavar="TOKENS",
        help="the model's context window, in tokens: each model call's usage is then reported"
        " to the editor as a usage_update (default: not reported; a prompt's answer carries its"
        " usage either way)",
    )
    acp.add_argument(
        "--client-terminal",
        action="store_true",
        help="run foreground commands in the editor's terminal when it offers one: the editor"
        " shows them live and a cancel kills them there, but they run outside this sandbox,"
        " with the editor's environment (default: every command runs in the sandbox)",
    )
    add_system_prompt(acp)
    add_pass_env(acp)
    add_sandbox(acp)
    acp.add_argument("--verbose", action="store_true", help="log more, to stderr")


def run(args: argparse.Namespace) -> int:
    configure_logging("acp", logging.INFO if args.verbose else logging.WARNING)
    options = AgentOptions(max_steps=args.max_steps)
    factory = MODELS[args.model]
    models = offered_models(args.model)
    try:
        factory()  # a model that is not configured should say so now, not at session/new
    except ValueError as exc:
        print(f"trio-agents acp: --model {args.model}: {exc}", file=sys.stderr)
        return 2
    policy = sandbox_policy("acp", args)
    if policy is None:
        return 2
    path: Path | str = args.store if args.store is not None else default_store_path()
    problem = store_directory_problem(args.store) if isinstance(args.store, Path) else None
    if problem is not None:
        print(f"trio-agents acp: {problem}", file=sys.stderr)
        return 2
    try:
        trio.run(_open_store, path)
    except TrioAgentsError as exc:
        print(f"trio-agents acp: --store: {exc}", file=sys.stderr)
        return 2
    # Before any command runs: none of them may read this process's environment (D144).
    make_non_dumpable()
    shell = ShellExecutor(pass_env=args.pass_env, sandbox=policy)
    store = PostgresStore(path) if isinstance(path, str) else path
    # An editor shows an agent's stderr in its log: the first line says what is serving.
    where = store.where if isinstance(store, PostgresStore) else str(store)  # no password
    print(startup_line(where, args, policy), file=sys.stderr, flush=True)
    code = 1
    try:
        code = trio.run(
            _main,
            store,
            models,
            args.mode,
            options,
            shell,
            args.mcp_start_timeout,
            args.system_prompt,
            args.context_window,
            args.client_terminal,
        )
    except* (
        StoreFileError,
        StoreLockedError,
        StoreBrokenError,
        StoreConnectionError,
        PersistenceError,
    ) as group:
        # An agent whose commit failed (L7) reports it too: name the store's own cause.
        print(f"trio-agents acp: the store failed: {_first(group)}", file=sys.stderr)
    return code


async def _main(
    store: Path | SessionStore,
    models: Mapping[str, Callable[[], Model]],
    mode: str,
    options: AgentOptions,
    shell: ShellExecutor,
    mcp_start_timeout: float,
    system_prompt: SystemPrompt,
    context_window: int | None,
    client_terminal: bool,
) -> int:
    stop = trio.Event()
    limit = teardown_limit(options.close_grace, shell.grace)
    async with watching_signals("acp", shell, limit) as signals, service_nursery() as nursery:
        nursery.start_soon(_stop_on_quit, signals.events, stop)
        await serve_stdio(
            store,
            None,
            options,
            models=models,
            mode=mode,
            stop=stop,
            shell=shell,
            mcp_start_timeout=mcp_start_timeout,
            system_prompt=system_prompt,
            context_window=context_window,
            client_terminal=client_terminal,
        )
        nursery.cancel_scope.cancel(reason="the server is done")
    return signals.status(0)


async def _stop_on_quit(events: trio.abc.ReceiveChannel[int | Quit], stop: trio.Event) -> None:
    async for _ in events:  # every handled signal is a quit here: none is an interrupt
        stop.set()


def startup_line(store: str, args: argparse.Namespace, policy: SandboxPolicy) -> str:
    """What `trio-agents acp` says on stderr before it reads a frame: its version, the store,
    the model, the mode and how commands are confined; `--verbose` adds the rest."""
    sandboxed = probe_now(policy.bwrap).bwrap is not None  # probed already: cached
    sandbox = "sandboxed with bubblewrap" if sandboxed else "NOT sandboxed"
    if sandboxed and not policy.network:
        sandbox += ", no network"
    if args.client_terminal:
        # Said at start, as the fallback is (D134): these commands leave the sandbox (D550).
        sandbox += "; foreground ones in the editor's terminal when it offers one, NOT sandboxed"
    line = (
        f"trio-agents acp {VERSION}: serving ACP on stdio; store {store};"
        f" model {args.model}; mode {args.mode}; commands {sandbox}"
    )
    if args.verbose:
        prompt = args.system_prompt
        said = "the default" if callable(prompt) else "none" if not prompt else "given"
        steps = args.max_steps if args.max_steps is not None else "no limit"
        passed = ", ".join(args.pass_env) or "none"
        line += (
            f"; system prompt {said}; max steps {steps}; MCP start timeout"
            f" {args.mcp_start_timeout:g} s; passed environment {passed}"
        )
    return line


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0, or a usage error that says so."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def _tokens(text: str) -> int:
    """An argparse type: a whole number of tokens > 0, or a usage error that says so."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number of tokens > 0, got {text!r}")
    return value


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The leaf that names the file and the cause, rather than a consequence of it."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        found = stack.pop()
        if isinstance(found, BaseExceptionGroup):
            inner: BaseExceptionGroup[BaseException] = found  # pyright: ignore[reportUnknownVariableType]
            stack.extend(reversed(inner.exceptions))
        else:
            # An agent's PersistenceError says "the cause says why": its causes are leaves.
            cause: BaseException | None = found
            while cause is not None and cause not in leaves:
                leaves.append(cause)
                cause = cause.__cause__
    for kinds in ((StoreFileError, StoreLockedError), (StoreBrokenError,)):
        for leaf in leaves:
            if isinstance(leaf, kinds):
                return leaf
    return leaves[0]


async def _open_store(path: Path | str) -> None:
    """Open (creating if needed) and close the store, so a path that cannot be one (or a
    database that cannot be reached) is a usage error before the client is told anything."""
    store = PostgresStore(path) if isinstance(path, str) else SqliteStore(path)
    async with store.running():
        pass
