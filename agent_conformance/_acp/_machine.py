"""The ACP machine: a Hypothesis state machine that drives any ACP agent over stdio and
checks rules P1-P9, P11, P12, P14, P18, P19 and P21-P26 (docs/contract.md, ACP section),
and L9.

One example is one agent process (a second one after `restart`, to load what the first
streamed), on the real clock, with the scripted endpoint of `_endpoint` as its model. Each
prompt carries a token of its own, and its script says what the model answers; a prompt
that will be cancelled is scripted to end in a held stream, so its turn cannot end before
the cancel lands: before the model is called, mid-stream, or while a shell tool runs. A
permission prompt's one command writes a witness file, and its permission request is
answered as `_permission_rules` says; an agent that never asks opens no window.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import tempfile
from collections.abc import (
    AsyncGenerator,
    Callable,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, NoReturn

import trio
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents.testing import TrioHost, WallClock

from .._machine import rule
from .._properties import ContractViolation, Property
from . import _wire as wire
from ._client import (
    STDERR_NOTE,
    TRANSCRIPT_NOTE,
    AcpTarget,
    AgentProcess,
    AgentSetupError,
    Answer,
    PermissionAsk,
    Update,
)
from ._endpoint import (
    API_KEY,
    MODEL,
    TOKEN,
    Cut,
    Hold,
    Say,
    ScriptedEndpoint,
    Served,
    Shell,
    Step,
    open_endpoint,
)
from ._malformed import MalformedFrames
from ._mcp_sessions import McpSessions, check_reaped, mcp_left
from ._permission_rules import (
    ANSWERS,
    GOING_ON,
    LATE_ANSWERS,
    LateAnswer,
    PermissionAnswer,
    may_run,
)
from ._procs import Proc, alive, descendants
from ._prompt_context import PromptContext
from ._properties import (
    ANSWERED_DURABLE,
    CANCEL_ABORTS,
    CANCEL_ANSWERS_CANCELLED,
    CUT_ANSWERS_MAX_TOKENS,
    EXITS_AT_EOF,
    LOAD_REPLAYS,
    LOADS_UNPROMPTED,
    NO_ORPHANS,
    PERMISSION_REFUSED_NOT_RUN,
    PERMISSION_SKIPPED_BY_CANCEL,
    PROMPT_ENDS_TURN,
    QUIET_AFTER_CANCEL,
    REQUEST_ANSWERED,
    SESSIONS_ISOLATED,
    TOOL_STATUS_FORWARD,
)
from ._protocol_v2 import ProtocolV2, V2Connection
from ._session_config import SessionConfig
from ._steering import CAPABILITY, Steering

__all__ = ["AcpMachine", "acp_machine"]

MAX_SESSIONS = 3
QUIET = 0.15  # real seconds a cancelled session must stay silent after its answer
# Turn output: what a cancelled turn must no longer send. Session-level updates (commands,
# modes, config, info, usage) may come at any time.
TURN_OUTPUT = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "tool_call",
     "tool_call_update", "plan"}
)  # fmt: skip
CancelPoint = Literal["before-model", "mid-stream", "mid-tool"]


@dataclass
class _Session:
    id: str
    live: bool = True
    turns: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    """Completed turns: (prompt token, the text the model streamed)."""
    quiet: list[tuple[int, float]] = field(default_factory=list[tuple[int, float]])
    """(from, until) sequence windows in which no turn output may arrive."""
    loaded: bool = False
    killed: bool = False
    """Its process was SIGKILLed while it was live: what its load misses was not stored."""


class _World:
    def __init__(self, endpoint: ScriptedEndpoint, nursery: trio.Nursery) -> None:
        self.endpoint = endpoint
        self.nursery = nursery


def _witness(agent: AgentProcess, token: str) -> Path:
    """The file a mid-tool cancel's command writes once it runs: in the agent's work
    directory, which a sandboxed command may write (elsewhere it may not, and the wait for
    the file would run out its whole timeout)."""
    return agent.workdir / f".tool-{token}"


class AcpMachine(PromptContext, SessionConfig, MalformedFrames, McpSessions, Steering, ProtocolV2):
    """Checks the ACP agent `target` names; `acp_machine(target)` makes the class for one.

    host: the TrioHost, on a WallClock (the agent is a real process).
    dir: the example's directory: the sessions' cwd (`work/`), XDG dirs, tool witnesses.
    agent: the agent process now running.
    """

    target: ClassVar[AcpTarget]
    latencies: ClassVar[dict[str, list[float]]] = {}
    """Seconds from a session/cancel that landed to what it aborted being seen gone: the
    model stream ("stream"), the shell command's processes ("tool")."""
    advertised: ClassVar[dict[str, Any]] = {}
    """What the last `initialize` answered: `agentInfo`, `loadSession` and `listSessions`
    (`sessionCapabilities.list`)."""

    def __init__(self) -> None:
        target = type(self).target
        patience = target.timeout * 4 + target.grace + 30
        super().__init__(TrioHost(WallClock(), call_timeout=patience, stall_timeout=patience))
        self.dir = Path(tempfile.mkdtemp(prefix="trio-agents-acp-"))
        self.world: _World = self._start_service(self._open_world)
        self.tokens = itertools.count(1)
        self.sessions: list[_Session] = []
        self.log: list[str] = []
        self.one_session = False  # the agent refused a second session/new in one process
        self.owners: dict[str, str] = {}  # token -> the session whose prompt carries it
        # (session, toolCallId) -> the call's last status: any process's announcement
        # counts, and a `tool_call` (a load replays them) starts the call's statuses anew.
        self.tool_status: dict[tuple[str, str], str] = {}
        self.can_load = False
        self.can_list = False
        self.embedded_context = False
        self.steering = None
        self.config = {}
        self.extra_ids: list[str] = []
        self.elsewhere: list[str] = []
        self.bulked = False
        self.listings = 0
        self.mcp_made = False
        self.prompted: set[str] = set()  # sessions sent a prompt, in any process
        self.lists_unprompted = False  # a listing showed a session never prompted
        self.touched: set[str] = set()  # sessions loaded or switched, in any process
        self._checked = 0  # updates of this agent process checked so far
        self._stops: dict[int, tuple[trio.CancelScope, trio.Event]] = {}
        self.v2: V2Connection | None = None
        self.evidence_of: AgentProcess | None = None
        try:
            self.agent = self._spawn()
        except ContractViolation as violation:
            # Broken as it started (before any step): the report still shows the wire.
            if hasattr(self, "agent"):
                self.note_violation(violation)
            with contextlib.suppress(Exception):
                self.host.close()
            self._after_close()
            raise
        except BaseException:
            # No teardown follows a constructor that raised: end the run here, which kills
            # the agent (an agent that never answers `initialize` would outlive the suite).
            with contextlib.suppress(Exception):
                self.host.close()
            self._after_close()
            raise

    @asynccontextmanager
    async def _open_world(self) -> AsyncGenerator[_World, None]:
        async with open_endpoint() as endpoint, trio.open_nursery() as nursery:
            yield _World(endpoint, nursery)
            nursery.cancel_scope.cancel()

    @property
    def endpoint(self) -> ScriptedEndpoint:
        return self.world.endpoint

    # -- the agent process ----------------------------------------------------------------

    def _placeholders(self, directory: Path) -> dict[str, str]:
        """What fills the target's templates for a process in `directory`."""
        return {
            "base_url": self.endpoint.base_url,
            # Anthropic's clients add /v1 themselves (ANTHROPIC_BASE_URL={root_url}).
            "root_url": self.endpoint.base_url.removesuffix("/v1"),
            "api_key": API_KEY,
            "model": MODEL,
            "dir": str(directory),
            "workdir": str(directory / "work"),
        }

    def _spawn(self) -> AgentProcess:
        placeholders = self._placeholders(self.dir)
        agent = AgentProcess(type(self).target, placeholders, self.dir, type(self).waived)
        self.agent = agent  # before it answers: a failure to start shows its wire
        self.served_here = False  # whether this process made or loaded a session yet
        self.host.call(self._start_agent, agent)
        self._initialize(agent)
        return agent

    async def _start_agent(self, agent: AgentProcess) -> None:
        scope = trio.CancelScope()
        done = trio.Event()

        async def run(task_status: trio.TaskStatus[None]) -> None:
            try:
                with scope:
                    await agent.run(task_status)
            finally:
                done.set()

        await self.world.nursery.start(run)
        self._stops[id(agent)] = (scope, done)

    async def _stop_agent(self, agent: AgentProcess) -> None:
        scope, done = self._stops.pop(id(agent))
        scope.cancel()
        await done.wait()
        self._count(agent)

    def _count(self, agent: AgentProcess) -> None:
        """Add what `agent` saw to the run's counts (once)."""
        stats = type(self).stats
        if agent.reads:
            stats["read through client"] = 1  # the second half of P18 applies
        for name, count in agent.again.items():
            stats[f"again {name}"] = stats.get(f"again {name}", 0) + count
        agent.again.clear()

    def _evidence(self) -> list[str]:
        agent = self.evidence_of or self.agent
        notes = [TRANSCRIPT_NOTE + "\n" + "\n".join(agent.transcript)]
        tail = agent.stderr_tail.decode("utf-8", "replace").strip()
        if tail:
            notes.append(STDERR_NOTE + "\n" + tail)
        return notes

    def _initialize(self, agent: AgentProcess) -> None:
        params = {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": True, "writeTextFile": True},
                "terminal": False,
            },
            "clientInfo": {"name": "trio-agents-conformance", "version": "1"},
        }
        answer = self._ask(agent, "initialize", params)
        if answer.error is not None:
            raise AgentSetupError(f"the agent refused initialize: {answer.error}")
        self.can_load = bool(wire.dig(answer.result, "agentCapabilities", "loadSession"))
        listing = wire.dig(answer.result, "agentCapabilities", "sessionCapabilities", "list")
        self.can_list = listing is not None and listing is not False
        self.embedded_context = (
            wire.dig(answer.result, "agentCapabilities", "promptCapabilities", "embeddedContext")
            is True
        )
        steering = wire.dig(answer.result, "agentCapabilities", "_meta", CAPABILITY)
        self.steering = steering if isinstance(steering, Mapping) else None
        type(self).advertised = {
            "agentInfo": wire.dig(answer.result, "agentInfo"),
            "loadSession": self.can_load,
            "listSessions": self.can_list,
            "steering": self.steering is not None,
            "protocol 2": type(self).v2_offered,
        }

    def _ask(
        self, agent: AgentProcess, method: str, params: Mapping[str, Any], what: str = ""
    ) -> Answer:
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            self.touched.add(session_id)  # an agent may keep it from now on (D479)

        async def ask() -> Answer | None:
            return await agent.answer(await agent.start_request(method, params))

        answer = self.host.call(ask)
        if answer is None:
            self._unanswered(agent, method + what)
        return answer

    def _unanswered(self, agent: AgentProcess, what: str) -> NoReturn:
        self._raise_found(agent)
        # An agent that exited did not make the client wait the timeout out: say which.
        waited = "before the agent exited" if agent.exited else f"within {agent.target.timeout:g} s"
        REQUEST_ANSWERED.fail(f"{what} got no answer {waited}; {agent.describe_exit()}")

    def _raise_found(self, agent: AgentProcess) -> None:
        if agent.problems:
            prop, happened = agent.problems[0]
            prop.fail(happened)

    # -- rules ---------------------------------------------------------------------------

    def _live(self) -> list[_Session]:
        return [s for s in self.sessions if s.live]

    def _pick(self, index: int) -> _Session:
        live = self._live()
        return live[index % len(live)]

    def _room(self) -> bool:
        return len(self._live()) < (1 if self.one_session else MAX_SESSIONS)

    @precondition(lambda self: self._room())
    @rule()
    def new_session(self) -> None:
        """session/new in the example's work directory."""
        self._plain_session()

    def _plain_session(self) -> None:
        answer = self._ask(
            self.agent, "session/new", {"cwd": str(self.agent.workdir), "mcpServers": []}
        )
        if answer.error is not None and (self._live() or self.served_here):
            # Refused beside a session this process serves, or served and closed: a limit
            # on a process's sessions, not a failed setup (D482, D518).
            self._one_session_only()
            self.log.append("new refused")
            return
        if answer.error is not None:
            raise AgentSetupError(
                f"the agent refused session/new: {answer.error}; if it needs a login or a "
                "model setting, give it one with --env or --config-file"
            )
        self._add_session(answer)
        self.log.append("new")

    def _one_session_only(self) -> None:
        """Some agents serve one session a process (no capability says so, and the spec
        does not ask for more): no rule adds another to it, the rules go on with the one,
        and the report says so (D482)."""
        self.one_session = True
        type(self).stats["one session a process"] = 1

    def _add_session(self, answer: Answer) -> _Session:
        """The session a session/new answered, added to the live ones."""
        session = _Session(str(answer.result["sessionId"]))
        self.served_here = True
        self.sessions.append(session)
        self._note_config(session.id, answer)
        return session

    def _token(self, session: _Session) -> str:
        token = f"acp-check-{next(self.tokens)}"
        self.owners[token] = session.id
        return token

    @precondition(lambda self: bool(self._live()))
    @rule(session=st.integers(0, MAX_SESSIONS - 1), tool=st.booleans())
    def prompt(self, session: int, tool: bool) -> None:
        """A prompt whose model answers text (after one shell tool call when `tool`)."""
        chosen = self._pick(session)
        token = self._token(chosen)
        reply = f"reply {token} done"
        steps = (Shell("true"), Say(reply)) if tool else (Say(reply),)
        self.endpoint.scripts[token] = steps
        self.host.call(self._prompt_to_end, chosen, token, reply)
        self.log.append("prompt-tool" if tool else "prompt")

    @precondition(lambda self: bool(self._live()))
    @rule(session=st.integers(0, MAX_SESSIONS - 1), tool=st.booleans())
    def prompt_cut(self, session: int, tool: bool) -> None:
        """A prompt whose model's last reply is cut at the token limit (finish_reason
        "length"; a Responses reply `incomplete`, max_output_tokens), after a shell tool
        call when `tool`: it answers "max_tokens" (P2), unless the agent asked the model to
        go on and that call finished."""
        chosen = self._pick(session)
        token = self._token(chosen)
        reply = f"reply {token} cut"
        self.endpoint.scripts[token] = (Shell("true"), Cut(reply)) if tool else (Cut(reply),)
        self.host.call(self._prompt_to_end, chosen, token, reply)
        self.log.append("prompt-cut")

    async def _prompt_to_end(
        self, session: _Session, token: str, reply: str, prop: Property = PROMPT_ENDS_TURN
    ) -> None:
        request_id = await self._send_prompt(session, token)
        answer = await self.agent.answer(request_id)
        self._expect_end_turn(session, token, answer, reply, prop)

    def _expect_end_turn(
        self,
        session: _Session,
        token: str,
        answer: Answer | None,
        reply: str,
        prop: Property = PROMPT_ENDS_TURN,
    ) -> None:
        if answer is None:
            self._unanswered(self.agent, f"session/prompt {token} (session {session.id})")
        assert answer is not None
        reason = wire.dig(answer.result, "stopReason") if answer.error is None else None
        calls = self.endpoint.calls(token)
        # Cut at the token limit, and the agent did not ask the model to go on.
        cut = bool(calls) and isinstance(calls[-1].step, Cut)
        expected = "max_tokens" if cut else "end_turn"
        (CUT_ANSWERS_MAX_TOKENS if cut else prop).check(
            reason == expected,
            lambda: (
                f"prompt {token} of session {session.id}, whose model "
                + ("stopped at the token limit (finish_reason length)" if cut else "finished")
                + f", was answered {answer.error or answer.result}; expected stopReason "
                f"{expected!r}"
            ),
        )
        # Only what the model streamed must be replayed: an agent without a shell tool got
        # a plain "ok" where the tool call would have been, and its turn ended there.
        streamed = any(call.step in (Say(reply), Cut(reply)) for call in calls)
        session.turns.append((token, reply if streamed else ""))

    async def _send_prompt(
        self,
        session: _Session,
        token: str,
        then: bytes = b"",
        blocks: Sequence[dict[str, Any]] = (),
    ) -> int:
        prompt = [{"type": "text", "text": f"{token}: go"}, *blocks]
        params = {"sessionId": session.id, "prompt": prompt}
        self.prompted.add(session.id)
        for start, until in list(session.quiet):
            if until == float("inf"):
                session.quiet.remove((start, until))
                session.quiet.append((start, self.agent.mark()))
        request_id = await self.agent.start_request("session/prompt", params)
        if then:
            await self.agent.send(then)
        return request_id

    @precondition(lambda self: bool(self._live()))
    @rule(
        session=st.integers(0, MAX_SESSIONS - 1),
        point=st.sampled_from(["before-model", "mid-stream", "mid-tool", "awaiting-permission"]),
    )
    def cancel_prompt(
        self, session: int, point: CancelPoint | Literal["awaiting-permission"]
    ) -> None:
        """A prompt cancelled before its model call, in the middle of its stream, while its
        shell tool runs, or while the agent waits for the person to answer the permission
        request of that tool: it must answer `cancelled`, then stay quiet; the last is
        P9's window, and the person's answer, given once the prompt has answered, is
        `allow`, which must run nothing (an agent that does not ask runs the command and
        ends its turn)."""
        chosen = self._pick(session)
        token = self._token(chosen)
        if point == "awaiting-permission":
            # The permission rule reaches it too, but rarely: its request is held only
            # after every earlier answer of its list, and only in a mode that asks.
            self.host.call(self._permission, chosen, token, ["held"], "allow")
        else:
            self.host.call(self._cancel_at, chosen, token, point)
        self.log.append(f"cancel-{point}")

    async def _cancel_at(self, session: _Session, token: str, point: CancelPoint) -> None:
        held = Hold(f"partial {token} streaming")
        if point == "mid-tool":
            witness = _witness(self.agent, token)
            self.endpoint.scripts[token] = (Shell(f"echo started > {witness}; sleep 30"), held)
        else:
            self.endpoint.scripts[token] = (held,)
        cancel = wire.frame(method="session/cancel", params={"sessionId": session.id})
        under_way: Served | list[Proc] | None = None
        cancelled_at = trio.current_time()
        if point == "before-model":
            request_id = await self._send_prompt(session, token, then=cancel)
        else:
            request_id = await self._send_prompt(session, token)
            if await self._reach(session, token, point):
                stats = type(self).stats
                stats[f"landed {point}"] = stats.get(f"landed {point}", 0) + 1
                under_way = self._under_way(token, point)
            cancelled_at = trio.current_time()
            await self.agent.notify("session/cancel", {"sessionId": session.id})
        answer = await self.agent.answer(request_id)
        self._expect_cancelled(session, token, answer, release=False)
        if under_way is not None:
            await self._expect_aborted(token, under_way, cancelled_at)
        self.endpoint.release(token)
        await self._quiet_period()

    def _under_way(self, token: str, point: CancelPoint) -> Served | list[Proc] | None:
        """What a cancel that landed at `point` must abort: the held model call, or the
        processes of the shell command (the ones whose command line names the token's
        witness, and theirs), as the last snapshot saw them."""
        if point == "mid-stream":
            return next((c for c in self.endpoint.calls(token) if isinstance(c.step, Hold)), None)
        witness = _witness(self.agent, token).name
        roots = [p for p in self.agent.seen.values() if witness in p.command and alive(p)]
        procs = {(p.pid, p.start): p for p in roots}
        for root in roots:
            for child in descendants(root.pid):
                procs.setdefault((child.pid, child.start), child)
        return list(procs.values()) or None

    async def _expect_aborted(
        self, token: str, under_way: Served | list[Proc], cancelled_at: float
    ) -> None:
        """P20: what the cancelled turn had under way is aborted by its answer; a close seen
        within the grace after it counts (its FIN and our read of the answer race)."""
        agent = self.agent
        grace = agent.target.grace
        kind = "stream" if isinstance(under_way, Served) else "tool"
        with trio.move_on_after(grace):
            if isinstance(under_way, Served):
                await under_way.ended.wait()
            else:
                while any(alive(p) for p in under_way):  # noqa: ASYNC110 - no event for it
                    await trio.sleep(0.01)
        if isinstance(under_way, Served):
            done = under_way.gone
            at = under_way.gone_at
            left = "the model request in flight was still open"
        else:
            running = [p for p in under_way if alive(p)]
            done, at = not running, trio.current_time()
            left = "processes of the shell command it was running were still alive: " + "; ".join(
                f"pid {p.pid}: {p.command[:100]}" for p in running
            )
        CANCEL_ABORTS.check(
            done,
            lambda: f"prompt {token} answered cancelled, and {grace:g} s later {left}",
        )
        type(self).latencies.setdefault(kind, []).append(max(0.0, at - cancelled_at))

    async def _reach(self, session: _Session, token: str, point: CancelPoint) -> bool:
        """Wait (bounded) until the turn is where the cancel should land; whether it got
        there (an agent that offers no shell tool never runs one)."""
        agent, endpoint = self.agent, self.endpoint
        if point == "mid-tool":
            witness = _witness(agent, token)
            with trio.move_on_after(agent.target.timeout):
                # The file a real process writes: no event to wait for. A tool that failed
                # at once leads to the held step instead.
                while not witness.exists() and not _held(endpoint, token):
                    if agent.exited:
                        return False
                    await trio.sleep(0.02)
            agent.snapshot()  # the tool's processes, while they run
            return witness.exists()
        await agent.unless_exited(agent.target.timeout, endpoint.held, token)
        # Until the partial text has reached the client, the cancel could overtake it.
        return await agent.wait_until(
            2.0, lambda: any(token in u.text for u in agent.updates if u.session_id == session.id)
        )

    def _expect_cancelled(
        self, session: _Session, token: str, answer: Answer | None, *, release: bool = True
    ) -> None:
        if answer is None:
            self._raise_found(self.agent)
            CANCEL_ANSWERS_CANCELLED.fail(
                f"prompt {token} of session {session.id} was never answered within "
                f"{self.agent.target.timeout:g} s after session/cancel; "
                f"{self.agent.describe_exit()}"
            )
        reason = wire.dig(answer.result, "stopReason") if answer.error is None else None
        CANCEL_ANSWERS_CANCELLED.check(
            reason == "cancelled",
            lambda: (
                f"prompt {token} of session {session.id} was answered "
                f"{answer.error or answer.result} after session/cancel"
            ),
        )
        session.quiet.append((answer.seq, float("inf")))
        if release:
            # A defective agent still reading the stream would now get the rest of it.
            self.endpoint.release(token)

    async def _quiet_period(self) -> None:
        await self.agent.wait_until(QUIET, lambda: False)

    @precondition(lambda self: bool(self._live()))
    @rule(
        session=st.integers(0, MAX_SESSIONS - 1),
        # Answers that let the turn go on, to the commands before the last (D477): a step
        # tries several answers for the price of one prompt.
        # "allow" last (D484): the simplest examples draw the first, and a refusal is what
        # the rule is about.
        first=st.lists(
            st.sampled_from(sorted(GOING_ON, key=lambda a: a == "allow")),
            max_size=len(GOING_ON),
            unique=True,
        ),
        # A held request three times as often: its window (P9: a cancel while the person
        # has not answered) needs the most of a program, a held request and its cancel.
        answer=st.sampled_from(sorted((*ANSWERS, "held", "held"), key=lambda a: a == "allow")),
        late=st.sampled_from(LATE_ANSWERS),
    )
    def permission(
        self,
        session: int,
        first: list[PermissionAnswer],
        answer: PermissionAnswer,
        late: LateAnswer,
    ) -> None:
        """A prompt whose model runs a command (writing a witness file) for each of `first`
        and then one more; the agent's permission requests are answered `first` in order,
        then `answer`: a held one after session/cancel, and `late` once the prompt has
        answered."""
        chosen = self._pick(session)
        token = self._token(chosen)
        answers = [*first, answer]
        self.host.call(self._permission, chosen, token, answers, late)
        self.log.append(
            "permission-" + "-".join(answers) + (f"-{late}" if answer == "held" else "")
        )

    async def _permission(
        self, session: _Session, token: str, answers: list[PermissionAnswer], late: LateAnswer
    ) -> None:
        agent = self.agent
        witnesses = [agent.workdir / f"ran-{token}-{n}" for n in range(len(answers))]
        reply = f"reply {token} done"
        steps: list[Step] = [Shell(f"touch {w}") for w in witnesses]
        self.endpoint.scripts[token] = (*steps, Say(reply))
        agent.permission_answers[session.id] = list(answers)
        try:
            start = agent.mark()
            request_id = await self._send_prompt(session, token)

            def asks() -> list[PermissionAsk]:
                return [
                    a for a in agent.permission_asks
                    if a.session_id == session.id and a.seq > start
                ]  # fmt: skip

            def over() -> bool:  # answered, or waiting on the request held
                return agent.answered(request_id) or any(a.answer == "held" for a in asks())

            def progress() -> tuple[int, int]:
                return len(asks()), len(self.endpoint.calls(token))

            def moved_on(since: tuple[int, int]) -> Callable[[], bool]:
                return lambda: over() or progress() != since

            # Only the wire says whether the agent asks: until the answer or a held request.
            # A step runs up to six model calls, commands and requests before the held one:
            # the timeout bounds a wait in which nothing moves on, not the whole step.
            seen: tuple[int, int] | None = None
            for _ in range(3 * (len(answers) + 2)):
                if over() or progress() == seen:
                    break
                seen = progress()
                await agent.wait_until(agent.target.timeout, moved_on(seen))
            stats = type(self).stats
            for ask in asks():
                stats[f"asked {ask.answer}"] = stats.get(f"asked {ask.answer}", 0) + 1
            held = next((a for a in asks() if a.answer == "held"), None)
            if held is not None:
                self._refused_not_run(token, witnesses, asks())
                witness = self._witness_of(token, held, witnesses)
                await self._held_permission(session, token, request_id, held, late, witness)
                return
            result = await agent.answer(request_id)
            given: list[PermissionAnswer] = [a.answer for a in asks()]
            if all(may_run(a) for a in given):
                self._expect_end_turn(session, token, result, reply)
                return
            if result is None:
                self._unanswered(agent, f"session/prompt {token} (session {session.id})")
            self._refused_not_run(token, witnesses, asks())
            prop = PERMISSION_REFUSED_NOT_RUN
            if "cancelled" in given:
                reason = wire.dig(result.result, "stopReason") if result.error is None else None
                prop.check(
                    reason == "cancelled",
                    lambda: (
                        f"prompt {token}, whose permission request was answered cancelled, "
                        f"was answered {result.error or result.result}"
                    ),
                )
            else:
                self._expect_end_turn(session, token, result, reply, prop)
        finally:
            agent.permission_answers.pop(session.id, None)

    def _witness_of(self, token: str, ask: PermissionAsk, witnesses: list[Path]) -> Path:
        """The witness of the command `ask` is about: that of the furthest step of `token`'s
        script whose model call, served before it, called a tool."""
        before = [s for s in self.endpoint.calls(token) if s.stamp < ask.stamp]
        # A side call (a title, a summary) quotes the prompt too, but runs no command.
        commands = [s.index for s in before if s.tool is not None] or [s.index for s in before]
        return witnesses[min(max(commands, default=0), len(witnesses) - 1)]

    def _refused_not_run(
        self, token: str, witnesses: list[Path], asks: list[PermissionAsk]
    ) -> None:
        """P8: no command whose permission request was answered with a refusal ran."""
        for ask in asks:
            if may_run(ask.answer) or ask.answer == "held":
                continue
            witness = self._witness_of(token, ask, witnesses)
            if witness.exists():
                PERMISSION_REFUSED_NOT_RUN.fail(
                    f"prompt {token}: the command its permission request {ask.request_id!r} "
                    f"asked about ran (it wrote {witness.name}), though the client answered "
                    f"{ask.answer}"
                )
            PERMISSION_REFUSED_NOT_RUN.held()

    async def _held_permission(
        self,
        session: _Session,
        token: str,
        request_id: int,
        ask: PermissionAsk,
        late: LateAnswer,
        witness: Path,
    ) -> None:
        agent = self.agent
        await agent.notify("session/cancel", {"sessionId": session.id})
        result = await agent.answer(request_id)
        if result is None:
            self._raise_found(agent)
            PERMISSION_SKIPPED_BY_CANCEL.fail(
                f"prompt {token} of session {session.id} was not answered within "
                f"{agent.target.timeout:g} s of session/cancel while its permission request "
                f"{ask.request_id!r} was unanswered; {agent.describe_exit()}"
            )
        reason = wire.dig(result.result, "stopReason") if result.error is None else None
        PERMISSION_SKIPPED_BY_CANCEL.check(
            reason == "cancelled",
            lambda: (
                f"prompt {token}, cancelled while its permission request was unanswered, "
                f"was answered {result.error or result.result}"
            ),
        )
        session.quiet.append((result.seq, float("inf")))
        self.endpoint.release(token)
        mark = agent.mark()
        await agent.answer_permission(ask, late)
        await self._quiet_period()
        after = [
            u.update for u in agent.updates
            if u.session_id == session.id and u.seq > mark
            and u.update.get("sessionUpdate") in TURN_OUTPUT
        ]  # fmt: skip
        ran = witness.exists()  # noqa: ASYNC240 - one stat of a file of the example's own
        PERMISSION_SKIPPED_BY_CANCEL.check(
            not after and not ran,
            lambda: (
                f"prompt {token} was answered cancelled, and its permission request's late "
                f"answer ({late}) "
                + (f"ran the command (it wrote {witness.name})" if ran else "")
                + (f"was followed by {after[0]}" if after else "")
            ),
        )
        ping = await agent.start_request("_trio_agents/ping", {})
        if await agent.answer(ping) is None:
            self._raise_found(agent)
            PERMISSION_SKIPPED_BY_CANCEL.fail(
                f"after the late answer to permission request {ask.request_id!r} the next "
                f"request got no answer; {agent.describe_exit()}"
            )

    @precondition(lambda self: bool(self._live()))
    @rule(session=st.integers(0, MAX_SESSIONS - 1))
    def cancel_idle(self, session: int) -> None:
        """session/cancel with no prompt in flight, then a prompt of that session: the
        cancel had nothing to cancel, so the prompt must end its turn."""
        chosen = self._pick(session)
        token = self._token(chosen)
        reply = f"reply {token} done"
        self.endpoint.scripts[token] = (Say(reply),)
        self.host.call(self.agent.notify, "session/cancel", {"sessionId": chosen.id})
        self.host.call(self._prompt_to_end, chosen, token, reply)
        self.log.append("cancel-idle")

    @precondition(lambda self: len(self._live()) >= 2)
    @rule(cancel_first=st.booleans())
    def two_at_once(self, cancel_first: bool) -> None:
        """Prompts in two sessions at once (sent in one write); the first one cancelled
        mid-stream when `cancel_first`, which must not touch the second."""
        first, second = self._live()[:2]
        token_a, token_b = self._token(first), self._token(second)
        reply_b = f"reply {token_b} done"
        self.endpoint.scripts[token_a] = (
            (Hold(f"partial {token_a} streaming"),) if cancel_first else (Say(f"reply {token_a}"),)
        )
        self.endpoint.scripts[token_b] = (Say(reply_b),)
        self.host.call(self._two, first, second, token_a, token_b, cancel_first)
        self.log.append(f"two-{cancel_first}")

    async def _two(
        self, a: _Session, b: _Session, token_a: str, token_b: str, cancel_first: bool
    ) -> None:
        a_id = await self._send_prompt(a, token_a)
        b_id = await self._send_prompt(b, token_b)
        if cancel_first:
            await self._reach(a, token_a, "mid-stream")
            await self.agent.notify("session/cancel", {"sessionId": a.id})
        answer_b = await self.agent.answer(b_id)
        self._expect_end_turn(b, token_b, answer_b, f"reply {token_b} done")
        answer_a = await self.agent.answer(a_id)
        if cancel_first:
            self._expect_cancelled(a, token_a, answer_a)
            await self._quiet_period()
        else:
            self._expect_end_turn(a, token_a, answer_a, f"reply {token_a}")

    # An argument, though a restart could do without: Hypothesis tries the rules with the
    # fewest arguments first, so the examples it makes simplest (each run begins with some)
    # would otherwise restart the agent every third step (D477).
    @precondition(lambda self: self.can_load and bool(self._live()))
    @rule(load_unprompted=st.booleans())
    def restart(self, load_unprompted: bool) -> None:
        """End this agent's input (it must exit, leaving nothing), start it again; with
        `load_unprompted`, a session never prompted (opened now if there is none) is loaded
        at once (P12)."""
        if load_unprompted and self._room() and not self._unprompted():
            self._plain_session()  # D484: the check this draw asks for, not a no-op
        self._end_of_input(self.agent)
        for session in self.sessions:
            session.live = False
        self.agent = self._spawn()
        self._checked = 0
        self.log.append("restart")
        if load_unprompted:
            self._load_an_unprompted()

    def _unprompted(self) -> list[_Session]:
        return [s for s in self.sessions if not (s.loaded or s.turns)]

    def _load_an_unprompted(self) -> None:
        unprompted = [s for s in self._unprompted() if not s.live]
        if unprompted:
            # The newest: a session opened and left alone, not one a cancel or a switch of
            # its mode wrote to since (D484).
            self._load(unprompted[-1])

    @precondition(lambda self: self.can_load and bool(self._live()))
    @rule(session=st.integers(0, MAX_SESSIONS - 1), tool=st.booleans())
    def kill_after_answer(self, session: int, tool: bool) -> None:
        """A prompt, and a SIGKILL of the agent's process group the moment its answer is
        read (L9: answered means stored); a new process loads that session at once."""
        chosen = self._pick(session)
        token = self._token(chosen)
        reply = f"reply {token} done"
        self.endpoint.scripts[token] = (Shell("true"), Say(reply)) if tool else (Say(reply),)
        agent = self.agent
        agent.snapshot()
        agent.kill_at_answer_to = "session/prompt"
        self.host.call(self._prompt_to_end, chosen, token, reply)
        self._verify()
        self.host.call(self._stop_agent, agent)
        for each in self.sessions:
            each.killed = each.killed or each.live
            each.live = False
        self.agent = self._spawn()
        self._checked = 0
        self.log.append("kill")
        self._load(chosen)
        self._load_an_unprompted()

    @precondition(
        lambda self: self.can_load and any(not s.live and not s.loaded for s in self.sessions)
    )
    @rule(pick=st.integers(0, 7))
    def load_session(self, pick: int) -> None:
        """session/load of a session of an earlier process: it replays what was streamed;
        one never prompted loads too, and a prompt to it then runs (P12)."""
        candidates = [s for s in self.sessions if not s.live and not s.loaded]
        self._load(candidates[pick % len(candidates)])

    def _load(self, session: _Session) -> None:
        agent = self.agent
        params: dict[str, Any] = {
            "sessionId": session.id,
            "cwd": str(agent.workdir),
            "mcpServers": [],
        }
        start = agent.mark()
        # A replay may show a cancelled turn's last updates: the load closes its windows.
        session.quiet = [(a, min(b, start)) for a, b in session.quiet]
        answer = self._ask(agent, "session/load", params, f" of session {session.id}")
        unprompted = not session.turns
        (LOADS_UNPROMPTED if unprompted else LOAD_REPLAYS).check(
            answer.error is None,
            lambda: (
                f"session/load of session {session.id}"
                + (", created and never prompted," if unprompted else "")
                + f" was answered {answer.error}"
            ),
        )
        replayed = [
            u for u in agent.updates if u.session_id == session.id and start < u.seq < answer.seq
        ]
        users = " ".join(
            u.text for u in replayed if u.update.get("sessionUpdate") == "user_message_chunk"
        )
        texts = "".join(
            _content_text(u.update)
            for u in replayed
            if u.update.get("sessionUpdate") == "agent_message_chunk"
        )
        if session.killed:
            ANSWERED_DURABLE.held()
        for token, reply in session.turns:
            if token not in users:
                # A prompt missing after a crash is a turn that was answered, not stored.
                (ANSWERED_DURABLE if session.killed else LOAD_REPLAYS).fail(
                    f"session/load of {session.id} did not replay prompt {token} "
                    f"(replayed {len(replayed)} updates)"
                    + (
                        "; the agent was SIGKILLed after answering it, the moment the answer "
                        "was read"
                        if session.killed
                        else ""
                    )
                )
            if reply and reply not in texts:
                LOAD_REPLAYS.fail(
                    f"session/load of {session.id} did not replay the reply {reply!r} "
                    f"(replayed agent text: {texts[:300]!r})"
                )
        session.live = session.loaded = True
        self.served_here = True
        self._note_config(session.id, answer)
        self.log.append("load")
        if unprompted:
            token = self._token(session)
            reply = f"reply {token} done"
            self.endpoint.scripts[token] = (Say(reply),)
            self.host.call(self._prompt_to_end, session, token, reply, LOADS_UNPROMPTED)

    # -- checks ----------------------------------------------------------------------------

    def _verify(self) -> None:
        agent = self.agent
        agent.snapshot()
        self._raise_found(agent)
        by_id = {s.id: s for s in self.sessions}
        # Only what arrived since the last check: quiet windows open at an answer, so an
        # update checked before its window opened came before it.
        fresh, self._checked = agent.updates[self._checked :], len(agent.updates)
        for update in fresh:
            self._check_update(update, by_id)

    def _check_update(self, update: Update, by_id: Mapping[str, _Session]) -> None:
        SESSIONS_ISOLATED.held()
        TOOL_STATUS_FORWARD.held()
        session = by_id.get(update.session_id)
        # The listing rule's sessions (made in bulk, in another directory, between pages)
        # are opened by the client too, though no rule prompts them: agents greet each new
        # session (`available_commands_update`), and a greeting may come before its answer.
        listed_only = update.session_id in self.extra_ids or update.session_id in self.elsewhere
        if session is None and not listed_only:
            SESSIONS_ISOLATED.fail(
                f"a session/update for session {update.session_id!r}, which the client "
                f"never opened: {update.update}"
            )
        for token in TOKEN.findall(update.text):
            owner = self.owners.get(token)
            if owner is not None and owner != update.session_id:
                SESSIONS_ISOLATED.fail(
                    f"session {update.session_id} got an update carrying {token}, from "
                    f"session {owner}'s prompt: {update.update}"
                )
        kind = update.update.get("sessionUpdate")
        problem = wire.tool_status_step(self.tool_status, update.session_id, update.update)
        if problem is not None:
            TOOL_STATUS_FORWARD.fail(f"session {update.session_id}: {problem}: {update.update}")
        if session is None:
            return  # a session of the listing rule: never prompted, never cancelled
        if session.quiet:
            QUIET_AFTER_CANCEL.held()
        if kind in TURN_OUTPUT and any(a < update.seq < b for a, b in session.quiet):
            QUIET_AFTER_CANCEL.fail(
                f"session {update.session_id} sent {kind} after its cancelled prompt was "
                f"answered: {update.update}"
            )

    def _history(self) -> Hashable | None:
        return tuple(self.log) or None

    def _end_of_input(self, agent: AgentProcess) -> None:
        self.host.call(self._close_and_wait, agent)
        self._verify()  # what it wrote as it exited
        try:
            if not agent.exited and EXITS_AT_EOF.name in type(self).waived:
                # Found before in this run: the agent is stopped as the run ends it, and
                # whatever it left running is no evidence about the orphans rule.
                EXITS_AT_EOF.held()
                agent.again[EXITS_AT_EOF.name] += 1
                return
            EXITS_AT_EOF.check(
                agent.exited,
                lambda: (
                    f"the agent was still running {agent.target.grace:g} s after its stdin "
                    f"closed (pid {agent.pid})"
                ),
            )
            self.host.call(self._orphans_gone, agent)
            check_reaped(agent)
            left = agent.left_behind()
            NO_ORPHANS.check(
                not left,
                lambda: (
                    "processes the agent started outlived it: "
                    + "; ".join(f"pid {p.pid}: {p.command[:120]}" for p in left)
                ),
            )
        finally:
            self.host.call(self._stop_agent, agent)

    async def _close_and_wait(self, agent: AgentProcess) -> None:
        agent.snapshot()
        await agent.close_stdin()
        await agent.wait_exit(agent.target.grace)

    async def _orphans_gone(self, agent: AgentProcess) -> None:
        # A child the agent killed as it exited may take a moment to die.
        with trio.move_on_after(2.0):
            while agent.left_behind() or mcp_left(agent):  # noqa: ASYNC110 - no event for it
                await trio.sleep(0.02)

    def _check_closing(self) -> None:
        self._end_of_input(self.agent)
        if self.v2 is not None:
            self.evidence_of = self.v2.agent
            self._end_of_input(self.v2.agent)
            self.evidence_of = None
        self._stop_service()

    def _after_close(self) -> None:
        if hasattr(self, "agent"):
            self._count(self.agent)
        v2: V2Connection | None = getattr(self, "v2", None)
        if v2 is not None:
            self._count(v2.agent)
        shutil.rmtree(self.dir, ignore_errors=True)


def _held(endpoint: ScriptedEndpoint, token: str) -> bool:
    return any(isinstance(c.step, Hold) and c.reached.is_set() for c in endpoint.calls(token))


def _content_text(update: Mapping[str, Any]) -> str:
    content = update.get("content")
    if isinstance(content, Mapping):
        text = content.get("text")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return text if isinstance(text, str) else ""
    return ""


def acp_machine(target: AcpTarget, waived: Iterable[str] = ()) -> type[AcpMachine]:
    """A fresh `AcpMachine` subclass checking `target`, with its own counters, enforcing
    every property but those named in `waived`."""
    namespace: dict[str, Any] = {
        "target": target,
        "waived": frozenset(waived),
        "stats": {"examples": 0, "checks": 0},
        "histories": set[int](),
        "advertised": {},
        "v2_offered": None,
        "latencies": dict[str, list[float]](),
        "violations": list[ContractViolation](),
        "latest": list[tuple[float, ContractViolation]](),
    }
    machine: Callable[..., Any] = type("AcpMachine", (AcpMachine,), namespace)
    return machine  # type: ignore[return-value]
