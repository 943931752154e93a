"""Seeded-defect ACP servers: `python -m tests.support.acp_defects NAME` runs
`trio-agents acp --model openai` with one realistic mistake patched into the server. The ACP
machine must fail on each with the property `DEFECTS` names (tests/test_acp_conformance.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.abc
import importlib.machinery
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from trio_agents._agent import _mode_policy
from trio_agents._agent._events import TextStreamed
from trio_agents._errors import SessionNotFoundError
from trio_agents._store._sqlite import SqliteStore
from trio_agents.acp import _jsonrpc as rpc
from trio_agents.acp import (
    _listing,
    _mapping,
    _modes,
    _permissions,
    _prompt,
    _server,  # pyright: ignore[reportPrivateUsage]
)
from trio_agents.acp import _v2 as v2  # pyright: ignore[reportPrivateUsage]
from trio_agents.acp._frames import update_frame  # pyright: ignore[reportPrivateUsage]
from trio_agents.acp._server import AcpServer
from trio_agents.acp._session_state import Answer
from trio_agents.acp._stdio import serve_stdio


@dataclass(frozen=True)
class AcpSeeded:
    """A seeded defect of the ACP machine: its name (the catalogue's), the property that
    must catch it, and other properties of the same rule it may trip first."""

    name: str
    property: str
    also: tuple[str, ...] = ()
    machine: str = "acp"


def _update_after_cancel() -> None:
    settle = AcpServer._settle  # pyright: ignore[reportPrivateUsage]

    async def late(self: Any, request_id: Any, session: Any, prompt: Any, blocks: Any) -> None:
        await settle(self, request_id, session, prompt, blocks)
        if prompt.cancel_requested:
            # A last chunk the stream had buffered, sent after the answer.
            late_text = _mapping.agent_text_update("...and one more thing", "late")
            self._update(session.id, late_text)

    AcpServer._settle = late  # type: ignore[method-assign]


def _in_progress_after_the_result() -> None:
    on_record = AcpServer._on_record  # pyright: ignore[reportPrivateUsage]

    def late(self: Any, session_id: str, record: Any) -> None:
        on_record(self, session_id, record)
        if record.type == "tool/result":
            # A progress report that arrives after the end marks the call running again.
            self._update(session_id, _mapping.tool_started_update(str(record.data["call_id"])))

    AcpServer._on_record = late  # type: ignore[method-assign]


def _list_ignores_cwd() -> None:
    page = _listing.page

    def every_directory(sessions: Any, params: Any, size: int = _listing.PAGE_SIZE) -> Any:
        # The filter is read, checked, and then left out of the query.
        return page(sessions, {k: v for k, v in params.items() if k != "cwd"}, size)

    _listing.page = every_directory


def _pages_by_update_time() -> None:
    # The newest first, by when each was last written: a session written to between two
    # pages jumps ahead of the cursor and is on no page.
    _listing._key = lambda session: (session.updated_at, session.id)  # pyright: ignore[reportPrivateUsage]


def _pages_skip_one() -> None:
    # An off-by-one at the page boundary: the cursor names the first session of the next
    # page, which then starts after it.
    page = _listing.page

    def skipping(sessions: Any, params: Any, size: int = _listing.PAGE_SIZE) -> Any:
        result = page(sessions, params, size)
        if "nextCursor" in result:
            bigger = page(sessions, params, size + 1)
            last = bigger["sessions"][-1]["sessionId"]
            key = next(_listing._key(s) for s in sessions if s.id == last)  # pyright: ignore[reportPrivateUsage]
            result["nextCursor"] = _listing._encode(key)  # pyright: ignore[reportPrivateUsage]
        return result

    _listing.page = skipping


def _cancel_answers_end_turn() -> None:
    original = _mapping.stop_reason

    def reason(records: Any, message_id: str, *, cancel_requested: bool) -> Any:
        outcome = original(records, message_id, cancel_requested=cancel_requested)
        return "end_turn" if outcome == "cancelled" else outcome

    _mapping.stop_reason = reason  # the server calls it through the module


def _cut_answers_end_turn() -> None:
    original = _mapping.stop_reason

    def reason(records: Any, message_id: str, *, cancel_requested: bool) -> Any:
        # The finish of the last reply is read but only "stop" and "tool_calls" are known.
        outcome = original(records, message_id, cancel_requested=cancel_requested)
        return "end_turn" if outcome == "max_tokens" else outcome

    _mapping.stop_reason = reason


def _second_answer() -> None:
    send_result = AcpServer._send_result  # pyright: ignore[reportPrivateUsage]

    def twice(self: Any, request_id: Any, result: Any) -> None:
        send_result(self, request_id, result)
        if isinstance(result, Mapping) and "sessionId" in result:
            send_result(self, request_id, result)  # a retry path that forgot it had answered

    AcpServer._send_result = twice  # type: ignore[method-assign]


def _crossed_sessions() -> None:
    on_event = AcpServer._on_event  # pyright: ignore[reportPrivateUsage]

    def crossed(self: Any, event: Any) -> None:
        sessions = list(self._sessions)
        if isinstance(event, TextStreamed) and event.agent_id in sessions and len(sessions) > 1:
            # Streamed text tagged with the first session's id, whichever session streamed it.
            event = dataclasses.replace(event, agent_id=sessions[0])
        on_event(self, event)

    AcpServer._on_event = crossed  # type: ignore[method-assign]


def _load_without_text() -> None:
    original = _mapping.updates_for_record

    def updates(
        record: Any, *, replay: bool, step: tuple[int, int] = (0, 0), cwd: str | None = None
    ) -> list[dict[str, Any]]:
        found = original(record, replay=replay, step=step, cwd=cwd)
        if replay:  # replays the prompts, forgets what the model answered
            return [u for u in found if u.get("sessionUpdate") != "agent_message_chunk"]
        return found

    _mapping.updates_for_record = updates  # the server calls it through the module


def _queued_counts_as_committed() -> None:
    # A store that batches: it says a queued record is committed, and its writer commits
    # only when flushed or closed. An answered turn then sits in memory until the end.
    def appended(self: Any, session: Any, record: Any) -> None:
        with self._guarded():
            self._pending.append((session, len(session) - 1, record))

    SqliteStore._appended = appended  # type: ignore[method-assign]
    SqliteStore._committed_all = lambda self, session: True  # type: ignore[method-assign]


def _empty_session_not_found() -> None:
    load = SqliteStore.load

    async def with_history(self: Any, session_id: str) -> Any:
        stored = await load(self, session_id)
        if not stored.records:  # "nothing to resume": a session without history is missing
            raise SessionNotFoundError(f"no session {session_id!r} is stored")
        return stored

    SqliteStore.load = with_history  # type: ignore[method-assign]


def _malformed_kills() -> None:
    dispatch = AcpServer._dispatch  # pyright: ignore[reportPrivateUsage]

    def fragile(self: Any, message: Any, prompts: Any, others: Any) -> None:
        if isinstance(message, rpc.Invalid):
            raise ValueError(f"cannot handle frame: {message.detail}")
        dispatch(self, message, prompts, others)

    AcpServer._dispatch = fragile  # type: ignore[method-assign]


def _malformed_ignored() -> None:
    dispatch = AcpServer._dispatch  # pyright: ignore[reportPrivateUsage]

    def silent(self: Any, message: Any, prompts: Any, others: Any) -> None:
        if isinstance(message, rpc.Invalid) and message.code == rpc.PARSE_ERROR:
            return  # logged and dropped, as some JSON-RPC stacks do
        dispatch(self, message, prompts, others)

    AcpServer._dispatch = silent  # type: ignore[method-assign]


def _nan_read_as_json() -> None:
    # The hook that refuses NaN and Infinity is dropped: Python's parser takes them.
    rpc._not_json = float  # type: ignore[assignment]  # pyright: ignore[reportPrivateUsage]


def _bad_method_notification_dropped() -> None:
    parse = rpc.parse

    def lenient(line: bytes) -> Any:
        message = parse(line)
        bad_method = isinstance(message, rpc.Invalid) and "method must be a string" in (
            message.detail
        )
        if bad_method and message.id is None:  # type: ignore[union-attr]
            return None  # taken for a notification, which is never answered
        return message

    rpc.parse = lenient


def _no_exit_at_eof() -> None:
    serve = serve_stdio

    async def lingering(*args: Any, **kwargs: Any) -> None:
        await serve(*args, **kwargs)
        await trio.sleep_forever()  # a background task nobody stops

    import trio_agents._cli._acp as acp_cli  # it holds its own reference to serve_stdio

    setattr(acp_cli, "serve_stdio", lingering)  # noqa: B010


def _leaves_a_child() -> None:
    # A helper process started at launch in a session of its own and never stopped.
    subprocess.Popen(
        ["sleep", "600"], start_new_session=True, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _stream_outlives_cancel() -> None:
    # The model's stream is read ahead by a task of its own, which the turn does not own: a
    # cancelled turn stops taking chunks, and the reader goes on holding the request open.
    from trio_agents._model import _openai

    stream = _openai.OpenAICompatibleModel.stream

    async def read_ahead(self: Any, request: Any) -> Any:
        send, receive = trio.open_memory_channel[tuple[Any, BaseException | None]](math.inf)

        async def reader() -> None:
            # Nobody may be taking the chunks any more: read on, and drop them.
            async with send:
                try:
                    async for chunk in stream(self, request):
                        with contextlib.suppress(trio.BrokenResourceError):
                            send.send_nowait((chunk, None))
                except Exception as exc:
                    with contextlib.suppress(trio.BrokenResourceError):
                        send.send_nowait((None, exc))

        trio.lowlevel.spawn_system_task(reader)
        async with receive:
            async for chunk, error in receive:
                if error is not None:
                    raise error
                yield chunk

    _openai.OpenAICompatibleModel.stream = read_ahead  # type: ignore[method-assign]


def _tool_outlives_cancel() -> None:
    # A foreground command runs as a job the tool waits for: a cancelled wait leaves the job
    # running until the session ends.
    from trio_agents._shell._executor import ShellExecutor

    async def run(self: ShellExecutor, spec: Any) -> Any:
        return await self.wait(await self.start(spec))

    ShellExecutor.run = run  # type: ignore[method-assign]


def _when_imported(name: str, patch: Callable[[Any], None]) -> None:
    """Run `patch` on module `name` as it is first imported: a defect in a module the
    server imports on first use (the MCP SDK's, a second of CPU) costs nothing before."""

    class Patching(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
            if fullname != name:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            loader = spec.loader if spec is not None else None
            if loader is None:
                return spec
            execute = loader.exec_module

            def exec_module(module: Any) -> None:
                execute(module)
                patch(module)

            loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, Patching())


def _mcp_child_outlives_agent() -> None:
    # An MCP server is ended by closing its stdin and waiting for it: its own children (an
    # `npx` wrapper's node, a language server) are never signalled.
    _when_imported("trio_agents._mcp._process", _end_leader_only)


def _end_leader_only(_process: Any) -> None:
    async def end_leader(process: trio.Process, grace: float) -> None:
        if process.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await process.stdin.aclose()
        with trio.move_on_after(grace):
            await process.wait()

    _process.end_group = end_leader


def _mcp_servers_ignored() -> None:
    # The session is made without the servers the client named (they are "optional").
    new_session = AcpServer._new_session  # pyright: ignore[reportPrivateUsage]

    async def without_servers(self: Any, params: Any) -> Any:
        return await new_session(self, {**params, "mcpServers": []})

    AcpServer._new_session = without_servers  # type: ignore[method-assign]


def _banner_on_stdout() -> None:
    os.write(1, b"trio-agents acp: ready\n")  # a log line on the protocol's stream


def _second_session_never_answered() -> None:
    new_session = AcpServer._new_session  # pyright: ignore[reportPrivateUsage]
    made = [0]

    async def stuck(self: Any, params: Any) -> Any:
        made[0] += 1
        if made[0] == 2:
            await trio.sleep_forever()  # waits on a lock the first session holds
        return await new_session(self, params)

    AcpServer._new_session = stuck  # type: ignore[method-assign]


def _sticky_cancel() -> None:
    cancel, admit = AcpServer._cancel, AcpServer._admit  # pyright: ignore[reportPrivateUsage]
    pending: set[str] = set()

    def remembered(self: Any, params: Any) -> None:
        session = self._sessions.get(params.get("sessionId"))
        if session is not None and session.prompt is None:
            pending.add(session.id)  # a flag set with nothing to cancel, never cleared
        cancel(self, params)

    def admit_cancelled(self: Any, params: Any) -> Any:
        session, prompt = admit(self, params)
        if session.id in pending:
            pending.discard(session.id)
            prompt.cancel_requested = True
            session.handle.agent.cancel("stale session/cancel", cause="user")
        return session, prompt

    AcpServer._cancel = remembered  # type: ignore[method-assign]
    AcpServer._admit = admit_cancelled  # type: ignore[method-assign]


def _unknown_option_allows() -> None:
    original = _permissions.decision_for

    def lenient(result: object) -> Any:
        decision = original(result)
        if decision.note is not None and "was not offered" in decision.note:
            # A lookup that falls back to the first option, which allows.
            return dataclasses.replace(decision, outcome="allow_once", note=None)
        return decision

    _permissions.decision_for = lenient  # the approver calls it through the module


def _permission_outlives_cancel() -> None:
    ask = _permissions.AcpApprover.__call__

    async def waits(self: Any, request: Any) -> Any:
        with trio.CancelScope(shield=True):  # "the dialog is open: let the user decide"
            return await ask(self, request)

    _permissions.AcpApprover.__call__ = waits  # type: ignore[method-assign]


def _embedded_text_left_out() -> None:
    compose = _prompt.compose

    def without_embedded(parts: Any, read: Any) -> str:
        # Embedded resources are taken for attachments the editor shows, not context.
        kept = [part for part in parts if not isinstance(part, _prompt.Embedded)]
        return compose(kept, read)

    _prompt.compose = without_embedded


def _client_text_replaced_by_disk() -> None:
    client_reader = _server.client_reader  # type: ignore[attr-defined]

    def reader(request: Any, session_id: str) -> Any:
        through_client = client_reader(request, session_id)

        async def read(path: str) -> str:
            await through_client(path)  # asked, to see that the editor can read it...
            return await trio.Path(path).read_text()  # ...and then the disk's text is sent

        return read

    _server.client_reader = reader  # type: ignore[attr-defined]


def _config_options_memoized() -> None:
    config_options = _modes.Settings.config_options
    made: dict[int, Any] = {}

    def memoized(self: Any) -> Any:
        # Built once per session, as if the options could not change after it opened.
        return made.setdefault(id(self), config_options(self))

    _modes.Settings.config_options = memoized  # type: ignore[method-assign]


def _unknown_mode_applied() -> None:
    checked = _mode_policy._checked  # pyright: ignore[reportPrivateUsage]

    def switch(self: Any, mode: str) -> None:
        self._mode = mode  # set, then checked: a refused mode stays set
        checked(mode)

    _mode_policy.ModePolicy.switch = switch  # type: ignore[method-assign]


def _queued_lost_on_cancel() -> None:
    tell = AcpServer._tell  # pyright: ignore[reportPrivateUsage]

    def forget_drops(self: Any, session_id: str, outcome: Any, session: Any = None) -> None:
        # The cancel empties the queue, and nobody is told what was in it.
        if outcome.state != "dropped":
            tell(self, session_id, outcome, session)

    AcpServer._tell = forget_drops  # type: ignore[method-assign]


def _concurrent_new_refused() -> None:
    new_session = AcpServer._new_session  # pyright: ignore[reportPrivateUsage]
    making = [0]

    async def one_at_a_time(self: Any, params: Any) -> Any:
        # A session/new that comes while another is being made is refused, not queued.
        if making[0]:
            raise rpc.JsonRpcError(rpc.INTERNAL_ERROR, "busy making a session")
        making[0] += 1
        try:
            return await new_session(self, params)
        finally:
            making[0] -= 1

    AcpServer._new_session = one_at_a_time  # type: ignore[method-assign]


def _steer_queued_as_prompt() -> None:
    inject = AcpServer._inject  # pyright: ignore[reportPrivateUsage]

    def as_prompt(self: Any, method: str, params: Any) -> Any:
        # Every mid-turn prompt waits for the turn to end: the steer never steers.
        return inject(self, "_trio-agents/queue", params)

    AcpServer._inject = as_prompt  # type: ignore[method-assign]


def _queue_merged_into_turn() -> None:
    inject = AcpServer._inject  # pyright: ignore[reportPrivateUsage]

    def as_steer(self: Any, method: str, params: Any) -> Any:
        # A queued prompt joins the running turn, as if it were steering.
        return inject(self, "_trio-agents/steer", params)

    AcpServer._inject = as_steer  # type: ignore[method-assign]


# -- ACP v2 (P24-P26): each patch changes only what a connection that negotiated v2 sees. --


def _v2_capabilities_read_eagerly() -> None:
    request = AcpServer._request  # pyright: ignore[reportPrivateUsage]

    async def renamed(self: Any, method: str, params: Any) -> Any:
        if method == "initialize" and self._protocol == v2.PROTOCOL_V2:
            # v2 renamed clientCapabilities to capabilities: the new name, the old one as the
            # fallback. `get` evaluates its fallback first, so a client that sends only v2's
            # name (every v2 client) fails with a KeyError, answered as an internal error.
            capabilities = params.get("capabilities", params["clientCapabilities"])
            params = {**params, "clientCapabilities": capabilities}
        return await request(self, method, params)

    AcpServer._request = renamed  # type: ignore[method-assign]


def _v2_tool_call_untranslated() -> None:
    update = v2.update

    def translate(v1: Any) -> Any:
        # Only `tool_call_update` is matched: the call's first update goes out as v1's
        # `tool_call`, its diff in v1's shape.
        if v1.get("sessionUpdate") == "tool_call":
            return dict(v1)
        return update(v1)

    v2.update = translate  # the server calls it through the module


def _v2_new_session_answer_untranslated() -> None:
    # The answers v2 reshapes, less session/new: its `modes` stay, its options keep `id`.
    v2._RESULTS = frozenset({"session/resume", "session/set_config_option"})  # type: ignore[misc]  # pyright: ignore[reportPrivateUsage]


def _v2_permission_asked_in_v1_shape() -> None:
    client_request = AcpServer.client_request

    async def ask(self: Any, method: str, params: Any) -> Any:
        if self._protocol != v2.PROTOCOL_V2 or method != "session/request_permission":
            return await client_request(self, method, params)
        # The states around it are v2's; the request itself is sent as v1 asks it (its
        # `toolCall`, no `title`, no `subject`).
        session_id = str(params.get("sessionId"))
        self._send(update_frame(session_id, v2.requires_action()))
        answer = await self._client.request(method, params)
        if not v2.ends_turn(answer):
            self._send(update_frame(session_id, v2.running()))
        return answer

    AcpServer.client_request = ask  # type: ignore[method-assign]


def _v2_resume_replays_v1_updates() -> None:
    load = AcpServer._load_session  # pyright: ignore[reportPrivateUsage]

    async def replaying(
        self: Any, params: Any, *, replay: bool = True, method: str = "session/load"
    ) -> Any:
        if method != "session/resume" or not replay:
            return await load(self, params, replay=replay, method=method)
        self._check_open(method)
        sid = _mapping.require_session_id(params)
        cwd = _mapping.require_cwd(params)
        servers = _mapping.mcp_servers(params)

        def stored(session_id: str, update: Any) -> None:
            # The history as it was stored: framed as is, not through the translation the
            # live updates go through (a v1 `tool_call`, a chunk without its id).
            self._send(update_frame(session_id, update))

        live = self._sessions.get(sid)
        if live is not None:
            return await self._opener.reattach(live, cwd, servers, replay=stored)
        if sid in self._loading:
            raise rpc.JsonRpcError.invalid_params(f"session {sid} is being opened already")
        self._loading.add(sid)
        try:
            return await self._opener.load(
                sid,
                cwd,
                servers,
                still_open=self._check_not_closed,
                install=self._install,
                replay=stored,
            )
        finally:
            self._loading.discard(sid)

    AcpServer._load_session = replaying  # type: ignore[method-assign]


def _v2_mode_update_sent() -> None:
    update = v2.update

    def translate(v1: Any) -> Any:
        # The mode update is v1's alone, but it passes: the translation drops `modes` from
        # the answers and forgets the update that goes with a switch.
        if v1.get("sessionUpdate") == "current_mode_update":
            return dict(v1)
        return update(v1)

    v2.update = translate


def _v2_receipt_at_turn_end() -> None:
    accept = AcpServer._accept  # pyright: ignore[reportPrivateUsage]
    settle = _server.settle  # type: ignore[attr-defined]
    owed: dict[int, Callable[[], None]] = {}

    def later(self: Any, request_id: Any, session: Any, prompt: Any, blocks: Any) -> None:
        prompt.accepted = True
        owed[id(prompt)] = lambda: accept(self, request_id, session, prompt, blocks)

    async def then_receipt(
        session: Any, prompt: Any, store: Any, client_read: Any, sent: Any = None
    ) -> Any:
        # The receipt is answered where v1 answers, once the turn has settled.
        outcome = await settle(session, prompt, store, client_read, sent=sent)
        receipt = owed.pop(id(prompt), None)
        if receipt is not None:
            receipt()
        return outcome

    AcpServer._accept = later  # type: ignore[method-assign]
    _server.settle = then_receipt  # type: ignore[attr-defined]


def _v2_receipt_carries_stop_reason() -> None:
    def accept(self: Any, request_id: Any, session: Any, prompt: Any, blocks: Any) -> None:
        prompt.accepted = True
        if self._prompting.get(request_id) is session:
            del self._prompting[request_id]
        # v1's PromptResponse with the id added: its required stopReason given the
        # provisional `end_turn`, before the turn has run.
        self._send_result(request_id, {"stopReason": "end_turn", "messageId": prompt.message_id})
        self._send(update_frame(session.id, v2.user_message(prompt.message_id, blocks)))
        self._send(update_frame(session.id, v2.running()))

    AcpServer._accept = accept  # type: ignore[method-assign]


def _v2_link_prompt_not_receipted() -> None:
    settle = _server.settle  # type: ignore[attr-defined]

    async def without_receipt(
        session: Any, prompt: Any, store: Any, client_read: Any, sent: Any = None
    ) -> Any:
        # The receipt is sent where a prompt is admitted; the hook for one sent only after
        # its links are read is not passed on. Such a prompt is never accepted: it is
        # answered, after its turn, as cancelled before it was.
        return await settle(session, prompt, store, client_read)

    _server.settle = without_receipt  # type: ignore[attr-defined]


def _v2_receipt_names_request_id() -> None:
    def accept(self: Any, request_id: Any, session: Any, prompt: Any, blocks: Any) -> None:
        prompt.accepted = True
        if self._prompting.get(request_id) is session:
            del self._prompting[request_id]
        # The id of the message that carried the prompt: the JSON-RPC request's.
        self._send_result(request_id, {"messageId": str(request_id)})
        self._send(update_frame(session.id, v2.user_message(prompt.message_id, blocks)))
        self._send(update_frame(session.id, v2.running()))

    AcpServer._accept = accept  # type: ignore[method-assign]


def _v2_user_message_dropped() -> None:
    def accept(self: Any, request_id: Any, session: Any, prompt: Any, blocks: Any) -> None:
        prompt.accepted = True
        if self._prompting.get(request_id) is session:
            del self._prompting[request_id]
        self._send_result(request_id, {"messageId": prompt.message_id})
        for block in blocks:
            # Echoed as v1 chunks, through the translation, which drops a chunk that does not
            # name its message: the client is never told where the prompt went.
            self._update(session.id, {"sessionUpdate": "user_message_chunk", "content": block})
        self._send(update_frame(session.id, v2.running()))

    AcpServer._accept = accept  # type: ignore[method-assign]


def _v2_closed_session_idle_dropped() -> None:
    settle = AcpServer._settle  # pyright: ignore[reportPrivateUsage]

    async def open_only(self: Any, request_id: Any, session: Any, prompt: Any, blocks: Any) -> None:
        if self._protocol != v2.PROTOCOL_V2:
            return await settle(self, request_id, session, prompt, blocks)
        try:
            accept = functools.partial(self._accept, request_id, session, prompt, blocks)
            sessions = self._runtime.sessions
            outcome = await _server.settle(session, prompt, sessions, self._client_read, accept)  # type: ignore[attr-defined]
            if prompt.accepted:
                # Updates go to the sessions open on the connection, as streamed text does: a
                # turn its session/close ended is told no idle at all.
                if session.id in self._sessions:
                    self._send(update_frame(session.id, v2.idle(outcome)))
            elif isinstance(outcome, rpc.JsonRpcError):
                self._send(rpc.encode_error(request_id, outcome.code, outcome.detail))
            else:
                cancelled = "session/prompt cancelled before it was accepted"
                self._send(rpc.encode_error(request_id, rpc.REQUEST_CANCELLED, cancelled))
        finally:
            if prompt.message_id is not None:
                session.outcomes.forget(prompt.message_id)
            prompt.answered.set()
            if self._prompting.get(request_id) is session:
                del self._prompting[request_id]

    AcpServer._settle = open_only  # type: ignore[method-assign]


def _v2_cancel_idle_not_cancelled() -> None:
    cancel = AcpServer._cancel  # pyright: ignore[reportPrivateUsage]

    def stop_only(self: Any, params: Any) -> None:
        sid = params.get("sessionId")
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None or session.prompt is None or not session.prompt.accepted:
            return cancel(self, params)
        # Its receipt answered the prompt already, so only the agent is stopped: the prompt
        # is not marked, and its idle says how the agent's turn ended (aborted: end_turn).
        session.handle.agent.cancel("session/cancel", cause="user")
        self._left_queue(session, "cancelled")

    AcpServer._cancel = stop_only  # type: ignore[method-assign]


def _v2_close_idle_not_cancelled() -> None:
    async def close_open(self: Any, session: Any) -> None:
        prompt = session.prompt
        if prompt is not None and not prompt.accepted:
            # Marked cancelled only while it owes its answer; in v2 its receipt answered
            # it, and its idle says how the agent's turn ended instead.
            prompt.cancel_requested = True
        session.handle.agent.cancel("session/close", cause="user")
        self._left_queue(session, "cancelled")
        with trio.CancelScope(shield=True):
            await self._end_session(session)
            self._told_closed(session)
            if prompt is not None:
                await prompt.answered.wait()

    AcpServer._close_open = close_open  # type: ignore[method-assign]


def _v2_cut_idle_end_turn() -> None:
    idle = v2.idle
    # v2's stop reasons, as a table from v1's that forgot the token limit.
    known = {"end_turn", "cancelled", "max_turn_requests", "refusal", "error"}

    def told(answer: Any) -> dict[str, Any]:
        update = idle(answer)
        if "stopReason" in update and update["stopReason"] not in known:
            update["stopReason"] = "end_turn"
        return update

    v2.idle = told  # the server calls it through the module


def _v2_no_running_after_permission() -> None:
    client_request = AcpServer.client_request

    async def ask(self: Any, method: str, params: Any) -> Any:
        if self._protocol != v2.PROTOCOL_V2 or method != "session/request_permission":
            return await client_request(self, method, params)
        # requires_action while the client decides; the running that must follow an answer
        # that lets the turn go on is forgotten.
        self._send(update_frame(str(params.get("sessionId")), v2.requires_action()))
        return await self._client.request(method, v2.permission_params(params))

    AcpServer.client_request = ask  # type: ignore[method-assign]


def _v2_pending_call_requires_action() -> None:
    on_record = AcpServer._on_record  # pyright: ignore[reportPrivateUsage]

    def pending(self: Any, session_id: str, record: Any) -> None:
        on_record(self, session_id, record)
        if self._protocol == v2.PROTOCOL_V2 and record.type == "tool/call":
            # The state follows the call's status: `pending` is told as waiting on the
            # client, whether or not the mode asks. Only a permission's answer says running.
            self._send(update_frame(session_id, v2.requires_action()))

    AcpServer._on_record = pending  # type: ignore[method-assign]


# -- v2 resume from the start (P27): a closed session's history, then its state. --


def _v2_resume_state_after_answer() -> None:
    request = AcpServer._request  # pyright: ignore[reportPrivateUsage]

    async def told_later(self: Any, method: str, params: Any) -> Any:
        if method != "session/resume" or self._protocol != v2.PROTOCOL_V2:
            return await request(self, method, params)
        answer = await self._load_session(params, replay=v2.replays(params), method=method)
        live = self._sessions.get(answer.session_id)
        busy = live is not None and live.prompt is not None
        # The session's state goes with the updates that follow the answer, as the commands
        # do ("the session must be known to the client before it hears about it").
        state = v2.running() if busy else v2.idle({})
        return Answer(answer.result, answer.session_id, [state, *answer.updates])

    AcpServer._request = told_later  # type: ignore[method-assign]


def _v2_resume_closed_session_not_replayed() -> None:
    load = AcpServer._load_session  # pyright: ignore[reportPrivateUsage]

    async def live_only(
        self: Any, params: Any, *, replay: bool = True, method: str = "session/load"
    ) -> Any:
        sid = params.get("sessionId")
        if method == "session/resume" and isinstance(sid, str) and sid not in self._sessions:
            # The store's path gives the opener a replay for session/load alone, as its
            # docstring says ("not for `session/resume`: None"), written before a v2 resume
            # could replay: a session open on the connection is replayed, a closed one not.
            replay = False
        return await load(self, params, replay=replay, method=method)

    AcpServer._load_session = live_only  # type: ignore[method-assign]


def _v2_resume_replayed_ids_not_receipts() -> None:
    def accept(self: Any, request_id: Any, session: Any, prompt: Any, blocks: Any) -> None:
        prompt.accepted = True
        if self._prompting.get(request_id) is session:
            del self._prompting[request_id]
        # The agent's ids (`m1`, `m2`, ...) are counted per session: the client is given one
        # unique across sessions, minted for the receipt and used for the message it names.
        # The stored message keeps the agent's id, and a replay tells that one.
        message_id = f"msg_{uuid.uuid4().hex}"
        self._send_result(request_id, {"messageId": message_id})
        self._send(update_frame(session.id, v2.user_message(message_id, blocks)))
        self._send(update_frame(session.id, v2.running()))

    AcpServer._accept = accept  # type: ignore[method-assign]


DEFECTS: dict[str, tuple[Callable[[], None], AcpSeeded]] = {
    "update-after-cancelled-answer": (
        _update_after_cancel,
        # The same late chunk after a v2 cancelled idle breaks P26, which may be seen first.
        AcpSeeded("update-after-cancelled-answer", "quiet-after-cancel", ("v2-state-true",)),
    ),
    "cancel-answered-end-turn": (
        _cancel_answers_end_turn,
        # A permission request answered `cancelled` ends its prompt as a cancel must (P8),
        # and so does a cancel while one is held (P9): the same mistake, seen first there
        # when such a request comes first.
        AcpSeeded(
            "cancel-answered-end-turn",
            "cancel-answers-cancelled",
            # The turn's stop reason is v2's idle's too (P26).
            also=("permission-refused-not-run", "permission-skipped-by-cancel", "v2-turn-ends"),
        ),
    ),
    "cut-reply-answered-end-turn": (
        _cut_answers_end_turn,
        AcpSeeded("cut-reply-answered-end-turn", "cut-answers-max-tokens", ("v2-turn-ends",)),
    ),
    "session-new-answered-twice": (
        _second_answer,
        AcpSeeded("session-new-answered-twice", "answer-unique"),
    ),
    "second-session-never-answered": (
        _second_session_never_answered,
        AcpSeeded("second-session-never-answered", "request-answered"),
    ),
    "text-tagged-with-another-session": (
        _crossed_sessions,
        # Text in the first session after its cancel breaks P2 too, which may be seen first.
        AcpSeeded("text-tagged-with-another-session", "sessions-isolated", ("quiet-after-cancel",)),
    ),
    "load-replays-no-agent-text": (
        _load_without_text,
        AcpSeeded("load-replays-no-agent-text", "load-replays"),
    ),
    "queued-counts-as-committed": (
        _queued_counts_as_committed,
        AcpSeeded("queued-counts-as-committed", "answered-durable"),
    ),
    "empty-session-not-found": (
        _empty_session_not_found,
        AcpSeeded("empty-session-not-found", "loads-unprompted"),
    ),
    "malformed-frame-kills-server": (
        _malformed_kills,
        AcpSeeded("malformed-frame-kills-server", "malformed-survives"),
    ),
    "parse-error-unanswered": (
        _malformed_ignored,
        AcpSeeded("parse-error-unanswered", "malformed-answered"),
    ),
    "nan-read-as-json": (_nan_read_as_json, AcpSeeded("nan-read-as-json", "malformed-answered")),
    "non-string-method-unanswered": (
        _bad_method_notification_dropped,
        AcpSeeded("non-string-method-unanswered", "malformed-answered"),
    ),
    "no-exit-at-end-of-input": (
        _no_exit_at_eof,
        AcpSeeded("no-exit-at-end-of-input", "exits-at-eof"),
    ),
    "helper-child-outlives-agent": (
        _leaves_a_child,
        AcpSeeded("helper-child-outlives-agent", "no-orphans"),
    ),
    "idle-cancel-cancels-next-prompt": (
        _sticky_cancel,
        AcpSeeded("idle-cancel-cancels-next-prompt", "prompt-ends-turn"),
    ),
    "banner-on-stdout": (_banner_on_stdout, AcpSeeded("banner-on-stdout", "schema-valid")),
    "unknown-permission-option-allows": (
        _unknown_option_allows,
        AcpSeeded("unknown-permission-option-allows", "permission-refused-not-run"),
    ),
    "prompt-waits-for-permission-after-cancel": (
        _permission_outlives_cancel,
        AcpSeeded("prompt-waits-for-permission-after-cancel", "permission-skipped-by-cancel"),
    ),
    "list-ignores-cwd": (
        _list_ignores_cwd,
        AcpSeeded("list-ignores-cwd", "sessions-listed-once"),
    ),
    "pages-by-update-time": (
        _pages_by_update_time,
        AcpSeeded("pages-by-update-time", "sessions-listed-once", ("sessions-all-listed",)),
    ),
    "pages-skip-one": (
        _pages_skip_one,
        AcpSeeded("pages-skip-one", "sessions-all-listed"),
    ),
    "in-progress-after-the-result": (
        _in_progress_after_the_result,
        AcpSeeded("in-progress-after-the-result", "tool-status-forward"),
    ),
    "embedded-text-left-out": (
        _embedded_text_left_out,
        AcpSeeded("embedded-text-left-out", "prompt-reaches-model"),
    ),
    "client-text-replaced-by-disk": (
        _client_text_replaced_by_disk,
        AcpSeeded("client-text-replaced-by-disk", "client-text-used"),
    ),
    "config-options-memoized": (
        _config_options_memoized,
        AcpSeeded("config-options-memoized", "config-switched"),
    ),
    "unknown-mode-applied": (
        _unknown_mode_applied,
        AcpSeeded("unknown-mode-applied", "config-refused-unchanged"),
    ),
    "stream-outlives-cancel": (
        _stream_outlives_cancel,
        AcpSeeded("stream-outlives-cancel", "cancel-aborts"),
    ),
    "tool-outlives-cancel": (
        _tool_outlives_cancel,
        AcpSeeded("tool-outlives-cancel", "cancel-aborts"),
    ),
    "mcp-child-outlives-agent": (
        _mcp_child_outlives_agent,
        AcpSeeded("mcp-child-outlives-agent", "mcp-reaped"),
    ),
    "mcp-servers-ignored": (
        _mcp_servers_ignored,
        AcpSeeded("mcp-servers-ignored", "mcp-connected"),
    ),
    "concurrent-new-refused": (
        _concurrent_new_refused,
        AcpSeeded("concurrent-new-refused", "sessions-listed-once"),
    ),
    "queued-prompt-lost-on-cancel": (
        _queued_lost_on_cancel,
        AcpSeeded("queued-prompt-lost-on-cancel", "injected-never-lost"),
    ),
    "steer-queued-as-prompt": (
        _steer_queued_as_prompt,
        AcpSeeded("steer-queued-as-prompt", "steer-reaches-turn"),
    ),
    "queue-merged-into-turn": (
        _queue_merged_into_turn,
        AcpSeeded("queue-merged-into-turn", "queued-runs-next"),
    ),
    "v2-initialize-needs-v1-capabilities": (
        _v2_capabilities_read_eagerly,
        AcpSeeded("v2-initialize-needs-v1-capabilities", "v2-negotiated"),
    ),
    "v2-tool-call-sent-as-v1": (
        _v2_tool_call_untranslated,
        AcpSeeded("v2-tool-call-sent-as-v1", "v2-wire"),
    ),
    "v2-session-new-answer-untranslated": (
        _v2_new_session_answer_untranslated,
        AcpSeeded("v2-session-new-answer-untranslated", "v2-wire"),
    ),
    "v2-permission-asked-in-v1-shape": (
        _v2_permission_asked_in_v1_shape,
        AcpSeeded("v2-permission-asked-in-v1-shape", "v2-wire"),
    ),
    "v2-resume-replays-v1-updates": (
        _v2_resume_replays_v1_updates,
        AcpSeeded("v2-resume-replays-v1-updates", "v2-wire"),
    ),
    "v2-mode-update-sent": (
        _v2_mode_update_sent,
        AcpSeeded("v2-mode-update-sent", "v2-wire"),
    ),
    "v2-receipt-at-turn-end": (
        _v2_receipt_at_turn_end,
        # The model's text then comes before any running: a state check may see it first.
        AcpSeeded("v2-receipt-at-turn-end", "v2-receipt", also=("v2-state-true",)),
    ),
    "v2-receipt-carries-stop-reason": (
        _v2_receipt_carries_stop_reason,
        AcpSeeded("v2-receipt-carries-stop-reason", "v2-receipt"),
    ),
    "v2-link-prompt-not-receipted": (
        _v2_link_prompt_not_receipted,
        # Never accepted: no user_message, no running, no idle for a turn that ran.
        AcpSeeded(
            "v2-link-prompt-not-receipted",
            "v2-receipt",
            also=("v2-user-message", "v2-turn-ends"),
        ),
    ),
    "v2-receipt-names-request-id": (
        _v2_receipt_names_request_id,
        AcpSeeded("v2-receipt-names-request-id", "v2-user-message"),
    ),
    "v2-user-message-dropped": (
        _v2_user_message_dropped,
        AcpSeeded("v2-user-message-dropped", "v2-user-message"),
    ),
    "v2-closed-session-idle-dropped": (
        _v2_closed_session_idle_dropped,
        AcpSeeded("v2-closed-session-idle-dropped", "v2-turn-ends"),
    ),
    "v2-cancel-idle-not-cancelled": (
        _v2_cancel_idle_not_cancelled,
        AcpSeeded("v2-cancel-idle-not-cancelled", "v2-turn-ends"),
    ),
    "v2-close-idle-not-cancelled": (
        _v2_close_idle_not_cancelled,
        AcpSeeded("v2-close-idle-not-cancelled", "v2-turn-ends"),
    ),
    "v2-cut-idle-end-turn": (
        _v2_cut_idle_end_turn,
        AcpSeeded("v2-cut-idle-end-turn", "v2-turn-ends"),
    ),
    "v2-no-running-after-permission": (
        _v2_no_running_after_permission,
        AcpSeeded("v2-no-running-after-permission", "v2-state-true"),
    ),
    "v2-pending-call-requires-action": (
        _v2_pending_call_requires_action,
        AcpSeeded("v2-pending-call-requires-action", "v2-state-true"),
    ),
    "v2-resume-state-after-answer": (
        _v2_resume_state_after_answer,
        AcpSeeded("v2-resume-state-after-answer", "v2-resume-replays"),
    ),
    "v2-resume-closed-session-not-replayed": (
        _v2_resume_closed_session_not_replayed,
        AcpSeeded("v2-resume-closed-session-not-replayed", "v2-resume-replays"),
    ),
    "v2-resume-replayed-ids-not-receipts": (
        _v2_resume_replayed_ids_not_receipts,
        AcpSeeded("v2-resume-replayed-ids-not-receipts", "v2-resume-replays"),
    ),
}

ACP_SEEDED: tuple[AcpSeeded, ...] = tuple(seeded for _, seeded in DEFECTS.values())
"""Every seeded defect of the ACP machine."""


def _lists_only_prompted() -> None:
    # Correct, as many agents are: a session is kept (and listed) once it took a prompt.
    page = _listing.page

    def prompted_only(sessions: Any, params: Any, size: int = _listing.PAGE_SIZE) -> Any:
        return page([s for s in sessions if s.turns > 0], params, size)

    _listing.page = prompted_only


def _one_session_a_process() -> None:
    # Correct too, as localharness is: one session a process, a second session/new refused.
    new_session = AcpServer._new_session  # pyright: ignore[reportPrivateUsage]
    made = [0]

    async def one(self: Any, params: Any) -> Any:
        if made[0]:
            raise rpc.JsonRpcError(rpc.INVALID_PARAMS, "this process serves one session")
        made[0] += 1
        return await new_session(self, params)

    AcpServer._new_session = one  # type: ignore[method-assign]


def _sessions_capped() -> None:
    # Correct too: at most three live sessions a process, a session/new past them refused.
    new_session = AcpServer._new_session  # pyright: ignore[reportPrivateUsage]

    async def capped(self: Any, params: Any) -> Any:
        if len(self._sessions) >= 3:
            raise rpc.JsonRpcError(rpc.INVALID_PARAMS, "this process serves three sessions")
        return await new_session(self, params)

    AcpServer._new_session = capped  # type: ignore[method-assign]


def _v1_only() -> None:
    # Correct too: an agent that speaks v1 alone answers 1 to a client asking for 2.
    v2.negotiate = lambda requested: 1


VARIANTS: dict[str, Callable[[], None]] = {
    "v1-only": _v1_only,
    "lists-only-prompted": _lists_only_prompted,
    "one-session-a-process": _one_session_a_process,
    "sessions-capped": _sessions_capped,
}
"""Changes that keep the server conformant, which the suite must not fail (D479)."""


def main() -> int:
    # NAME, or NAME,NAME,...: several defects at once (a run must report each).
    for name in sys.argv[1].split(","):
        VARIANTS[name]() if name in VARIANTS else DEFECTS[name][0]()
    from trio_agents._cli import main as cli

    return cli(["acp", "--model", "openai", *sys.argv[2:]])


if __name__ == "__main__":
    sys.exit(main())
