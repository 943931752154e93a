"""Opening an ACP session, for `session/new` and `session/load`: the session's fiber with the
MCP servers the client named (`_session_scope`), its agent created or resumed in that fiber,
and for a load the stored history replayed as updates.

The server checks the request and keeps its own tables (which sessions are live, which are
being loaded); `SessionOpener` holds what every session of one connection is made with and
does the opening. The servers start before the agent exists, so one that does not start
fails the request before anything is created or stored (design D261). Past that point a
failure of any kind, a cancellation or the connection closing meanwhile closes the scope,
shielded, before the error goes on: a refused request leaves no agent and no MCP server
behind. A loaded session's history is replayed and the session installed in the server
(`install`, which starts its live updates) with no await between the two.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from .._agent._approval import Approval
from .._agent._options import AgentOptions
from .._agent._system_prompt import SystemPrompt, with_system_prompt
from .._errors import CorruptSessionError, DuplicateSessionError, SessionNotFoundError
from .._mcp._config import McpServer
from .._model._offline import COMMANDS, OfflineModel
from .._model._seam import Model
from .._registry import AgentHandle
from .._runtime import Runtime
from .._shell._bash_tools import Foreground, running_elsewhere
from .._store._records import Record
from .._tool._file_access import FileAccess
from .._tool._file_tools import FileTools
from .._tool._seam import Tool
from . import _jsonrpc as rpc
from . import _mapping as m
from . import _modes as modes
from ._outcomes import Outcome, replay_outcomes
from ._pacing import OutputBudget, PacedModel
from ._permissions import AcpApprover, ClientRequest
from ._session_scope import SessionScope, open_session_scope
from ._session_state import Answer, SessionState

__all__ = ["Install", "SessionOpener", "commands_of"]

Install = Callable[[SessionScope, AgentHandle, str, modes.Settings], None]
"""Makes a session live in the server: its scope, agent handle, cwd and settings."""


@dataclass(frozen=True, slots=True)
class SessionOpener:
    """What every session of one connection is made with: the runtime, the base tools (the
    `BashTools`), the agents' options and system prompt, how long each MCP server has to
    start, the output budget every session's model is paced by, the mode and models a new
    or loaded session starts with, how a permission request reaches the client, and how a
    session's file tools reach its files (`file_access`, given the session's id: through
    the client when it offers `fs/*`), where its foreground commands run (`terminal`,
    given the session's id: the client's terminal, or None for the executor), and how a
    replay restates what became of the prompts that were steered or queued (`tell`, D533)."""

    runtime: Runtime
    tools: Sequence[Tool]
    options: AgentOptions | None
    system_prompt: SystemPrompt
    start_timeout: float
    budget: OutputBudget
    mode: str
    models: Mapping[str, Callable[[], Model]]
    client_request: ClientRequest
    file_access: Callable[[str], FileAccess]
    terminal: Callable[[str], Foreground | None]
    tell: Callable[[str, Outcome], None]

    async def new(
        self,
        cwd: str,
        servers: Sequence[McpServer],
        *,
        still_open: Callable[[str], None],
        install: Install,
    ) -> Answer:
        """Create a session in `cwd` with `servers`, store it, install it and answer
        `session/new`. `still_open` raises if the connection closed meanwhile. Always a
        checkpoint."""
        sid = str(uuid.uuid4())
        settings = self._settings()
        # The servers first: one that does not start fails the request before anything is
        # created or stored (design D261).
        scope = await self._open_scope(sid, servers, cwd)
        try:
            handle = await scope.fiber.agents.create(
                model=PacedModel(settings.model, self.budget),
                tools=scope.tools,
                session_id=sid,
                options=self._session_options(cwd, scope),
                meta={"cwd": cwd},
                approval=self._approval(sid, cwd, settings),
            )
            # Stored before the client hears of it, so a session/load from another process
            # finds it before its first prompt, and session/list shows it (D200).
            await self.runtime.sessions.persist(handle.agent.session)
            still_open("session/new")
        except BaseException:
            with trio.CancelScope(shield=True):
                await scope.aclose()
            raise
        install(scope, handle, cwd, settings)
        sid = handle.agent.id
        answer = {"sessionId": sid, **settings.advertised()}
        return Answer(answer, sid, _commands(settings.model.active()))

    async def load(
        self,
        sid: str,
        cwd: str,
        servers: Sequence[McpServer],
        *,
        still_open: Callable[[str], None],
        install: Install,
        replay: Callable[[str, Mapping[str, Any]], None] | None,
    ) -> Answer:
        """Resume the stored session `sid` in `cwd` with `servers`, `replay` its history as
        updates (not for `session/resume`: None), install it and answer `session/load` or
        `session/resume`. Always a checkpoint.

        Raises JsonRpcError (invalid params) for a session not stored, one the store cannot
        read, one stored with another cwd, or one live already (here or in another
        process)."""
        try:
            stored = await self.runtime.sessions.load(sid)
        except SessionNotFoundError:
            raise rpc.JsonRpcError.invalid_params(f"no session {sid} is stored") from None
        except CorruptSessionError as exc:
            # The client named a session the store cannot read: its data, not our bug.
            raise rpc.JsonRpcError.invalid_params(str(exc)) from None
        persisted = stored.header.get("cwd")
        if isinstance(persisted, str) and persisted != cwd:
            raise rpc.JsonRpcError.invalid_params(
                f"session {sid} cwd mismatch: persisted {persisted}, requested {cwd}"
            )
        settings = self._settings()
        # Before the resume, which may write (it closes a turn a crash left open): a
        # server that does not start leaves the stored session as it was.
        scope = await self._open_scope(sid, servers, cwd)
        try:
            try:
                handle = await scope.fiber.agents.resume(
                    sid,
                    model=PacedModel(settings.model, self.budget),
                    tools=scope.tools,
                    options=self._session_options(cwd, scope),
                    approval=self._approval(sid, cwd, settings),
                )
            except DuplicateSessionError as exc:
                raise rpc.JsonRpcError.invalid_params(str(exc)) from None
            still_open("session/load" if replay is not None else "session/resume")
            # The history first, then the live updates: no await between the two.
            if replay is not None:
                self._replay(handle.agent.session.records, sid, cwd, replay)
                _advertise(sid, settings.model.active(), replay)
            install(scope, handle, cwd, settings)
        except BaseException:
            with trio.CancelScope(shield=True):
                # Whatever went wrong, no agent and no MCP server is left behind.
                await scope.aclose()
            raise
        await trio.lowlevel.checkpoint()
        later = _commands(settings.model.active()) if replay is None else []
        return Answer(settings.advertised(), sid, later)

    async def reattach(
        self,
        session: SessionState,
        cwd: str,
        servers: Sequence[McpServer],
        *,
        replay: Callable[[str, Mapping[str, Any]], None] | None,
    ) -> Answer:
        """Answer `session/load` (or, `replay` None, `session/resume`) of `session`, live on
        this connection already: `replay` its history as updates, as a load from the store
        does, and answer as that load does; the session goes on as it is, a turn under way
        included (its later updates follow the replay). Always a checkpoint.

        Raises JsonRpcError (invalid params) when the load names another cwd or other MCP
        servers than the live session has: its commands run there, and its tools are
        those, so taking the load would mislead the client (D505)."""
        sid = session.id
        if cwd != session.cwd:
            raise rpc.JsonRpcError.invalid_params(
                f"session {sid} cwd mismatch: live in {session.cwd}, requested {cwd}"
            )
        if tuple(servers) != session.scope.servers:
            live = [s.name for s in session.scope.servers]
            raise rpc.JsonRpcError.invalid_params(
                f"session {sid} is live with MCP servers {live}; load it with the same ones "
                f"(it was given {[s.name for s in servers]})"
            )
        # The history, then the live updates: no await between the two.
        model = session.settings.model.active()
        if replay is not None:
            self._replay(session.handle.agent.session.records, sid, cwd, replay)
            _advertise(sid, model, replay)
        await trio.lowlevel.checkpoint()
        return Answer(
            session.settings.advertised(), sid, _commands(model) if replay is None else []
        )

    async def _open_scope(self, sid: str, servers: Sequence[McpServer], cwd: str) -> SessionScope:
        """The session's fiber, with its MCP servers connected (design D260). Its tools are
        the base tools, its file tools, then each MCP server's."""
        shell = self.runtime.shell
        files = FileTools(cwd, access=self.file_access(sid), hidden=lambda: shell.hidden_paths(cwd))
        foreground = self.terminal(sid)
        tools = self.tools if foreground is None else running_elsewhere(self.tools, foreground)
        return await open_session_scope(
            self.runtime,
            sid,
            servers,
            base=(*tools, *files.tools),
            cwd=cwd,
            start_timeout=self.start_timeout,
        )

    def _replay(
        self,
        records: Sequence[Record],
        sid: str,
        cwd: str,
        replay: Callable[[str, Mapping[str, Any]], None],
    ) -> None:
        for update in m.replay_updates(records, cwd):
            replay(sid, update)
        for outcome in replay_outcomes(records):
            self.tell(sid, outcome)

    def _session_options(self, cwd: str, scope: SessionScope) -> AgentOptions | None:
        # Per session: the default prompt names the session's own cwd and MCP tools.
        return with_system_prompt(self.options, self.system_prompt, cwd, scope.tools)

    def _settings(self) -> modes.Settings:
        # A loaded session starts in the server's mode too, not the one it was left in
        # (design D193): a client that never chose `auto` never has commands run unasked.
        return modes.Settings.make(self.mode, self.models)

    def _approval(self, session_id: str, cwd: str, settings: modes.Settings) -> Approval:
        return Approval(settings.policy, AcpApprover(session_id, self.client_request, cwd))


def commands_of(model: Model) -> tuple[tuple[str, str, str | None], ...]:
    """The commands `model` understands: the offline model's slash commands, else none."""
    return COMMANDS if isinstance(model, OfflineModel) else ()


def _advertise(sid: str, model: Model, send: Callable[[str, Mapping[str, Any]], None]) -> None:
    """A load's commands update, sent before its answer: the client knows the session (it
    named it), and a client that takes what follows a load's answer for more history (the
    ACP test kit's LOAD-002 does) sees none (D514)."""
    for update in _commands(model):
        send(sid, update)


def _commands(model: Model) -> list[dict[str, Any]]:
    """The updates that advertise `model`'s commands after a session/new or load: none for
    a model without commands."""
    commands = commands_of(model)
    return [m.available_commands_update(commands)] if commands else []
