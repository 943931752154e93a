"""The MCP machine: random programs over the tools of a real stdio MCP server (the reference
server, `agent_conformance._mcp_server`, which starts a child in its group and records
what it sees), opened by the opener under test and closed by every path a caller has.

    initialize: open a server (plain, or one that ignores SIGTERM; both start a child),
                and choose how its block will be left (it ends, raises, or an outer
                cancel ends it)
    rules: call echo / call slow and cancel it / call crash / add a tool / call picture
           or fail / read the server's environment / open a second block beside a server
           that cannot start
    teardown: leave the block as chosen, then look in /proc

Each check is a named property of a rule of the contract (`_mcp_properties`):

- M1: a tool the server adds, announcing it before it answers, is in the tool set when the
  call returns, named and described as the server says;
- M2: an image is described on a line, an error the server reports is an error result
  with its text, and a call of a dead server is an error result saying it failed;
- M5: a block beside a server that cannot start (no such command, exits at once, never
  answers `initialize`, or a second server of one name) raises the error its rule names,
  in one line naming the server and why, and leaves no process of any of its servers;
- M6: the server runs in the cwd it was given, with the scrubbed environment plus its
  configured `env`: no credential of this process's environment reaches it;

- M7: once the tool set's `async with` is left, by any path, no process the server started
  is alive (the server's own pid and its child's, from its record file, read in /proc);
- M8: a cancelled call propagates the cancel and the server records `cancelled` for it
  (no request left pending); the calls that follow are answered.

Every server start costs a Python start and the SDK's import (a second or more on a loaded
machine), so an example opens one server and the budget (`mcp_settings`) is a few short
programs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Literal

import trio
from hypothesis import Phase
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition

from trio_agents import McpConfigError, McpServer, McpServerError, Tool, ToolContext, ToolResult
from trio_agents.testing import TrioHost, WallClock

from ._machine import ConformanceMachine, rule
from ._mcp_launch import (
    BAD_REASONS,
    BAD_SAYS,
    BAD_STARTS,
    BESIDE,
    BROKEN,
    DEAF,
    DEAF_SHOWN,
    SERVER,
    SILENT,
    SILENT_TIMEOUT,
    BadStart,
    Deaf,
    broken_server,
    builtin_opener,
    gone,
    marked,
    reference_server,
)
from ._mcp_properties import (
    BAD_START,
    CANCEL_REACHES_SERVER,
    CLOSE_REAPS,
    CONNECTION_USABLE,
    RESULT_TEXT,
    SERVER_ENVIRONMENT,
    TOOLS_RELISTED,
)
from ._mcp_properties import PROPERTIES as PROPERTIES
from ._mcp_server import PNG_BYTES
from ._shell_probes import (
    CREDENTIAL,
    FIXED_ENV,
    INNOCENT,
    OUTSIDER,
    PASSED,
    SECRETS,
    env_differences,
    secret_environment,
)
from ._targets import McpOpener
from ._vocabulary import mcp_tool_name

__all__ = ["PROPERTIES", "McpMachine", "mcp_settings", "starved_start"]

ADDED_NAMES = ("added_{n}", "Added-{n}", "added.{n} tool/x", "added{n}_" + "x" * 70)
"""The names `add_tool` gives its tools, in turn ({n}: a number of its own)."""

GRACE = 0.2  # the close grace given to the opener: a SIGTERM-ignoring server costs it
STARVED_TRIES = 4  # a bad start whose good server was starved too is tried this often (D483)
START_TIMEOUT = 20.0  # a loaded machine starts Python slowly; failing starts are not checked
START_BOUND = 8.0  # past start_timeout, a block that neither raised nor opened hangs (M5, D483)
SEEN_WITHIN = 10.0  # seconds for the server to record a call it was sent
CANCEL_WITHIN = 3.0  # seconds for the server to record the cancel of a call
GONE_WITHIN = 1.0  # seconds for a killed process to leave the process table
# After a bad start, the good server's orphaned child is reaped by init, not by the opener:
# a loaded machine's init can take seconds (D399's margin, for the shell's groups).
ORPHAN_GONE_WITHIN = 5.0
TEXTS = ("hi", "two words", "ünïcödé")

ClosePath = Literal["end", "raise", "outer-cancel"]
CLOSE_PATHS: tuple[ClosePath, ...] = ("end", "raise", "outer-cancel")


@dataclasses.dataclass(frozen=True, eq=False)
class _BaseTool:
    """A tool of the caller's own, given to the opener as `base` (M1: listed first)."""

    name: str
    description: str = "A tool of the caller's own."
    parameters: Mapping[str, object] = dataclasses.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    async def __call__(self, arguments: Mapping[str, object], context: ToolContext) -> str:
        await trio.lowlevel.checkpoint()
        return self.name


class _Leaving(Exception):
    """What the machine raises in the tool set's block to leave it by an exception."""


def mcp_settings(base: Settings) -> Settings:
    """Each example starts one or two real servers (a second and a half each on a loaded
    machine): a twenty-fifth of the examples of `base` (at least 3), programs of at most 10
    steps, and no shrinking: a failing program is short already, and each attempt to shrink
    it would start another server (D278)."""
    return Settings(
        base,
        max_examples=max(3, base.max_examples // 25),
        stateful_step_count=min(base.stateful_step_count, 10),
        phases=[phase for phase in base.phases if phase is not Phase.shrink],
    )


def starved_start(kind: BadStart, error: object) -> bool:
    """Whether a bad start of `kind` that raised `error` (or "hung", or None) shows a slow
    start of a loaded machine rather than the opener's finding: in a block with a silent
    server and its short timeout, the good server missed it too (at initialize or at
    tools/list, whichever it had reached), or the broken one that answers initialize had not
    yet. Such a start is tried again with twice the time (D425, D435, D502)."""
    if kind not in SILENT:
        return False
    said = str(error)
    if getattr(error, "server", None) == BESIDE:
        return "no answer to" in said
    return kind == "list-silent" and "no answer to initialize" in said


class McpMachine(ConformanceMachine):
    """Subclass and set `factory` (an `McpOpener`) to check another opener of MCP tools.

    What a subclass's rules and checks can use:

    host: the TrioHost the opener runs in, on a WallClock (the server is a real process).
    dir: the example's temporary directory (the servers' cwd and record files).
    tools: the open tool set (None while none is open).
    record: the open server's record file.
    pids: every pid the servers of this example recorded (server and child).
    crashed: whether the open server was made to crash.
    trace: what the rules did, for the history fingerprint.

    stats: counts examples and checked steps; give a subclass its own dict to count one run.
    histories: fingerprints of the distinct rule traces produced.
    """

    factory: ClassVar[McpOpener] = staticmethod(builtin_opener)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()

    def __init__(self) -> None:
        super().__init__(TrioHost(WallClock(), call_timeout=60.0, stall_timeout=60.0))
        self.dir = tempfile.mkdtemp(prefix="trio-agents-mcp-machine-")
        self.tools: Sequence[Tool] | None = None
        self.record = ""
        self.pids: set[int] = set()
        self.crashed = False
        self.trace: list[str] = []
        self._calls = 0
        self._path: ClosePath = "end"
        self._leave_by: ClosePath = "end"
        self._added = 0
        self._configured: dict[str, str] = {}
        self._bad_starts = 0
        self._cwd = self.dir  # where the open server must run: the block's cwd, or its own
        self._base: tuple[Tool, ...] = ()  # the caller's own tools, given as `base`

    # -- opening and closing ------------------------------------------------------------------

    @initialize(
        deaf=st.sampled_from(DEAF),
        path=st.sampled_from(CLOSE_PATHS),
        own_cwd=st.booleans(),
    )
    def start(self, deaf: Deaf, path: ClosePath, own_cwd: bool) -> None:
        """Open the tools of a reference server (one that ignores SIGTERM with its child, one
        whose child alone ignores it, or neither; with a `cwd` of its own, or the block's),
        beside `base` tools of the caller's, to be left by `path` at the end of the
        example."""
        # 0 to 2 base tools, derived from the draws above (a draw of its own would change
        # every program the seeded defects are caught by).
        base = (DEAF.index(deaf) + CLOSE_PATHS.index(path) + own_cwd) % 3
        self._base = tuple(_BaseTool(f"base_{n}") for n in range(base))
        self.record = os.path.join(self.dir, "record.jsonl")
        server = reference_server(self.record, deaf=deaf)
        if own_cwd:
            self._cwd = os.path.join(self.dir, "own cwd")
            os.mkdir(self._cwd)
            server = dataclasses.replace(server, cwd=self._cwd)
        self._configured = dict(server.env or {})
        self._leave_by = path
        # Credentials in this process's environment while the server starts (M6).
        with secret_environment():
            self.tools = self.host.call(self.host.nursery.start, self._hold, server)
        self.pids |= self._recorded_pids()
        self._check_order("once the block was entered")
        self.trace.append(
            f"open {DEAF_SHOWN[deaf]}{' own cwd' if own_cwd else ''}, {base} base tool(s), "
            f"leave by {path}"
        )

    async def _hold(
        self,
        server: McpServer,
        task_status: trio.TaskStatus[Sequence[Tool]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Own the tool set: open it, wait to be told to close, leave by `_path`."""
        stop = self._stop = trio.Event()
        stopped = self._stopped = trio.Event()
        opener = type(self).factory
        with trio.CancelScope() as outer:
            try:
                async with opener(
                    [server],
                    base=self._base,
                    cwd=self.dir,
                    start_timeout=START_TIMEOUT,
                    close_grace=GRACE,
                ) as tools:
                    task_status.started(tools)
                    await stop.wait()
                    if self._path == "raise":
                        raise _Leaving
                    if self._path == "outer-cancel":
                        outer.cancel(reason="the machine's outer cancel")
                        await trio.sleep_forever()
            except* _Leaving:
                pass
        stopped.set()

    def _close(self, path: ClosePath) -> None:
        """Leave the open tool set's block by `path`; then nothing of its server is alive."""
        assert self._stop is not None
        self._path = path
        pids = self._recorded_pids()
        self.pids |= pids
        self.host.run_sync(self._stop.set)
        self.host.call(self._stopped.wait)
        self.tools = None
        deadline = time.monotonic() + GONE_WITHIN
        alive = sorted(p for p in pids if not gone(p))
        while alive and time.monotonic() < deadline:
            time.sleep(0.01)
            alive = sorted(p for p in pids if not gone(p))
        CLOSE_REAPS.check(
            not alive,
            lambda: (
                f"{GONE_WITHIN:g}s after the tool set was left by {path!r}, "
                f"{self._describe(alive)} still ran"
            ),
        )

    def _describe(self, pids: Sequence[int]) -> str:
        described: list[str] = []
        for event in self._events():
            if event.get("pid") in pids and event.get("event") in ("ready", "child"):
                what = "the server" if event["event"] == "ready" else "the server's child"
                described.append(f"{what} (pid {event['pid']})")
        return ", ".join(described) or f"pids {list(pids)}"

    def _history(self) -> Hashable:
        return tuple(self.trace)

    def _check_closing(self) -> None:
        if self.tools is not None:
            self._close(self._leave_by)

    def _after_close(self) -> None:
        # A failing opener may have left processes behind; this suite must not.
        for pid in self.pids | self._recorded_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the server's record ------------------------------------------------------------------

    def _events(self) -> list[dict[str, object]]:
        try:
            lines = Path(self.record).read_text().splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def _count(self, event: str) -> int:
        return sum(1 for e in self._events() if e.get("event") == event)

    def _recorded_pids(self) -> set[int]:
        return {
            pid
            for e in self._events()
            if e.get("event") in ("ready", "child") and isinstance(pid := e.get("pid"), int)
        }

    async def _until_recorded(self, event: str, count: int, seconds: float) -> bool:
        with trio.move_on_after(seconds):
            while self._count(event) < count:  # noqa: ASYNC110 - a file another process writes
                await trio.sleep(0.01)
            return True
        return False

    # -- calls --------------------------------------------------------------------------------

    def _check_order(self, when: str) -> None:
        """M1: the tool set holds `base` first, as given (by name: an opener may wrap them),
        then the server's tools."""
        assert self.tools is not None
        held = list(self.tools)
        first = held[: len(self._base)]
        TOOLS_RELISTED.check(
            [t.name for t in first] == [t.name for t in self._base],
            lambda: (
                f"{when}, the tool set opened with base={[t.name for t in self._base]} held "
                f"{[t.name for t in held]}: the base tools first, then the server's"
            ),
        )
        server = [t.name for t in held[len(self._base) :]]
        prefix = mcp_tool_name(SERVER, "")
        TOOLS_RELISTED.check(
            all(name.startswith(prefix) for name in server),
            lambda: (
                f"{when}, the tool set held {[t.name for t in held]}: after the base tools, "
                f"only the server's ({prefix}...)"
            ),
        )

    def _tool(self, name: str) -> Tool:
        assert self.tools is not None
        wanted = mcp_tool_name(SERVER, name)
        found = [t for t in self.tools if t.name == wanted]
        TOOLS_RELISTED.check(
            bool(found), f"the open tool set has no {wanted!r}: {[t.name for t in self.tools]}"
        )
        return found[0]

    def _context(self) -> ToolContext:
        self._calls += 1
        return ToolContext("mcp-machine", f"call-{self._calls}", 1, self._calls)

    def _usable(self) -> bool:
        return self.tools is not None and not self.crashed

    @precondition(lambda self: self.tools is not None)
    @rule(text=st.sampled_from(TEXTS))
    def call_echo(self, text: str) -> None:
        """Call the server's `echo`: its answer is the text (unless the server crashed:
        what a call of a dead server answers is rule M2's business)."""
        tool = self._tool("echo")
        context = self._context()
        result = self.host.call(lambda: tool({"text": text}, context))
        if self.crashed:
            self._check_failed("echo", result)
            self.trace.append("echo after crash")
            return
        answer = ToolResult(result) if isinstance(result, str) else result
        CONNECTION_USABLE.check(
            not answer.is_error and answer.content == text,
            lambda: (
                f"echo({text!r}) answered {result!r}"
                + (", after a cancelled call" if self._count("started") else "")
            ),
        )
        self.trace.append("echo")

    @precondition(_usable)
    @rule()
    def cancel_slow(self) -> None:
        """Call the server's `slow`, wait until the server runs it, cancel the call: the
        cancel propagates, and the server records the call cancelled."""
        tool = self._tool("slow")
        started = self._count("started") + 1
        outcome = self.host.call(self._call_and_cancel, tool, started)
        CANCEL_REACHES_SERVER.check(
            outcome is None, f"the cancelled call of slow returned {outcome!r} instead"
        )
        told = self.host.call(self._until_recorded, "cancelled", started, CANCEL_WITHIN)
        CANCEL_REACHES_SERVER.check(
            told,
            lambda: (
                f"{CANCEL_WITHIN:g}s after its call was cancelled, the server had recorded "
                f"{self._count('cancelled')} cancels for {started} started calls of slow"
            ),
        )
        self.trace.append("cancel slow")

    async def _call_and_cancel(self, tool: Tool, started: int) -> ToolResult | str | None:
        """None when the call raised Cancelled; what it did instead otherwise."""
        outcome: list[ToolResult | str] = []
        context = self._context()

        async def call(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                outcome.append(await tool({}, context))

        async with trio.open_nursery() as nursery:
            scope: trio.CancelScope = await nursery.start(call)
            seen = await self._until_recorded("started", started, SEEN_WITHIN)
            scope.cancel(reason="the machine cancels the call")
        if not seen:
            CANCEL_REACHES_SERVER.fail(
                f"the server never recorded the call of slow within {SEEN_WITHIN:g}s"
            )
        return outcome[0] if outcome else None

    @precondition(_usable)
    @rule()
    def call_crash(self) -> None:
        """Call the server's `crash`: the server exits mid-call (its child lives on, in its
        group, until the tool set closes). What the call answers is rule M2's business."""
        tool = self._tool("crash")
        context = self._context()
        result = self.host.call(lambda: tool({}, context))
        self.crashed = True
        self._check_failed("crash", result)
        # The reference server exits with status 1 mid-call: the reason says so (M2).
        content = result.content if isinstance(result, ToolResult) else result
        RESULT_TEXT.check(
            "exited with status 1" in content,
            lambda: f"the call of crash, whose server exited with status 1, answered {result!r}",
        )
        self.trace.append("crash")

    def _check_failed(self, name: str, result: ToolResult | str) -> None:
        answer = ToolResult(result) if isinstance(result, str) else result
        prefix = f"MCP server {SERVER!r}: tool {name!r} failed: "
        RESULT_TEXT.check(
            answer.is_error and answer.content.startswith(prefix),
            lambda: (
                f"a call of {name} to a server that died answered {result!r}, not an "
                f"error result starting {prefix!r}"
            ),
        )

    @precondition(_usable)
    @rule()
    def add_tool(self) -> None:
        """Have the server add a tool, announcing the change before it answers: the new tool
        is in the tool set when the call returns, and answers (M1)."""
        # Names a server may give, in turn: as they are, with characters M1 keeps (`-`,
        # capitals, digits), with ones it replaces by `_`, and one past the 64 a name is cut at.
        n = self._added
        name = ADDED_NAMES[n % len(ADDED_NAMES)].format(n=n)
        self._added += 1
        tool = self._tool("add_tool")
        context = self._context()
        result = self.host.call(lambda: tool({"name": name}, context))
        assert self.tools is not None
        wanted = mcp_tool_name(SERVER, name)
        found = [t for t in self.tools if t.name == wanted]
        TOOLS_RELISTED.check(
            len(found) == 1,
            lambda: (
                f"add_tool({name!r}) answered {result!r}; then the tool set held "
                f"{[t.name for t in self.tools or ()]}, not one {wanted!r}"
            ),
        )
        description = f"Added at run time as {name}."
        TOOLS_RELISTED.check(
            found[0].description == description,
            lambda: (
                f"{wanted} has the description {found[0].description!r}, not the "
                f"server's {description!r}"
            ),
        )
        added = found[0]
        answer = self.host.call(lambda: added({}, self._context()))
        answer = ToolResult(answer) if isinstance(answer, str) else answer
        CONNECTION_USABLE.check(
            not answer.is_error and answer.content == f"{name} called",
            lambda: f"the added tool {wanted} answered {answer!r}",
        )
        self._check_order(f"after add_tool({name!r})")
        self.trace.append("add tool")

    @precondition(_usable)
    @rule(kind=st.sampled_from(["picture", "fail"]))
    def call_result_kind(self, kind: str) -> None:
        """A result that is not text: an image, or an error the server reports (M2)."""
        tool = self._tool(kind)
        context = self._context()
        arguments = {"text": "the reference fails on purpose"} if kind == "fail" else {}
        result = self.host.call(lambda: tool(arguments, context))
        answer = ToolResult(result) if isinstance(result, str) else result
        if kind == "picture":
            expected = f"[image: image/png, {PNG_BYTES} bytes]"
            RESULT_TEXT.check(
                not answer.is_error and answer.content == expected,
                lambda: f"picture() answered {result!r}, not the text {expected!r}",
            )
        else:
            prefix = f"MCP server {SERVER!r}: tool 'fail' reported an error: "
            RESULT_TEXT.check(
                answer.is_error
                and answer.content.startswith(prefix)
                and "the reference fails on purpose" in answer.content,
                lambda: (
                    f"fail() answered {result!r}, not an error result starting {prefix!r} "
                    "with the server's text"
                ),
            )
        self.trace.append(kind)

    @precondition(_usable)
    @rule()
    def read_environment(self) -> None:
        """The server's working directory and environment: what M6 lets through, and
        nothing of the credentials this process held when it started."""
        tool = self._tool("environment")
        context = self._context()
        result = self.host.call(lambda: tool({}, context))
        answer = ToolResult(result) if isinstance(result, str) else result
        seen = json.loads(answer.content)
        env: dict[str, str] = seen["env"]
        leaked = sorted(
            name
            for name in env
            if CREDENTIAL.search(name) or name in SECRETS or name in (OUTSIDER[0], PASSED[0])
        )
        SERVER_ENVIRONMENT.check(not leaked, lambda: f"the server's environment held {leaked}")
        values = sorted(n for n, v in SECRETS.items() if v in answer.content)
        SERVER_ENVIRONMENT.check(
            not values, lambda: f"the server's environment held the values of {values}"
        )
        wanted = {**FIXED_ENV, INNOCENT[0]: INNOCENT[1], **self._configured}
        wrong = env_differences(wanted, env)
        SERVER_ENVIRONMENT.check(not wrong, lambda: f"the server's environment has {wrong}")
        SERVER_ENVIRONMENT.check(
            os.path.realpath(seen["cwd"]) == os.path.realpath(self._cwd),
            lambda: (
                f"the server runs in {seen['cwd']}, not "
                + (
                    f"its own cwd {self._cwd}"
                    if self._cwd != self.dir
                    else f"the block's {self.dir}"
                )
            ),
        )
        self.trace.append("environment")

    # Twice an example at most: each costs a server start or two (a second each on a loaded
    # machine).
    @precondition(lambda self: self.tools is not None and self._bad_starts < 2)
    @rule(kind=st.sampled_from(BAD_STARTS), broken_first=st.booleans())
    def start_bad(self, kind: BadStart, broken_first: bool) -> None:
        """Open a second block: a good reference server and one that cannot start, in
        either order (M5). Entering it raises the rule's error, naming the broken server
        and why in one line, and no process of either server is left running."""
        self._bad_starts += 1
        marks = [os.path.join(self.dir, f"beside-{self._bad_starts}-{n}.jsonl") for n in "gb"]
        good = dataclasses.replace(reference_server(marks[0], deaf="nobody"), name=BESIDE)
        broken = broken_server(kind, marks[1], good, self.dir)
        # A server that never answers is listed first: the good one may miss the short
        # timeout too on a loaded machine, and the first failing in order is raised.
        first = broken_first or kind in SILENT
        servers = [broken, good] if first else [good, broken]
        timeout = SILENT_TIMEOUT if kind in SILENT else START_TIMEOUT
        error: Exception | Literal["hung"] | None = None
        for _ in range(STARVED_TRIES):
            with secret_environment():
                error = self.host.call(self._open_bad, servers, timeout)
            if not starved_start(kind, error):
                break
            timeout *= 2
        told = f"entering a block of {[s.name for s in servers]} where {BAD_SAYS[kind]}"
        BAD_START.check(
            error != "hung",
            lambda: (
                f"{told} neither raised nor gave a tool set within {START_BOUND:g}s past "
                f"its start_timeout ({timeout:g}s)"
            ),
        )
        assert error != "hung"
        BAD_START.check(error is not None, f"{told} gave a tool set")
        assert error is not None
        wanted = McpConfigError if kind == "same-name" else McpServerError
        BAD_START.check(
            isinstance(error, wanted),
            lambda: f"{told} raised {type(error).__name__}: {error}, not {wanted.__name__}",
        )
        text = str(error)
        reason = BAD_REASONS[kind]
        named = BROKEN if kind != "same-name" else BESIDE
        BAD_START.check(
            "\n" not in text.strip() and repr(named) in text and reason in text,
            lambda: f"{told} raised {text!r}: not one line naming {named!r} and {reason!r}",
        )
        if kind != "same-name":
            BAD_START.check(
                getattr(error, "server", None) == BROKEN,
                lambda: (
                    f"{told} raised an error whose server is "
                    f"{getattr(error, 'server', None)!r}, not {BROKEN!r}"
                ),
            )
        deadline = time.monotonic() + ORPHAN_GONE_WITHIN
        left = [pid for mark in marks for pid in marked(mark)]
        self.pids |= set(left)
        while left and time.monotonic() < deadline:
            time.sleep(0.01)
            left = [pid for mark in marks for pid in marked(mark)]
        BAD_START.check(
            not left,
            lambda: (
                f"{ORPHAN_GONE_WITHIN:g}s after {told} raised, its servers' processes "
                f"{left} still ran"
            ),
        )
        self.trace.append(f"bad start {kind}{' first' if first else ''}")

    async def _open_bad(
        self, servers: list[McpServer], start_timeout: float
    ) -> Exception | Literal["hung"] | None:
        """What entering a block of `servers` raised (None if it gave a tool set; "hung" if
        it did neither within START_BOUND seconds past `start_timeout`)."""
        opener = type(self).factory
        with trio.move_on_after(start_timeout + START_BOUND):
            try:
                async with opener(
                    servers, base=(), cwd=self.dir, start_timeout=start_timeout, close_grace=GRACE
                ):
                    return None
            except Exception as exc:  # what it raised is what is checked
                return exc
        return "hung"

    def _cwd_said(self) -> str:
        own = self._cwd != self.dir
        return f"its own cwd {self._cwd}" if own else f"the block's cwd {self.dir}"

    # -- invariants ---------------------------------------------------------------------------

    def _verify(self) -> None:
        """Nothing to check between steps: each rule checks what it did at once (the
        calls' answers, the cancels, and the processes after each close)."""
