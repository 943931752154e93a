"""The ACP client side of the ACP machine: one agent process over its stdin and stdout.

`AgentProcess.run` owns the process: it spawns the command (its own session and process
group), reads every line it writes, checks each against the schema, answers the agent's
own requests (permission: as `permission_answers` queues for the session, allow once by
default, or held for the machine to answer later; fs: served from the example's work directory;
anything else: method not found), and keeps the responses and updates in arrival order,
each stamped with a sequence number that the frames it sends share, so "after the answer,
before the next prompt" is a comparison. What is wrong is kept in `problems`, for the
machine's next check to raise: a reader task must not crash the run. On any exit the
process group is killed and, at the end, every descendant the snapshots saw.

Every wait is bounded: an agent that crashes, never answers or writes garbage gets a
verdict, never a hang.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from .._properties import Property
from . import _wire as wire
from ._lines import Lines
from ._permission_rules import LateAnswer, PermissionAnswer, reply
from ._procs import Proc, alive, descendants, kill_all
from ._properties import ANSWER_UNIQUE, REQUEST_ANSWERED, SCHEMA_VALID, V2_WIRE

__all__ = [
    "STDERR_NOTE",
    "TRANSCRIPT_NOTE",
    "AcpTarget",
    "AgentProcess",
    "AgentSetupError",
    "Answer",
    "PermissionAsk",
    "Update",
]

STDERR_TAIL = 4000
MAX_LINE = 16 * 1024 * 1024
MAX_PROBLEMS = 50
TRANSCRIPT_LINES = 80
"""How many frames, both ways, the transcript of a failure keeps: the last ones."""
TRANSCRIPT_WIDTH = 400
"""Characters kept of each frame in the transcript."""
TRANSCRIPT_NOTE = "the wire, its last frames (> sent to the agent, < received from it):"
"""How the note a violation carries with the transcript begins."""
STDERR_NOTE = "the agent's stderr, its end:"
"""How the note a violation carries with the agent's stderr begins."""


class AgentSetupError(Exception):
    """The agent cannot be checked as configured: its command does not start, or it refuses
    `initialize` or `session/new` (it wants authentication, a model setting, ...). Not a
    violation of a rule: the report says what to configure."""


@dataclass(frozen=True)
class AcpTarget:
    """An ACP agent command and how to hand it the endpoint.

    argv: the command and its arguments.
    env: (NAME, TEMPLATE) pairs set in its environment after the defaults.
    files: (PATH, TEMPLATE) pairs written before each start (relative to the example's
        directory).
    timeout: seconds any answer may take (a prompt: once its turn can end).
    grace: seconds it may take to exit at the end of its input.
    """

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    timeout: float = 20.0
    grace: float = 5.0


@dataclass
class Answer:
    """A response to one of our requests: when it came, and its result or error."""

    seq: int
    message: Mapping[str, Any]

    @property
    def result(self) -> Any:
        return self.message.get("result")

    @property
    def error(self) -> Any:
        return self.message.get("error")


@dataclass(frozen=True)
class Update:
    seq: int
    session_id: str
    update: Mapping[str, Any]

    @property
    def text(self) -> str:
        """The text this update carries, wherever it sits (content, title, raw input)."""
        return _texts(self.update)


@dataclass(frozen=True)
class PermissionAsk:
    """A `session/request_permission` the agent sent: when, its id, its params, and what the
    client answered (`held`: not yet; the machine answers it). `stamp` orders it among the
    endpoint's calls (`wire.stamp`)."""

    seq: int
    request_id: Any
    session_id: str
    params: Mapping[str, Any]
    answer: PermissionAnswer = "allow"
    stamp: int = field(default_factory=wire.stamp)


@dataclass
class _Pending:
    method: str
    sent: int
    answered: trio.Event = field(default_factory=trio.Event)
    answers: list[Answer] = field(default_factory=list[Answer])


class AgentProcess:
    """One run of the agent command. `placeholders` fill the target's templates."""

    def __init__(
        self,
        target: AcpTarget,
        placeholders: Mapping[str, str],
        directory: Path,
        waived: frozenset[str] = frozenset(),
    ) -> None:
        self.target = target
        # Properties already found broken in this run: what breaks them again is counted in
        # `again`, not kept in `problems`, so the run goes on to check the others.
        self.waived = waived
        self.again: collections.Counter[str] = collections.Counter()
        # The last frames both ways ("> " sent, "< " received), for a failure's report.
        self.transcript: collections.deque[str] = collections.deque(maxlen=TRANSCRIPT_LINES)
        self.placeholders = dict(placeholders)
        self.directory = directory
        self.workdir = directory / "work"
        self.problems: list[tuple[Property, str]] = []
        self.updates: list[Update] = []
        # Every other notification, an extension's included: (seq, method, params).
        self.notes: list[tuple[int, str, Mapping[str, Any]]] = []
        self.null_errors: list[Answer] = []  # error responses with id null
        self.agent_requests: list[str] = []
        # By session, the answers to its next permission requests in order, the last kept
        # for any after it; allow once for a session with none.
        self.permission_answers: dict[str, list[PermissionAnswer]] = {}
        self.permission_asks: list[PermissionAsk] = []
        self.buffers: dict[Path, str] = {}
        """Files an editor holds with unsaved changes: `fs/read_text_file` answers this
        text, not the file's on disk (rule P18)."""
        self.reads: list[Path] = []  # every path `fs/read_text_file` was asked for
        self.seen: dict[tuple[int, int], Proc] = {}
        self.mcp: list[Proc] = []  # the processes of the MCP servers it was given
        self.mcp_records: list[Path] = []  # where each of those servers records its pids
        self.returncode: int | None = None
        self.stderr_tail = b""
        self._seq = itertools.count(1)
        self._ids = itertools.count(1)
        self._pending: dict[int | str, _Pending] = {}
        self._process: trio.Process | None = None
        self._exited = trio.Event()
        self._output_ended = trio.Event()
        self._arrived = trio.Event()
        self._lock = trio.Lock()
        self._stdin_closed = False
        self.asked_version = 1
        """The protocol version our `initialize` asks for."""
        self.version = 1
        """The version its answer negotiated: frames both ways are held to its schema."""
        self.kill_at_answer_to: str | None = None
        """A method: the first answer to a request of it SIGKILLs the agent's process
        group as soon as it is read (the ACP machine's crash right after an answer)."""

    # -- the process ----------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            OPENAI_BASE_URL=self.placeholders["base_url"],
            OPENAI_API_KEY=self.placeholders["api_key"],
            OPENAI_MODEL=self.placeholders["model"],
            XDG_DATA_HOME=str(self.directory / "data"),
            XDG_STATE_HOME=str(self.directory / "state"),
            XDG_CONFIG_HOME=str(self.directory / "config"),
        )
        for name, template in self.target.env:
            env[name] = fill(template, self.placeholders)
        return env

    def write_files(self) -> None:
        for path, template in self.target.files:
            where = self.directory / fill(path, self.placeholders)
            where.parent.mkdir(parents=True, exist_ok=True)
            where.write_text(fill(template, self.placeholders))

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Spawn the agent and serve its output until cancelled; then kill what is left."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_files()
        try:
            process = await trio.lowlevel.open_process(
                list(self.target.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environment(),
                cwd=str(self.workdir),
                start_new_session=True,
            )
        except OSError as exc:
            raise AgentSetupError(
                f"cannot start the agent {self.target.argv[0]!r}: {exc.strerror or exc}"
            ) from None
        self._process = process
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_output)
                nursery.start_soon(self._read_stderr)
                nursery.start_soon(self._wait_exit)
                task_status.started()
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self._kill()

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def exited(self) -> bool:
        return self._exited.is_set()

    @property
    def output_ended(self) -> bool:
        """Its stdout closed: it has stopped serving, whether or not it has exited yet."""
        return self._output_ended.is_set()

    async def _wait_exit(self) -> None:
        assert self._process is not None
        self.returncode = await self._process.wait()
        self._exited.set()
        self._wake()

    async def _kill(self) -> None:
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with trio.move_on_after(5):
                await process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                await stream.aclose()
        kill_all(list(self.seen.values()))

    def _kill_group_now(self) -> None:
        """SIGKILL the agent's process group, as a crash would; `run` reaps it as it ends."""
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)

    def snapshot(self) -> None:
        """Remember the agent's live descendants (to find the ones it leaves behind)."""
        if self._process is not None and self._process.returncode is None:
            for proc in descendants(self._process.pid):
                self.seen.setdefault((proc.pid, proc.start), proc)

    def left_behind(self) -> list[Proc]:
        return [proc for proc in self.seen.values() if alive(proc)]

    async def wait_exit(self, seconds: float) -> bool:
        with trio.move_on_after(seconds):
            await self._exited.wait()
        return self._exited.is_set()

    async def unless_exited(
        self, seconds: float, afn: Callable[..., Awaitable[object]], *args: Any
    ) -> None:
        """Await `afn(*args)`, but no longer than `seconds`, nor past this agent's exit."""
        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:

                async def then_stop() -> None:
                    await afn(*args)
                    nursery.cancel_scope.cancel()

                async def on_exit() -> None:
                    await self._exited.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(then_stop)
                nursery.start_soon(on_exit)

    def describe_exit(self) -> str:
        if not self.exited:
            return "it is still running"
        tail = self.stderr_tail.decode("utf-8", "replace").strip()
        said = f"; its stderr ended with: {tail[-600:]!r}" if tail else ""
        return f"it exited with code {self.returncode}{said}"

    # -- sending ---------------------------------------------------------------------------

    async def send(self, data: bytes) -> bool:
        """Write `data` to the agent's stdin; False if it cannot be written in time."""
        assert self._process is not None
        assert self._process.stdin is not None
        async with self._lock:
            if self._stdin_closed:
                return False
            with trio.move_on_after(self.target.timeout):
                self._record(">", data)
                try:
                    await self._process.stdin.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return False
                return True
            self._problem(
                REQUEST_ANSWERED,
                f"the agent read none of a {len(data)}-byte frame on its stdin for "
                f"{self.target.timeout:g} s",
            )
            return False

    def mark(self) -> int:
        """A sequence number between what arrived so far and what arrives next."""
        return next(self._seq)

    async def start_request(self, method: str, params: Mapping[str, Any]) -> int:
        """Send a request without waiting for its answer; its id."""
        asking = self.asked_version if method == "initialize" else self.version
        wire.check_from_client(method, params, version=asking)
        request_id = next(self._ids)
        self._pending[request_id] = _Pending(method, self.mark())
        await self.send(wire.frame(id=request_id, method=method, params=dict(params)))
        return request_id

    def expect(self, request_id: int | str, method: str) -> None:
        """Track an answer to a request sent raw (a malformed one that has an id)."""
        self._pending[request_id] = _Pending(method, self.mark())

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        wire.check_from_client(method, params, version=self.version)
        await self.send(wire.frame(method=method, params=dict(params)))

    async def answer(self, request_id: int | str, seconds: float | None = None) -> Answer | None:
        """The answer to a request, None if none came within `seconds` (default: the
        target's timeout) or the agent's output ended first."""
        pending = self._pending[request_id]
        with trio.move_on_after(self.target.timeout if seconds is None else seconds):
            # A problem found meanwhile is the verdict: the check raises it, so stop here.
            while not (pending.answers or self._output_ended.is_set() or self.problems):
                await self._next_arrival()
        if not pending.answers and self._output_ended.is_set():
            # Its output ended: it is exiting, and the report should say with which code.
            await self.wait_exit(1.0)
        if pending.answers:
            REQUEST_ANSWERED.held()
            return pending.answers[0]
        return None

    def answered(self, request_id: int | str) -> bool:
        return bool(self._pending[request_id].answers)

    async def answer_permission(self, ask: PermissionAsk, answer: LateAnswer) -> None:
        """Answer a permission request that was held."""
        result = reply(answer, ask.params.get("options") or [])
        assert isinstance(result, dict)
        wire.check_from_client(
            "session/request_permission",
            result,
            response_to="session/request_permission",
            version=self.version,
        )
        await self.send(wire.frame(id=ask.request_id, result=result))

    def method_of(self, request_id: int | str) -> str:
        return self._pending[request_id].method

    async def close_stdin(self) -> None:
        assert self._process is not None
        assert self._process.stdin is not None
        async with self._lock:
            self._stdin_closed = True
            await self._process.stdin.aclose()

    async def _next_arrival(self) -> None:
        await self._arrived.wait()

    def _wake(self) -> None:
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait_until(self, seconds: float, predicate: Any) -> bool:
        """Wait up to `seconds` until `predicate()` holds after an arrival; whether it does."""
        with trio.move_on_after(seconds):
            while not predicate():
                if self._output_ended.is_set() or self.problems:
                    break
                await self._next_arrival()
        return bool(predicate())

    # -- receiving -------------------------------------------------------------------------

    async def _read_output(self) -> None:
        assert self._process is not None
        assert self._process.stdout is not None
        splitter = Lines(MAX_LINE)
        stdout = self._process.stdout
        try:
            while True:
                try:
                    data = await stdout.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                lines = list(splitter.feed(data)) if data else list(splitter.end())
                for line in lines:
                    if line is None:
                        self._problem(self._wire_rule, f"a line longer than {MAX_LINE} bytes")
                    elif line.strip():
                        await self._receive(line)
                if not data:
                    return
        finally:
            self._output_ended.set()
            self._wake()

    async def _read_stderr(self) -> None:
        assert self._process is not None
        assert self._process.stderr is not None
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async for data in self._process.stderr:
                self.stderr_tail = (self.stderr_tail + data)[-STDERR_TAIL:]

    def _problem(self, prop: Property, happened: str) -> None:
        if prop.name in self.waived:
            self.again[prop.name] += 1
            return
        # The first is what a check raises; a flood of garbage must not fill the memory.
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((prop, happened))

    def _record(self, direction: str, data: bytes) -> None:
        text = data.decode("utf-8", "replace").rstrip("\n")
        if len(text) > TRANSCRIPT_WIDTH:
            text = f"{text[:TRANSCRIPT_WIDTH]}... ({len(text)} characters)"
        self.transcript.append(f"{direction} {text}")

    async def _receive(self, line: bytes) -> None:
        self._record("<", line)
        message, wrong = wire.parse_line(line)
        seq = self.mark()
        self._wire_rule.held()
        if message is None:
            self._problem(self._wire_rule, f"the agent wrote {wrong}")
            self._wake()
            return
        if "method" not in message:
            self._response(seq, message)
        elif "id" in message:
            await self._agent_request(message, seq)
        else:
            problem = wire.check_from_agent_message(message, None, self.version)
            if problem is not None:
                self._problem(self._wire_rule, f"the agent sent {problem}")
            elif message["method"] == "session/update":
                params = message["params"]
                self.updates.append(Update(seq, params["sessionId"], params["update"]))
            elif isinstance(message.get("params"), Mapping):
                self.notes.append((seq, str(message["method"]), message["params"]))
        self._wake()

    def _response(self, seq: int, message: Mapping[str, Any]) -> None:
        request_id = message.get("id")
        pending = self._pending.get(request_id) if isinstance(request_id, int | str) else None
        if pending is not None and pending.method == self.kill_at_answer_to:
            # Before anything else: the narrower the window after the answer, the more a
            # commit that follows the answer is seen missing.
            self.kill_at_answer_to = None
            self._kill_group_now()
        answer = Answer(seq, message)
        ANSWER_UNIQUE.held()
        if request_id is None and "error" in message:
            self.null_errors.append(answer)
        elif pending is None:
            self._problem(ANSWER_UNIQUE, f"a response to id {request_id!r}, which was never sent")
        elif pending.answers:
            self._problem(
                ANSWER_UNIQUE,
                f"a second response to request {request_id} ({pending.method}): "
                f"{wire.cut_value(dict(message))}",
            )
        if pending is not None:
            pending.answers.append(answer)
            pending.answered.set()
        if pending is not None and pending.method == "initialize":
            self._negotiated(message.get("result"))
        problem = wire.check_from_agent_message(
            message, pending.method if pending else None, self.version
        )
        if problem is not None:
            self._problem(self._wire_rule, f"the agent answered with {problem}")

    @property
    def _wire_rule(self) -> Property:
        """What a frame that breaks the schema breaks: P7, or on a v2 connection P24 (the
        connection speaks v2)."""
        return V2_WIRE if self.version == 2 else SCHEMA_VALID

    def _negotiated(self, result: object) -> None:
        """Speak what `initialize` answered, when it is a version we asked for at most (an
        answer above it is the machine's to judge)."""
        version = wire.dig(result, "protocolVersion")
        if type(version) is int and 1 <= version <= self.asked_version:
            self.version = version

    async def _agent_request(self, message: Mapping[str, Any], seq: int) -> None:
        method = str(message["method"])
        self.agent_requests.append(method)
        problem = wire.check_from_agent_message(message, None, self.version)
        if problem is not None:
            self._problem(self._wire_rule, f"the agent sent {problem}")
            reply = wire.frame(id=message["id"], error={"code": -32602, "message": problem})
        else:
            params: Mapping[str, Any] = message.get("params") or {}
            answer: PermissionAnswer = "allow"
            if method == "session/request_permission":
                session_id = str(params.get("sessionId"))
                answer = self._next_answer(session_id)
                ask = PermissionAsk(seq, message["id"], session_id, params, answer)
                self.permission_asks.append(ask)
                if answer == "held":
                    return  # the machine answers it, after its cancel
            reply = self._client_answer(method, params, message["id"], answer)
        await self.send(reply)

    def _next_answer(self, session_id: str) -> PermissionAnswer:
        queued = self.permission_answers.get(session_id)
        if not queued:
            return "allow"
        return queued.pop(0) if len(queued) > 1 else queued[0]

    def _client_answer(
        self,
        method: str,
        params: Mapping[str, Any],
        request_id: Any,
        answer: PermissionAnswer = "allow",
    ) -> bytes:
        result = self._client_result(method, params, answer)
        if isinstance(result, tuple):
            code, message = result
            return wire.frame(id=request_id, error={"code": code, "message": message})
        if not (method == "session/request_permission" and answer == "malformed"):
            # Every other answer is valid ACP: only this one breaks the schema, on purpose.
            wire.check_from_client(method, result, response_to=method, version=self.version)
        return wire.frame(id=request_id, result=result)

    def _client_result(
        self, method: str, params: Mapping[str, Any], answer: PermissionAnswer = "allow"
    ) -> dict[str, Any] | tuple[int, str]:
        """The client's result for one of the agent's requests (`answer`, for a permission
        request), or (code, message) of the error to answer it with."""
        if method == "session/request_permission":
            options: Sequence[Mapping[str, Any]] = params.get("options") or []
            result = reply(answer, options)
            assert result is not None  # a held request is not answered here
            return result
        if method not in ("fs/read_text_file", "fs/write_text_file"):
            return -32601, f"this client does not implement {method}"
        path = self._inside(params.get("path"))
        if isinstance(path, tuple):
            return path
        if method == "fs/write_text_file":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(params.get("content", "")))
            return {}
        self.reads.append(path)
        try:
            text = self.buffers[path] if path in self.buffers else path.read_text()
        except OSError as exc:
            return -32002, f"cannot read {path}: {exc.strerror}"
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            text = "".join(lines[start : start + limit if isinstance(limit, int) else None])
        return {"content": text}

    def _inside(self, value: object) -> Path | tuple[int, str]:
        if not isinstance(value, str) or not os.path.isabs(value):
            return -32602, f"path must be absolute: {value!r}"
        path = Path(os.path.normpath(value))
        if not path.is_relative_to(self.workdir):
            return -32602, f"{path} is outside the session's directory"
        return path


def fill(template: str, placeholders: Mapping[str, str]) -> str:
    """`template` with `{base_url}`, `{api_key}`, `{model}`, `{dir}`, `{workdir}` filled;
    other braces are kept as they are (config files are often JSON)."""
    text = template
    for name, value in placeholders.items():
        text = text.replace("{" + name + "}", value)
    return text


def _texts(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        items: Mapping[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        return " ".join(_texts(v) for k, v in items.items() if k != "sessionUpdate")
    if isinstance(value, list):
        parts: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
        return " ".join(_texts(v) for v in parts)
    return ""
