"""The ACP server: the Agent Client Protocol over a byte stream pair (stdio), on trio.

One `AcpServer` serves one connection. Each ACP session is a registry agent whose id is the
session id, created (or resumed by `session/load`) with the `BashTools` and the tools of the
MCP servers the client named, in a fiber of its own that owns both (`_session_scope`), so
its background jobs and its MCP servers are owned by that session; `_session_open` opens
one, and `_prompt_turn` carries a prompt from its admission to its stop reason. The framing
(`_jsonrpc`) and the mapping between records and ACP messages (`_mapping`) are pure; this
module only moves bytes and owns tasks:

    reader (this task)  ── requests ──► one handler task each, in the connection nursery
                        ── notifications (session/cancel) handled inline, so a cancel
                           overtakes the prompt it cancels
    agents' records and text deltas ──► updates, queued in order ──► writer task ──► stdout

Every frame goes through one queue drained by one writer, in the order it was queued. A
prompt's response is queued after its agent has settled and its turn is committed, so every
update of that turn is written before it. The queue is fed by synchronous code, so it is
bounded by pacing its producers (`_pacing`): past `max_unwritten` bytes not yet written, the
reader stops reading requests and every session's model waits, until the client has read
the backlog down to half of it. End of input closes every session's fiber: its agent (the
store keeps the sessions), then its MCP servers; it answers the prompts still pending
(`cancelled`), and returns.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import trio

from .._agent._events import Event, TextStreamed, ToolStarted
from .._agent._options import AgentOptions
from .._agent._system_prompt import SystemPrompt, coding_system_prompt
from .._batches import write_in_batches
from .._errors import DuplicateSessionError
from .._model._seam import Model
from .._registry import AgentHandle
from .._runtime import Runtime
from .._shell._bash_tools import BashTools, Foreground
from .._shell._env import QUIET_TOOLS
from .._store._records import TURN_END, Record
from .._tool._file_access import FileAccess, LocalFiles
from .._util import describe
from . import _jsonrpc as rpc
from . import _listing, _params
from . import _mapping as m
from . import _modes as modes
from . import _prompt as p
from . import _v2 as v2
from ._client_files import ClientFiles
from ._client_requests import ClientRequests
from ._client_terminal import ClientTerminal
from ._frames import Outgoing, Text, encode, size, update_frame
from ._inject import INJECT_METHODS, inject
from ._outcomes import OUTCOME_METHOD, Outcome
from ._pacing import OutputBudget
from ._prompt_turn import send_prompt, settle
from ._resources import ClientRead, client_reader
from ._session_open import SessionOpener, commands_of
from ._session_scope import SessionScope
from ._session_state import Answer, PromptState, SessionState

__all__ = ["AcpServer"]

logger = logging.getLogger("trio_agents.acp")

READ_SIZE = 65536
# How long a connection that ends on an error keeps writing the frames already queued.
_DRAIN_GRACE = 5.0


class AcpServer:
    """Serve ACP for one connection. `models` names the models a session can use, each with
    the factory that makes one for a session; the first is a new or loaded session's model,
    and the editor can switch (config option `model`). `model_factory` instead is the one
    model, named `default`. `bash` (loaded into `runtime` by the caller) gives the sessions
    their tools. `mode` is a new or loaded session's mode: `ask` (ask the client before each
    command), `auto` (never ask) or `read-only` (run no command); the editor can switch it.

    `options` are every session agent's options, `version` the agent version `initialize`
    reports, and `max_line` the longest frame accepted, in bytes (a longer line is answered
    with an error and skipped). `max_unwritten` bounds the output a client that stops reading
    makes the server hold, in bytes: past it, no request is read and no session's model goes
    on until the client has read it down to half. `mcp_start_timeout` bounds, in seconds,
    how long a session/new or session/load waits for each MCP server it names to start and
    answer `initialize`.

    `system_prompt` is each session's system prompt: a text, a function of the session's
    `cwd` and tools (the default, `coding_system_prompt`: the working directory, the platform
    and what each tool is for), or None for none. A system prompt set in `options` is used
    instead.

    `context_window` is the models' context window, in tokens: when given, every model call
    that reports its usage is followed by a `usage_update` (the tokens in context now, out
    of it); the protocol wants the window's size, so without it none is sent. A prompt's
    answer carries the tokens its turn used (`usage`) either way, when the model said.

    `client_terminal` runs each session's foreground `bash` commands in the client's
    terminal (`terminal/*`) when `initialize` offers it: the editor shows the command live
    in the tool call, and a cancel kills it there. The client runs it outside this runtime's
    sandbox, with its own environment and rights, so it is off by default (D550).
    Background jobs stay on the runtime's executor either way.

    Raises ValueError for a negative `max_unwritten`, a `mcp_start_timeout` that is not a
    positive number, a `context_window` that is not a positive number of tokens, an unknown
    mode, no model, or both `model_factory` and `models`.
    """

    def __init__(
        self,
        runtime: Runtime,
        model_factory: Callable[[], Model] | None = None,
        *,
        models: Mapping[str, Callable[[], Model]] | None = None,
        mode: str = modes.DEFAULT_MODE,
        bash: BashTools | None = None,
        options: AgentOptions | None = None,
        version: str = "0",
        max_line: int = 8 * 1024 * 1024,
        max_unwritten: int = 1024 * 1024,
        mcp_start_timeout: float = 10.0,
        system_prompt: SystemPrompt = coding_system_prompt,
        context_window: int | None = None,
        client_terminal: bool = False,
    ) -> None:
        self._runtime = runtime
        if context_window is not None and not (
            isinstance(context_window, int) and context_window > 0  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise ValueError(
                f"context_window must be a number of tokens > 0, got {context_window!r}"
            )
        self._context_window = context_window
        if models is not None and model_factory is not None:
            raise ValueError("give AcpServer either model_factory or models, not both")
        named = dict(models or {})
        if model_factory is not None:
            named["default"] = model_factory
        if not named:
            raise ValueError("AcpServer needs a model: give model_factory or models")
        modes.ModePolicy(mode)  # raises ValueError for an unknown mode
        self._version = version
        self._max_line = max_line
        self._sessions: dict[str, SessionState] = {}
        self._loading: set[str] = set()
        # The client's requests in flight, for `$/cancel_request` (D507): a prompt by its
        # session, any other by the scope its answer runs in.
        self._prompting: dict[rpc.RequestId, SessionState] = {}
        self._answering: dict[rpc.RequestId, trio.CancelScope] = {}
        self._closed = False
        # The protocol version the first `initialize` negotiated: v1 until a client asks for
        # v2 (D526). A connection speaks one version: a later `initialize` does not change it.
        self._protocol: int = v2.PROTOCOL_V1
        self._negotiated = False
        # Whether `initialize` offered fs.readTextFile and fs.writeTextFile.
        self._client_reads_files = False
        self._client_writes_files = False
        # Whether commands may run in the client's terminal, and whether `initialize` offered it.
        self._use_client_terminal = client_terminal
        self._client_has_terminal = False
        self._out, self._out_receive = trio.open_memory_channel[Outgoing](math.inf)
        if max_unwritten < 0:
            raise ValueError(f"max_unwritten must be a number of bytes >= 0, got {max_unwritten}")
        self._budget = OutputBudget(max_unwritten, max_unwritten // 2)
        if not mcp_start_timeout > 0:  # also refuses NaN
            raise ValueError(
                f"mcp_start_timeout must be a number of seconds > 0, got {mcp_start_timeout}"
            )
        self._teardown_done: trio.Event | None = None
        self._client = ClientRequests(self._send)
        self._opener = SessionOpener(
            runtime,
            tools=bash.tools if bash is not None else (),
            options=options,
            system_prompt=system_prompt,
            start_timeout=mcp_start_timeout,
            budget=self._budget,
            mode=mode,
            models=named,
            client_request=self.client_request,
            file_access=self._file_access,
            terminal=self._terminal,
            tell=self._tell,
        )

    # -- the connection ---------------------------------------------------------------------

    async def serve(self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream) -> None:
        """Read frames until end of input, then close every session and return once every
        answer has been written.

        Always a checkpoint. A request that fails is answered with a JSON-RPC error, not
        raised; a broken input counts as its end, and once the client stops reading, later
        frames are dropped.
        """
        disconnect = self._runtime.events.connect(self._on_event)
        # The writer is not cancelled with the connection: a frame cut in the middle is a
        # line no client can parse (P7). When the connection ends on an error, the writer
        # writes what is queued, whole, for up to `_DRAIN_GRACE` seconds (D434).
        writer = trio.CancelScope(shield=True)
        try:
            async with trio.open_nursery() as connection:
                connection.start_soon(self._write_all, send, writer)
                try:
                    async with trio.open_nursery() as prompts:
                        # Requests read before the end of input are answered before the
                        # teardown: all but prompts, which may wait for ever, finish first.
                        async with trio.open_nursery() as others:
                            await self._read_all(receive, prompts, others)
                        await self.aclose()
                except BaseException:
                    writer.deadline = trio.current_time() + _DRAIN_GRACE
                    raise
                finally:
                    self._out.close()
        finally:
            disconnect()

    async def aclose(self) -> None:
        """Close every session: its agent, then its MCP servers (memoized; every caller waits
        for the same end). The pending prompts answer `cancelled`; later session requests
        are refused.

        Always a checkpoint. The first call is not cancellable (sessions close shielded); a
        later one waits for it at a checkpoint. A session whose close fails is logged, and
        the others still close.
        """
        if self._teardown_done is not None:
            await self._teardown_done.wait()
            return
        self._teardown_done = done = trio.Event()
        self._closed = True
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            if session.prompt is not None:
                # Its turn ends `closed` with the agent; the client is told `cancelled`.
                session.prompt.cancel_requested = True
        try:
            if not sessions:
                # An empty nursery's exit is only a schedule point, not a cancellation point.
                await trio.lowlevel.checkpoint()
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(self._end_session, session)
        finally:
            for session in sessions:
                self._told_closed(session)
            done.set()

    async def _end_session(self, session: SessionState) -> None:
        """Close `session`'s agent and MCP servers and kill its jobs, at once."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.aclose)
            # Its background jobs get their kill grace now, while its turn's foreground
            # command gets its own: one after the other they took two graces, past P6's
            # bound (D384). The agent's close kills any job its turn starts meanwhile.
            nursery.start_soon(self._kill_jobs, session.id)

    async def _kill_jobs(self, owner: str) -> None:
        shell = self._runtime.shell
        running = [job for job in shell.jobs(owner) if shell.result(job) is None]
        if not running:
            await trio.lowlevel.checkpoint()
            return
        async with trio.open_nursery() as nursery:
            for job in running:
                nursery.start_soon(partial(shell.kill, job, notify=False))

    async def _read_all(
        self, receive: trio.abc.ReceiveStream, prompts: trio.Nursery, others: trio.Nursery
    ) -> None:
        splitter = rpc.LineSplitter(self._max_line)
        while True:
            if self._budget.paused:
                # The client is not reading what it asked for: take in no more work.
                await self._budget.resumed()
            try:
                data = await receive.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""  # a broken input is an end of input
            lines = list(splitter.feed(data)) if data else list(splitter.end())
            for line in lines:
                if line is None:
                    self._send(
                        rpc.encode_error(
                            None, rpc.INVALID_REQUEST, f"line longer than {self._max_line} bytes"
                        )
                    )
                    continue
                self._dispatch(rpc.parse(line), prompts, others)
            if not data:
                # No answer can come now: whoever waits for one is told (a permission
                # request then cancels its turn).
                self._client.close()
                return

    def _dispatch(
        self, message: rpc.Message | None, prompts: trio.Nursery, others: trio.Nursery
    ) -> None:
        """Seam: a double may change how a frame, a malformed one included, is handled."""
        if message is None:
            return
        if isinstance(message, rpc.Invalid):
            logger.warning("bad frame: %s", message.detail)
            if message.answer:
                self._send(rpc.encode_error(message.id, message.code, message.detail))
            return
        if isinstance(message, rpc.Request | rpc.Notification):
            try:
                _params.check(message.method, message.params, self._protocol)
                if self._protocol == v2.PROTOCOL_V2 and message.method in v2.V1_ONLY:
                    raise rpc.JsonRpcError(
                        rpc.METHOD_NOT_FOUND,
                        f"{message.method} is not an ACP v2 method; this connection speaks v2",
                    )
            except rpc.JsonRpcError as exc:
                if isinstance(message, rpc.Request):
                    self._send(rpc.encode_error(message.id, exc.code, exc.detail))
                else:
                    logger.warning("%s ignored: %s", message.method, exc.detail)
                return
        if (
            isinstance(message, rpc.Request)
            and message.method == "initialize"
            and not self._negotiated
        ):
            # Negotiated as it is read: a frame read after it is read in its version.
            self._protocol = v2.negotiate(message.params["protocolVersion"])
            self._negotiated = True
        if isinstance(message, rpc.Request) and message.method == "session/prompt":
            # Admitted here, synchronously, so a session/cancel read right after it (even in
            # the same read) finds the prompt in flight and, unless it has links to read
            # first, its turn started.
            try:
                session, prompt = self._admit(message.params)
            except rpc.JsonRpcError as exc:
                self._send(rpc.encode_error(message.id, exc.code, exc.detail))
            else:
                self._prompting[message.id] = session
                blocks: list[Any] = message.params["prompt"]
                if self._protocol == v2.PROTOCOL_V2 and prompt.message_id is not None:
                    self._accept(message.id, session, prompt, blocks)
                prompts.start_soon(self._settle, message.id, session, prompt, blocks)
        elif isinstance(message, rpc.Request) and message.method in INJECT_METHODS:
            # Admitted as it is read, like a prompt: a cancel read after it finds it queued.
            try:
                receipt = self._inject(message.method, message.params)
            except rpc.JsonRpcError as exc:
                self._send(rpc.encode_error(message.id, exc.code, exc.detail))
            else:
                self._send_result(message.id, receipt)
        elif isinstance(message, rpc.Request):
            others.start_soon(self._answer, message)
        elif isinstance(message, rpc.Notification):
            self._notification(message)
        else:
            self._client.resolve(message)

    async def _write_all(self, send: trio.abc.SendStream, writer: trio.CancelScope) -> None:
        async def write(frames: list[Outgoing]) -> bool:
            try:
                await send.send_all(encode(frames))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                logger.warning("the client stopped reading; dropping further frames")
                self._budget.abandon()
                return False
            self._budget.written(sum(map(size, frames)))
            return True

        with writer:
            await write_in_batches(self._out_receive, write)

    def _send(self, frame: Outgoing) -> None:
        try:
            self._out.send_nowait(frame)
            self._budget.queue(size(frame))
        except trio.ClosedResourceError:
            logger.debug(
                "frame after the connection closed, dropped: %r",
                frame if isinstance(frame, Text) else frame[:200],
            )

    def _update(self, session_id: str, update: Mapping[str, Any]) -> None:
        """Send `update`, a v1 payload: in v2's shape on a v2 connection, if v2 has it."""
        if self._protocol == v2.PROTOCOL_V2:
            translated = v2.update(update)
            if translated is None:
                return
            update = translated
        self._send(update_frame(session_id, update))

    async def client_request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send the client the request `method` with `params` and return its result.

        Always a checkpoint; cancellable while it waits (the request is then abandoned and
        a later answer ignored). Raises `ClientRequestError` (`acp._jsonrpc`) when the client
        answers an error (`answered`, and its `code`), or when its input has ended or ends
        first (not `answered`).
        """
        if self._protocol == v2.PROTOCOL_V2 and method == "session/request_permission":
            # v2 tells the client the turn waits on it, and that it goes on once answered.
            session_id = str(params.get("sessionId"))
            self._send(update_frame(session_id, v2.requires_action()))
            answer = await self._client.request(method, v2.permission_params(params))
            if not v2.ends_turn(answer):
                self._send(update_frame(session_id, v2.running()))
            return answer
        return await self._client.request(method, params)

    # -- requests ----------------------------------------------------------------------------

    async def _answer(self, request: rpc.Request) -> None:
        scope = trio.CancelScope()
        self._answering[request.id] = scope
        result: Any = None
        try:
            with scope:
                result = await self._request(request.method, request.params)
            if scope.cancelled_caught:
                self._send(
                    rpc.encode_error(
                        request.id,
                        rpc.REQUEST_CANCELLED,
                        f"{request.method} cancelled by the client",
                    )
                )
                return
        except rpc.JsonRpcError as exc:
            self._send(rpc.encode_error(request.id, exc.code, exc.detail))
        except Exception as exc:
            logger.exception("%s failed", request.method)
            self._send(rpc.encode_error(request.id, rpc.INTERNAL_ERROR, describe(exc)))
        else:
            answer = result.result if isinstance(result, Answer) else result
            if self._protocol == v2.PROTOCOL_V2:
                answer = v2.result(request.method, answer)
            self._send_result(request.id, answer)
            if isinstance(result, Answer):
                for update in result.updates:
                    self._update(result.session_id, update)
        finally:
            if self._answering.get(request.id) is scope:
                del self._answering[request.id]

    def _send_result(self, request_id: rpc.RequestId, result: Any) -> None:
        """Seam: a double may change how a request's result is answered (twice, late)."""
        try:
            frame = rpc.encode_result(request_id, result)
        except ValueError as exc:  # not strict JSON (NaN): answer, never crash the server
            logger.exception("the answer to %r could not be encoded", request_id)
            frame = rpc.encode_error(request_id, rpc.INTERNAL_ERROR, describe(exc))
        self._send(frame)

    async def _request(self, method: str, params: Mapping[str, Any]) -> Any:
        """The result of a request other than a prompt or an inject, by its method; raises
        JsonRpcError for the error to answer instead.
        Seam: a double may change how a method is answered (in one protocol version)."""
        if method == "initialize":
            await trio.lowlevel.checkpoint()
            self._client_reads_files = m.client_reads_files(params)
            self._client_writes_files = m.client_writes_files(params)
            self._client_has_terminal = m.client_has_terminal(params)
            logger.info("initialize from %s", m.client_name(params))
            if self._protocol == v2.PROTOCOL_V2:
                logger.info("speaking ACP v2 (the draft) on this connection")
                return v2.initialize_result(self._version)
            return m.initialize_result(self._version)
        if method == "authenticate":
            await trio.lowlevel.checkpoint()
            return {}
        if method == "session/new":
            return await self._new_session(params)
        if method == "session/load":
            return await self._load_session(params)
        if method == "session/resume":
            if self._protocol == v2.PROTOCOL_V2:
                answer = await self._load_session(params, replay=v2.replays(params), method=method)
                # v2: the session's state, after any replay and before the answer.
                live = self._sessions.get(answer.session_id)
                busy = live is not None and live.prompt is not None
                self._send(update_frame(answer.session_id, v2.running() if busy else v2.idle({})))
                return answer
            return await self._load_session(params, replay=False, method=method)
        if method == "session/close":
            return await self._close_session(params)
        if method == "session/delete":
            return await self._delete_session(params)
        if method in ("session/set_mode", "session/set_config_option"):
            await trio.lowlevel.checkpoint()
            return self._configure(method, params)
        if method == "session/list":
            return await self._list_sessions(params)
        await trio.lowlevel.checkpoint()
        raise rpc.JsonRpcError(rpc.METHOD_NOT_FOUND, f"this agent does not implement {method!r}")

    def _notification(self, message: rpc.Notification) -> None:
        if message.method == "session/cancel":
            self._cancel(message.params)
        elif message.method == "$/cancel_request":
            self._cancel_request(message.params.get("requestId"))
        else:
            logger.info("notification %s ignored", message.method)

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise rpc.JsonRpcError.internal(f"the connection is closing; {method} refused")

    def _require(self, params: Mapping[str, Any]) -> SessionState:
        sid = m.require_session_id(params)
        session = self._sessions.get(sid)
        if session is None:
            raise rpc.JsonRpcError.invalid_params(f"unknown session: {sid}")
        return session

    async def _new_session(self, params: Mapping[str, Any]) -> Answer:
        """Seam: a double may change how `session/new` is answered (never, late)."""
        self._check_open("session/new")
        cwd = m.require_cwd(params)
        servers = m.mcp_servers(params)  # a malformed entry is refused before anything starts
        return await self._opener.new(
            cwd, servers, still_open=self._check_not_closed, install=self._install
        )

    async def _list_sessions(self, params: Mapping[str, Any]) -> dict[str, Any]:
        infos = await self._runtime.sessions.list_sessions()
        for info in infos:
            if info.damage is not None:
                logger.warning("session/list leaves out a damaged session: %s", info.damage)
        return _listing.page([info for info in infos if info.damage is None], params)

    async def _load_session(
        self, params: Mapping[str, Any], *, replay: bool = True, method: str = "session/load"
    ) -> Answer:
        """`session/load`, or `session/resume`: the same session made live, its history
        replayed as updates first (`replay`: a load, or a v2 resume from the start) or not at
        all (D507, D526).
        Seam: a double may change what a load or a resume replays."""
        self._check_open(method)
        sid = m.require_session_id(params)
        cwd = m.require_cwd(params)
        servers = m.mcp_servers(params)
        updates = self._update if replay else None
        live = self._sessions.get(sid)
        if live is not None:
            # A client reopening a thread it has open (D505).
            return await self._opener.reattach(live, cwd, servers, replay=updates)
        if sid in self._loading:
            raise rpc.JsonRpcError.invalid_params(
                f"session {sid} is being opened by an earlier request; wait for its answer"
            )
        self._loading.add(sid)
        try:
            return await self._opener.load(
                sid,
                cwd,
                servers,
                still_open=self._check_not_closed,
                install=self._install,
                replay=updates,
            )
        finally:
            self._loading.discard(sid)

    async def _close_session(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`session/close`: the session's turn is cancelled as by `session/cancel` (its prompt
        answered first), its jobs killed, its agent and MCP servers closed; it stays stored,
        so it can be loaded again (D507)."""
        sid = m.require_session_id(params)
        session = self._sessions.pop(sid, None)
        if session is None:
            await trio.lowlevel.checkpoint()
            raise rpc.JsonRpcError.invalid_params(f"session {sid} is not open on this connection")
        await self._close_open(session)
        return {}

    async def _delete_session(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`session/delete`: the session is closed first if it is open on this connection (as
        by `session/close`), then removed from the store; deleting a session that is not
        stored succeeds, as the spec asks (D508)."""
        self._check_open("session/delete")
        sid = m.require_session_id(params)
        if sid in self._loading:
            await trio.lowlevel.checkpoint()
            raise rpc.JsonRpcError.invalid_params(
                f"session {sid} is being opened by an earlier request; wait for its answer"
            )
        session = self._sessions.pop(sid, None)
        if session is not None:
            await self._close_open(session)
        try:
            await self._runtime.sessions.delete(sid)
        except DuplicateSessionError as exc:  # live in another process sharing the store
            raise rpc.JsonRpcError.invalid_params(str(exc)) from None
        return {}

    async def _close_open(self, session: SessionState) -> None:
        """Close `session`, taken out of the table already: its turn cancelled, its prompt
        answered, its jobs killed, its agent and MCP servers closed.
        Seam: a double may change what a close does to the turn under way."""
        prompt = session.prompt
        if prompt is not None:
            prompt.cancel_requested = True
        session.handle.agent.cancel("session/close", cause="user")
        self._left_queue(session, "cancelled")
        with trio.CancelScope(shield=True):
            # Once begun, the close is whole: the session is gone from the table already.
            await self._end_session(session)
            self._told_closed(session)
            if prompt is not None:
                await prompt.answered.wait()

    def _check_not_closed(self, method: str) -> None:
        if self._closed:
            # The connection closed while the agent was being made: the caller closes it,
            # since the teardown never saw it.
            raise rpc.JsonRpcError.internal(f"connection closed during {method}")

    def _install(
        self, scope: SessionScope, handle: AgentHandle, cwd: str, settings: modes.Settings
    ) -> None:
        sid = handle.agent.id
        stop = handle.agent.session.observe(lambda record: self._on_record(sid, record))
        session = self._sessions[sid] = SessionState(scope, handle, cwd, settings, stop)
        for message_id, _ in handle.agent.pending:
            # Prompts a loaded session holds parked: their outcome is told when they run.
            session.outcomes.watch(message_id)
        logger.info("session %s live in %s (%d tools)", sid, cwd, len(scope.tools))

    # -- modes and models ---------------------------------------------------------------------

    def _configure(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """`session/set_mode` or `session/set_config_option`: switch, tell the client, answer."""
        session = self._require(params)
        settings = session.settings
        switched = settings.configure(method, params)
        if switched == modes.MODE_CONFIG:
            self._update(session.id, m.current_mode_update(settings.policy.mode))
        else:
            # The commands a session offers are its model's: a switch may add or drop them.
            self._update(
                session.id, m.available_commands_update(commands_of(settings.model.active()))
            )
        options = settings.config_options()
        if method == "session/set_mode":
            self._update(session.id, m.config_option_update(options))
            return {}
        return {"configOptions": options}

    def _admit(self, params: Mapping[str, Any]) -> tuple[SessionState, PromptState]:
        """Check a prompt, take the session's one slot and, unless it has links to read
        first, send it to the agent.
        Seam: a double may change how a prompt is admitted.
        """
        self._check_open("session/prompt")
        session = self._require(params)
        if session.prompt is not None:
            raise rpc.JsonRpcError.invalid_params(
                f"a prompt is already in flight for session {session.id}"
            )
        prompt = PromptState(p.blocks(params))
        if not p.has_links(prompt.parts):
            send_prompt(session, prompt, p.compose(prompt.parts, {}))
        session.prompt = prompt
        return session, prompt

    def _inject(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Steer or queue a prompt (`session/inject`, `_trio-agents/steer`, `_trio-agents/queue`)
        and return its receipt (D530).
        Seam: a double may change how a steer or a queued prompt is admitted."""
        self._check_open(method)
        return inject(self._require(params), method, params)

    def _client_read(self, session: SessionState) -> ClientRead | None:
        """How a link is read through the client, if it offered `fs.readTextFile`."""
        if not self._client_reads_files:
            return None
        return client_reader(self.client_request, session.id)

    def _file_access(self, session_id: str) -> FileAccess:
        """How session `session_id`'s file tools read and write: through the client for
        what `initialize` offered (`fs/read_text_file`, `fs/write_text_file`), this
        machine's file system for the rest (D521)."""
        local = LocalFiles()
        if not (self._client_reads_files or self._client_writes_files):
            return local
        return ClientFiles(
            self.client_request,
            session_id,
            reads=self._client_reads_files,
            writes=self._client_writes_files,
            local=local,
        )

    def _terminal(self, session_id: str) -> Foreground | None:
        """Where session `session_id`'s foreground commands run: the client's terminal when
        the server may use it and `initialize` offered it, else None (the executor, D550)."""
        if not (self._use_client_terminal and self._client_has_terminal):
            return None
        shell = self._runtime.shell
        # What the executor adds to a command's environment, less the allowlist of this
        # process's own: the client's terminal has its own PATH, HOME and locale.
        env = {**QUIET_TOOLS, **{n: os.environ[n] for n in shell.pass_env if n in os.environ}}
        env.update(shell.env)
        terminal = ClientTerminal(
            self.client_request,
            session_id,
            show=lambda call_id, terminal_id: self._update(
                session_id, m.terminal_update(call_id, terminal_id)
            ),
            env=env,
            output_limit=shell.max_output_bytes,
        )
        return terminal.run

    def _accept(
        self,
        request_id: rpc.RequestId,
        session: SessionState,
        prompt: PromptState,
        blocks: list[Any],
    ) -> None:
        """v2: the prompt is in the conversation. Answer its receipt, say where it went and
        that the session runs; its turn's end is told by an `idle` (D526).
        Seam: a double may change what a v2 prompt's acceptance sends, and when."""
        assert prompt.message_id is not None
        prompt.accepted = True
        if self._prompting.get(request_id) is session:
            del self._prompting[request_id]  # answered: `$/cancel_request` no longer applies
        self._send_result(request_id, {"messageId": prompt.message_id})
        self._send(update_frame(session.id, v2.user_message(prompt.message_id, blocks)))
        self._send(update_frame(session.id, v2.running()))

    async def _settle(
        self,
        request_id: rpc.RequestId,
        session: SessionState,
        prompt: PromptState,
        blocks: list[Any],
    ) -> None:
        """Answer the prompt once it has settled (`_prompt_turn.settle`): every update of its
        turn is queued by then, and its records are committed. In v2 it was answered when it
        was accepted, and its turn's end is an `idle` instead.
        Seam: a double may change when, or with what, a prompt is answered.
        """
        try:
            sent = None
            if self._protocol == v2.PROTOCOL_V2:
                sent = partial(self._accept, request_id, session, prompt, blocks)
            outcome = await settle(
                session, prompt, self._runtime.sessions, self._client_read, sent=sent
            )
            if prompt.accepted:
                self._send(update_frame(session.id, v2.idle(outcome)))
            elif self._protocol == v2.PROTOCOL_V2 and not isinstance(outcome, rpc.JsonRpcError):
                # Cancelled while its links were read: it never reached the conversation.
                self._send(
                    rpc.encode_error(
                        request_id,
                        rpc.REQUEST_CANCELLED,
                        "session/prompt cancelled before it was accepted",
                    )
                )
            elif isinstance(outcome, rpc.JsonRpcError):
                self._send(rpc.encode_error(request_id, outcome.code, outcome.detail))
            else:
                self._send_result(request_id, outcome)
        finally:
            if prompt.message_id is not None:
                # Its answer is its outcome: no notification of it follows (D532).
                session.outcomes.forget(prompt.message_id)
            prompt.answered.set()
            if self._prompting.get(request_id) is session:
                del self._prompting[request_id]

    def _cancel_request(self, request_id: object) -> None:
        """`$/cancel_request`: a prompt in flight is cancelled as by `session/cancel` (it
        answers `cancelled`, a valid result); another request's answer is cancelled and
        answered -32800; one not in flight (answered already) is ignored (D507)."""
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            logger.warning("$/cancel_request ignored: requestId %r", request_id)
            return
        session = self._prompting.get(request_id)
        if session is not None:
            self._cancel({"sessionId": session.id})
            return
        scope = self._answering.get(request_id)
        if scope is not None:
            scope.cancel()

    def _cancel(self, params: Mapping[str, Any]) -> None:
        """Seam: a double may change what a `session/cancel` does to the prompt in flight."""
        sid = params.get("sessionId")
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            return  # an unknown session: nothing to cancel, and nothing to answer
        if session.prompt is not None:
            session.prompt.cancel_requested = True
        session.handle.agent.cancel("session/cancel", cause="user")
        self._left_queue(session, "cancelled")

    # -- outcomes of steered and queued prompts (D531) -----------------------------------------

    def _left_queue(self, session: SessionState, reason: str) -> None:
        """After a cancel: what it took out of the agent's queue was dropped, for `reason`."""
        pending = {message_id for message_id, _ in session.handle.agent.pending}
        for outcome in session.outcomes.left_queue(pending, reason):
            self._tell(session.id, outcome, session)

    def _told_closed(self, session: SessionState) -> None:
        """After a session's close: whatever it still owed ended with it (its agent is
        gone, and with it the queue)."""
        for outcome in session.outcomes.closed():
            self._tell(session.id, outcome, session)

    def _tell(self, session_id: str, outcome: Outcome, session: SessionState | None = None) -> None:
        """Tell the client `outcome`, or, for the prompt in flight, end its wait: its answer
        is its outcome. Seam: a double may change how an outcome is told (or lose it)."""
        prompt = session.prompt if session is not None else None
        if prompt is not None and prompt.message_id == outcome.message_id:
            prompt.over.set()
            return
        self._send(rpc.encode_notification(OUTCOME_METHOD, outcome.params(session_id)))

    # -- agent output -------------------------------------------------------------------------

    def _on_record(self, session_id: str, record: Record) -> None:
        """Seam: a double may change which updates a session's record becomes, and when."""
        # A session observer must not raise (observers are the persistence path).
        session = self._sessions.get(session_id)
        cwd = session.cwd if session is not None else None
        try:
            for update in m.updates_for_record(record, replay=False, cwd=cwd):
                self._update(session_id, update)
            usage = m.usage_update(record, self._context_window)
            if usage is not None:
                self._update(session_id, usage)
            if session is not None and session.outcomes.watched:
                agent = session.handle.agent
                pending = {mid for mid, _ in agent.pending} if record.type == TURN_END else ()
                for outcome in session.outcomes.on_record(record, pending):
                    self._tell(session_id, outcome, session)
        except Exception:
            logger.exception("mapping %s of session %s failed", record.type, session_id)

    def _on_event(self, event: Event) -> None:
        """Seam: a double may change which session an event's update goes to."""
        if isinstance(event, TextStreamed) and event.agent_id in self._sessions and event.text:
            message_id = m.assistant_message_id(event.turn, event.step)
            self._send(Text(event.agent_id, event.text, message_id))
        elif isinstance(event, ToolStarted) and event.agent_id in self._sessions:
            # Emitted after the call's record (already queued as `pending`) and its approval.
            self._update(event.agent_id, m.tool_started_update(event.call_id))
