"""`trio-agents chat`: talk to one agent in a terminal.

    stdin ── a line (os.read in a worker thread) ──► agent.send ──► wait_idle ──► prompt
                 └─ or, in a turn, the answer to `Run it?` (TerminalApprover, `_chat_approval`)
    the agent's records (session observer)  ─┐
    its TextStreamed events (event listener) ─┴─► Renderer (pure) ──► writer task ──► stdout
    SIGINT (trio.open_signal_receiver) ──► Chat.interrupt(): answer an open question
                                           `cancel`, else cancel the running turn, or
                                           leave (at the prompt, or while starting)
    SIGTERM, SIGHUP (the same receiver) ──► Chat.quit(): leave from any phase; a running
                                           turn ends `closed` (`_signals`)

The rendering (`_chat_render`) is pure: records and text in, text out. `Chat` is the loop,
written against a small `Terminal` (read a line, write text, report an error) and any async
iterable of interrupts, so tests drive it in process; the real terminal
(`open_stdio_terminal`) and the signal receiver (`_signals.watching_signals`) are wired in
by `run`.

`--mcp FILE` (`_chat_mcp`) adds the tools of the MCP servers the file configures: the
chat's task opens them in a task of its own (their owner) before the agent, and closes them
after the agent on every way out (end of input, Ctrl-C, SIGTERM, SIGHUP), each stdio
server's whole process group with them.

The session lives in the store like any other: `trio-agents chat --session ID` resumes it
(and so does ACP's `session/load`), `trio-agents sessions show ID` lists its records.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import shlex
import signal
import sqlite3
import sys
import uuid
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import trio

from .._agent._agent import Agent
from .._agent._approval import Approval, ApprovalRequest
from .._agent._events import Event, TextStreamed
from .._agent._mode_policy import DEFAULT_MODE, ModePolicy
from .._agent._options import AgentOptions
from .._agent._system_prompt import SystemPrompt, coding_system_prompt, with_system_prompt
from .._errors import (
    AgentClosedError,
    CorruptSessionError,
    DuplicateSessionError,
    FlushTimeoutError,
    PersistenceError,
    SessionNotFoundError,
    StoreBrokenError,
    StoreFileError,
    TrioAgentsError,
)
from .._mcp._config import McpServer
from .._model._seam import Model
from .._nursery import service_nursery
from .._registry import AgentHandle
from .._runtime import Runtime, open_runtime
from .._shell._bash_tools import BashTools
from .._shell._dumpable import make_non_dumpable
from .._shell._executor import ShellExecutor
from .._shell._sandbox_policy import SandboxPolicy
from .._store._base import SessionStore
from .._store._postgres import PostgresStore
from .._store._records import Record
from .._store._sqlite import default_store_path
from .._tool._file_tools import FileTools
from .._tool._seam import Tool
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
from ._chat_approval import TerminalApprover
from ._chat_mcp import McpHolder, add_mcp, read_mcp_files
from ._chat_render import PROMPT, Renderer, replay_summary
from ._model_choice import AUTO_MODELS, MODELS
from ._signals import Quit, exit_status, teardown_limit, watching_signals
from ._terminal import DRAIN_SECONDS, StdioTerminal, Terminal, open_stdio_terminal

__all__ = [
    "CANCEL_REASON",
    "Chat",
    "ChatConfig",
    "StdioTerminal",
    "Terminal",
    "add_parser",
    "open_stdio_terminal",
    "resolve_model",
    "run",
    "run_chat",
]

logger = logging.getLogger("trio_agents.chat")

CANCEL_REASON: Final = "Ctrl-C"
"""The reason recorded in the `turn/end` of a turn cancelled with Ctrl-C (cause `user`)."""
KEYS: Final = "Enter sends; Ctrl-C cancels a running turn, or quits at the prompt; Ctrl-D quits."
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, as shells report a Ctrl-C'd command
EXIT_USAGE: Final = 2

# -- models ----------------------------------------------------------------------------------

OFFLINE_NOTE: Final = "it echoes, and runs !commands with bash: it is not a language model"


def resolve_model(
    name: str,
    *,
    models: Mapping[str, Callable[[], Model]] | None = None,
    auto: Sequence[tuple[str, Callable[[], bool]]] | None = None,
) -> tuple[str, str]:
    """The model `--model name` means, and a line saying plainly which one that is and why.
    `auto` picks the first configured model of `AUTO_MODELS`, else `offline`."""
    models = MODELS if models is None else models
    auto = AUTO_MODELS if auto is None else auto
    if name != "auto":
        if name not in models:
            raise ValueError(f"unknown model {name!r}; choose from {', '.join(sorted(models))}")
        return name, f"model {name}" + (f" ({OFFLINE_NOTE})" if name == "offline" else "")
    for candidate, configured in auto:
        if candidate in models and configured():
            return candidate, f"model {candidate} (auto: its endpoint is configured)"
    return "offline", f"model offline (auto: no model endpoint is configured; {OFFLINE_NOTE})"


# -- the chat --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatConfig:
    """What `trio-agents chat` was asked for. `store` is a path (a SQLite store, created if
    missing) or a `SessionStore`; `session_id` resumes that stored session, else a new one
    is made (its id a fresh UUID, or `new_session_id`)."""

    store: SessionStore | Path | None
    model_factory: Callable[[], Model]
    model_note: str = "model offline"
    session_id: str | None = None
    options: AgentOptions | None = None
    new_session_id: str | None = None
    store_option: str = ""
    """How the hints it prints name the store (` --store PATH`, or nothing: the default)."""
    cwd: str | None = None
    pass_env: tuple[str, ...] = ()
    """Names of the environment passed to commands as they are (`--pass-env`)."""
    sandbox: SandboxPolicy | None = SandboxPolicy()  # noqa: RUF009 - frozen, shared
    """How the bash tools' commands are confined (None: not at all)."""
    shell: ShellExecutor | None = None
    """The runtime's shell executor (None: a default one with `pass_env` and `sandbox`), as
    for `open_runtime`."""
    mode: str = DEFAULT_MODE  # a mode of MODES (`_mode_policy`)
    """`ask`: ask in the terminal before each `bash` command and MCP tool call; `auto`:
    never (`--auto`)."""
    mcp_servers: tuple[McpServer, ...] = ()
    """The MCP servers whose tools the agent gets besides bash (`--mcp FILE`)."""
    system_prompt: SystemPrompt = coding_system_prompt
    """The system prompt: a text, a function of the working directory and the tools (the
    default prompt), or None; a system prompt in `options` is used instead."""


Phase = Literal["starting", "prompt", "turn", "closing"]


# What a store that cannot write raises, from the turn's commit to the close's flush.
_STORE_FAILURES: Final = (PersistenceError, StoreBrokenError, StoreFileError, FlushTimeoutError)


class Chat:
    """One terminal conversation with one agent: open it, show what it does, close it.

    `interrupt()` is what Ctrl-C does: in a turn it cancels the turn (`agent.cancel`, cause
    `user`), which ends `aborted` and shows `[cancelled]`; at the prompt, or while starting,
    it leaves (the agent is closed, the store keeps the session). While the chat closes it
    does nothing. `quit(status)` is what SIGTERM and SIGHUP do: leave from any phase."""

    def __init__(self, terminal: Terminal, config: ChatConfig) -> None:
        self._terminal = terminal
        self._config = config
        self._renderer = Renderer()
        self._phase: Phase = "starting"
        self._scope = trio.CancelScope()  # what a Ctrl-C cancels while starting or prompting
        self._interrupted = False
        self._quit_status: int | None = None
        self._agent: Agent | None = None
        self._store_failed = False
        self._policy = ModePolicy(config.mode)
        self._approver = TerminalApprover(terminal, self._show_call)
        self._approval = Approval(self._policy, self._approver)
        self._mcp = McpHolder(config.mcp_servers)

    def interrupt(self) -> None:
        if self._phase == "turn":
            assert self._agent is not None
            if self._approver.interrupt():
                return  # the question's answer is `cancel`, which cancels the turn
            # False when the turn is already ending (or ended): nothing more to do.
            self._agent.cancel(CANCEL_REASON, cause="user")
        elif self._phase in ("starting", "prompt"):
            self._interrupted = True
            self._scope.cancel(reason="Ctrl-C")

    def quit(self, status: int) -> None:
        """Leave now, as at end of input, from whatever phase: a running turn is not
        cancelled but closed with the agent (its `turn/end` is `closed`), the store keeps
        the session, and `run` returns `status`. While the chat closes it does nothing."""
        if self._phase == "closing" or self._quit_status is not None:
            return
        self._quit_status = status
        # The scope of the phase: starting, reading a line, or waiting for the turn.
        self._scope.cancel(reason="quit")

    async def run(self) -> int:
        """Open the runtime and the agent, converse until end of input (0) or a Ctrl-C at
        the prompt (130) or a `quit(status)` (`status`), close the agent (the store keeps
        the session). A session that cannot be opened is 2 (an unknown id, a store that
        cannot be opened) or 1 (a session live in another process); a model endpoint that
        is not configured is 2, and so is an MCP server that does not start; a turn the
        store could not commit ends the chat with 1."""
        try:
            return await self._run()
        except* _STORE_FAILURES:
            if not self._store_failed:
                raise
        # After a turn the store could not commit, the runtime raises the agent's own failed
        # commit (rule L7) as it closes: the chat has said so in one line. Any other error
        # still propagates.
        return 1

    async def _run(self) -> int:
        async with contextlib.AsyncExitStack() as stack:
            try:
                # Entered outside the scope below, which must not interleave with it.
                shell = self._config.shell
                if shell is None:
                    shell = ShellExecutor(
                        pass_env=self._config.pass_env, sandbox=self._config.sandbox
                    )
                rt = await stack.enter_async_context(open_runtime(self._config.store, shell=shell))
            except (TrioAgentsError, OSError, sqlite3.Error) as exc:
                # Not a store, a store of another version, a path that cannot be one: the
                # store's error names the file and the cause.
                self._terminal.error(f"trio-agents chat: --store: {exc}")
                return EXIT_USAGE
            # The MCP servers' owner task: entered here, outside the scope below, and closed
            # after the agent (the stack unwinds after `handle` is closed).
            nursery = await stack.enter_async_context(service_nursery())
            stack.callback(self._mcp.close)
            opened: tuple[AgentHandle, bool] | int | None = None
            with self._scope:  # a Ctrl-C while starting (even before this) cancels it
                bash = BashTools()
                await rt.load(bash)
                cwd = self._config.cwd if self._config.cwd is not None else os.getcwd()
                # The file tools an ACP session has, on this machine's files (D515).
                shell = rt.shell
                files = FileTools(cwd, hidden=lambda: shell.hidden_paths(cwd))
                own = (*bash.tools, *files.tools)
                tools = await self._mcp.open(nursery, own, cwd, self._terminal)
                opened = tools if isinstance(tools, int) else await self._open(rt, tools)
            if isinstance(opened, int):
                return opened
            if self._quit_status is not None or self._interrupted or opened is None:
                if opened is not None:
                    await opened[0].aclose()  # made just as the Ctrl-C landed
                self._terminal.write("\n")
                return self._exit_code()
            handle, resumed = opened
            agent = self._agent = handle.agent
            try:
                async with handle:
                    self._introduce(agent, resumed)
                    # The history first, then the live output: no await between the two.
                    stop_records = agent.session.observe(self._on_record)
                    disconnect = rt.events.connect(self._on_event)
                    try:
                        await self._converse(agent, rt.sessions)
                    finally:
                        self._phase = "closing"
                        stop_records()
                        disconnect()
            except* _STORE_FAILURES:
                if not self._store_failed:
                    raise
                # The close's flush fails as the turn's did, which the chat has said; taken
                # here, inside the runtime's block, which would log it with its traceback.
            if self._store_failed:
                return 1
            if len(agent.session) == 0:
                # A session is stored from its first record on: this one left no trace.
                self._terminal.write(f"session {agent.id} had no turns; nothing was stored\n")
            else:
                hint = self._resume_hint(agent.id)
                self._terminal.write(f"session {agent.id} kept; resume with: {hint}\n")
        return self._exit_code()

    def _exit_code(self) -> int:
        if self._quit_status is not None:
            return self._quit_status
        return EXIT_INTERRUPTED if self._interrupted else 0

    async def _open(self, rt: Runtime, tools: Sequence[Tool]) -> tuple[AgentHandle, bool] | int:
        config = self._config
        try:
            model = config.model_factory()
        except ValueError as exc:
            # A model endpoint that is not (or badly) configured says which variable to set.
            self._terminal.error(f"trio-agents chat: {exc}")
            return EXIT_USAGE
        approval = self._approval  # the one agent's: it keeps the session's "always" answers
        cwd = config.cwd if config.cwd is not None else os.getcwd()
        options = with_system_prompt(config.options, config.system_prompt, cwd, tools)
        if config.session_id is None:
            handle = await rt.agents.create(
                model=model,
                tools=tools,
                session_id=config.new_session_id or str(uuid.uuid4()),
                options=options,
                meta={"cwd": cwd, "front_end": "chat"},
                approval=approval,
            )
            return handle, False
        try:
            handle = await rt.agents.resume(
                config.session_id,
                model=model,
                tools=tools,
                options=options,
                approval=approval,
            )
        except SessionNotFoundError:
            self._terminal.error(
                f"trio-agents chat: no session {config.session_id!r} in {_where(rt)}; "
                f"list them with: trio-agents sessions list{config.store_option}"
            )
            return EXIT_USAGE
        except (DuplicateSessionError, CorruptSessionError) as exc:
            # Damaged: its message names the record; `sessions show` reads what is whole.
            self._terminal.error(f"trio-agents chat: {exc}")
            return 1
        return handle, True

    def _introduce(self, agent: Agent, resumed: bool) -> None:
        write = self._terminal.write
        write(f"{self._config.model_note}\n")
        verb = "resumed session" if resumed else "session"
        write(f"{verb} {agent.id} (resume with: {self._resume_hint(agent.id)})\n")
        cwd = agent.session.header.get("cwd")
        if resumed and isinstance(cwd, str) and cwd != os.getcwd():
            write(f"its commands run in {cwd}\n")
        if resumed:
            write(replay_summary(agent.session.records))
        write(f"{self._mode_line()}\n")
        for tool, kept in sorted(self._approval.remembered.items()):
            done = "run" if kept == "allow" else "are rejected"
            write(f"{tool} calls {done} without asking: an earlier answer in this session\n")
        write(f"{KEYS}\n")

    def _mode_line(self) -> str:
        mcp = bool(self._mcp.servers)
        mode = self._policy.mode
        if mode == "ask":
            what = "bash command and MCP tool call" if mcp else "bash command"
            return f"mode ask: each {what} is shown and asked before it runs (/mode auto)"
        what = "bash commands and MCP tool calls" if mcp else "bash commands"
        if mode == "read-only":
            return f"mode read-only: {what} are rejected without asking (/mode ask)"
        return f"mode auto: {what} run without asking (/mode ask)"

    def _set_mode(self, argument: str) -> None:
        if argument:
            try:
                self._policy.switch(argument)
            except ValueError:
                self._terminal.write(
                    f"unknown mode {argument!r}: /mode ask asks before each bash command, "
                    "/mode auto runs them without asking, /mode read-only rejects them\n"
                )
                return
        self._terminal.write(self._mode_line() + "\n")

    def _show_call(self, request: ApprovalRequest) -> str:
        return self._renderer.question(request.call_id, request.tool, request.arguments)

    def _resume_hint(self, session_id: str) -> str:
        option = self._config.store_option
        return f"trio-agents chat{option} --session {shlex.quote(session_id)}"

    async def _converse(self, agent: Agent, store: SessionStore) -> None:
        while True:
            self._phase = "prompt"
            self._terminal.write(self._renderer.finish() + PROMPT)
            line: str | None = None
            with trio.CancelScope() as self._scope:
                # A Ctrl-C after the start's scope closed, as the agent was entered, found
                # no scope to cancel: it leaves now, without waiting for a line.
                if not self._interrupted:
                    line = await self._terminal.readline()
            if self._interrupted or self._quit_status is not None:
                # Also when the Ctrl-C landed just after the line was read: it means leave.
                self._terminal.write("\n")
                return
            if line is None:
                self._terminal.write("\n")  # Ctrl-D echoes no newline
                return
            text = line.strip()
            if not text:
                continue
            if text == "/mode" or text.startswith("/mode "):
                self._set_mode(text[len("/mode") :].strip())
                continue
            try:
                agent.send(text)
            except AgentClosedError as exc:
                self._terminal.error(f"trio-agents chat: {exc}")
                return
            self._phase = "turn"
            with trio.CancelScope() as self._scope:  # what a quit cancels in a turn
                await agent.wait_idle()
            if self._quit_status is not None:
                # Leaving closes the agent: the turn still running ends `closed`.
                self._terminal.write("\n")
                return
            try:
                # The next prompt means the turn is stored (rule L9), as an ACP answer does.
                await store.flush(agent.session)
            except TrioAgentsError as exc:
                self._terminal.error(f"trio-agents chat: the turn was not stored: {exc}")
                self._store_failed = True
                return

    # -- the agent's output (synchronous, from the agent's task) -----------------------------

    def _on_record(self, record: Record) -> None:
        # A session observer must never raise: it would stop the agent (persistence path).
        try:
            self._approver.seen(record)
            self._terminal.write(self._renderer.record(record))
        except Exception:
            logger.exception("rendering %s failed", record.type)

    def _on_event(self, event: Event) -> None:
        agent = self._agent
        if isinstance(event, TextStreamed) and agent is not None and event.agent_id == agent.id:
            self._terminal.write(self._renderer.text(event.text))


def _where(rt: Runtime) -> str:
    path = getattr(rt.sessions, "path", None)
    return str(path) if path is not None else repr(rt.sessions)


async def run_chat(
    terminal: Terminal, config: ChatConfig, interrupts: AsyncIterable[object]
) -> int:
    """Run a `Chat` on `terminal`; each item of `interrupts` is a Ctrl-C, but a `Quit`
    (SIGTERM or SIGHUP, in the command) quits. Returns the exit code."""
    chat = Chat(terminal, config)
    async with service_nursery() as nursery:
        nursery.start_soon(_forward, interrupts, chat)
        try:
            return await chat.run()
        finally:
            nursery.cancel_scope.cancel(reason="the chat is over")


async def _forward(interrupts: AsyncIterable[object], chat: Chat) -> None:
    async for item in interrupts:
        if isinstance(item, Quit):
            chat.quit(exit_status(item.signum))
        else:
            chat.interrupt()


# -- the command -----------------------------------------------------------------------------


def add_parser(commands: Any) -> None:
    chat = commands.add_parser("chat", help="talk to an agent in this terminal")
    add_model(
        chat,
        extra=["auto"],
        default="auto",
        help="the model (default: auto, a configured endpoint if there is one, else offline)",
    )
    chat.add_argument("--session", metavar="ID", default=None, help="resume this stored session")
    add_store(chat, metavar="PATH")
    add_max_steps(chat, metavar="N", help="end a turn after this many model calls")
    add_pass_env(chat)
    add_sandbox(chat)
    add_mcp(chat)
    add_system_prompt(chat)
    chat.add_argument(
        "--auto",
        action="store_true",
        help="run bash commands without asking (default: show each one and ask y/a/n first; "
        "/mode auto, /mode ask and /mode read-only switch in the chat)",
    )


def run(args: argparse.Namespace) -> int:
    # Not WARNING: a failed turn is logged as one, and the chat shows it already.
    configure_logging("chat", logging.ERROR)
    name, note = resolve_model(args.model)
    servers = read_mcp_files(args.mcp)
    if isinstance(servers, str):
        print(f"trio-agents chat: {servers}", file=sys.stderr)
        return EXIT_USAGE
    sandbox = sandbox_policy("chat", args)
    if sandbox is None:
        return EXIT_USAGE
    target: Path | str = args.store if args.store is not None else default_store_path()
    store: SessionStore | Path
    if isinstance(target, str):
        # Hints name the database without its password (give it in PGPASSWORD or ~/.pgpass).
        try:
            store = PostgresStore(target)
        except TrioAgentsError as exc:  # no driver installed: before any connection
            print(f"trio-agents chat: --store: {exc}", file=sys.stderr)
            return EXIT_USAGE
        store_option = f" --store {shlex.quote(store.where)}"
    else:
        store = target
        store_option = f" --store {shlex.quote(str(target))}" if args.store is not None else ""
        if args.session is not None and not target.is_file():
            message = f"trio-agents chat: no store at {target}, so no session {args.session!r}"
            print(message, file=sys.stderr)
            return EXIT_USAGE
        problem = store_directory_problem(target) if args.store is not None else None
        if problem is not None:
            print(f"trio-agents chat: {problem}", file=sys.stderr)
            return EXIT_USAGE
    config = ChatConfig(
        store=store,
        model_factory=MODELS[name],
        model_note=note,
        session_id=args.session,
        options=AgentOptions(max_steps=args.max_steps),
        store_option=store_option,
        pass_env=tuple(args.pass_env),
        sandbox=sandbox,
        mode="auto" if args.auto else "ask",
        mcp_servers=servers,
        system_prompt=args.system_prompt,
    )
    # Before any command runs: none of them may read this process's environment (D144).
    make_non_dumpable()
    code = EXIT_INTERRUPTED
    try:
        code = trio.run(_main, config)
    except* KeyboardInterrupt:
        # A Ctrl-C in the instant before the handler is installed or after it is gone:
        # trio raises it where the main task waits, often in a nursery, which wraps it in a
        # group.
        pass
    return code


async def _main(config: ChatConfig) -> int:
    if config.shell is None:
        config = dataclasses.replace(
            config, shell=ShellExecutor(pass_env=config.pass_env, sandbox=config.sandbox)
        )
    assert config.shell is not None
    shell = config.shell
    options = config.options if config.options is not None else AgentOptions()
    # The bound covers the output's drain too: a paused terminal must not hold a quit.
    limit = teardown_limit(options.close_grace, shell.grace) + DRAIN_SECONDS
    if config.mcp_servers:
        limit += McpHolder.CLOSE_LIMIT
    async with (
        watching_signals("chat", shell, limit, interrupt_signals=(signal.SIGINT,)) as signals,
        open_stdio_terminal() as terminal,
    ):
        code = await run_chat(terminal, config, signals.events)
    return signals.status(code)
