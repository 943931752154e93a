"""The ACP machine's sessions with an MCP server (rules P15 and P17): `session/new` naming a
stdio MCP server, the suite's own (`_echo_server.py`, run by path), which starts a child
process of its own as many servers do (an `npx` wrapper, a language server).

The server records its pid and its child's in a file of the example's directory as it
starts, so what the agent did is read from the server's side and /proc, whatever the agent
reports: the server must be running when `session/new` is answered; its `echo` tool, offered
to the model under a name holding the server's and the tool's (`mcp__acpcheck__echo`), must
return to the model what it was given; and once the agent has exited, no process of the
server, its child included, may be left (design D473).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from .._machine import ConformanceMachine, rule
from ._client import AgentProcess, Answer
from ._endpoint import Mcp, Say, ScriptedEndpoint
from ._procs import Proc, alive, proc_of
from ._properties import MCP_CONNECTED, MCP_REAPED

__all__ = ["MCP_SERVER", "McpSessions", "check_reaped", "mcp_left"]

MCP_SERVER = "acpcheck"
"""The name the client gives the server in `mcpServers`."""
ECHO_SERVER = str(Path(__file__).with_name("_echo_server.py"))
"""The server's script, run by path (it imports nothing of this package)."""


class McpSessions(ConformanceMachine):
    """The P15 rule of `AcpMachine`, whose state it uses."""

    if TYPE_CHECKING:  # of `AcpMachine`
        agent: AgentProcess
        dir: Path
        tokens: itertools.count[int]
        log: list[str]
        sessions: list[Any]
        mcp_made: bool

        @property
        def endpoint(self) -> ScriptedEndpoint: ...

        def _live(self) -> list[Any]: ...

        def _room(self) -> bool: ...

        def _token(self, session: Any) -> str: ...

        def _add_session(self, answer: Answer) -> Any: ...

        def _plain_session(self) -> None: ...
        def _one_session_only(self) -> None: ...

        served_here: bool

        def _ask(
            self, agent: AgentProcess, method: str, params: Mapping[str, Any], what: str = ""
        ) -> Answer: ...

        async def _prompt_to_end(
            self, session: Any, token: str, reply: str, prop: Any = ...
        ) -> None: ...

    # One an example at most, and then one time in three: each starts a server and the
    # agent's client for it (about a second in an agent that imports an MCP SDK on first
    # use, as ours does). Drawn whenever a session may be added, a third of the examples or
    # so hold one (D475). Without `server` it adds a plain session, so shrinking prefers it.
    @precondition(lambda self: self._room() and not self.mcp_made)
    @rule(server=st.sampled_from((False, False, True)))
    def mcp_session(self, server: bool) -> None:
        """session/new naming the suite's stdio MCP server (or, without `server`, none),
        then a prompt whose model calls the server's echo tool."""
        if not server:
            self._plain_session()
            return
        self.mcp_made = True
        number = next(self.tokens)
        record = self.dir / f"mcp-{number}.jsonl"
        entry = {
            "name": MCP_SERVER,
            "command": sys.executable,
            "args": [ECHO_SERVER, str(record)],
            "env": [],
        }
        agent = self.agent
        params = {"cwd": str(agent.workdir), "mcpServers": [entry]}
        answer = self._ask(agent, "session/new", params, " naming a stdio MCP server")
        if answer.error is not None and (self._live() or self.served_here):
            # Refused beside a session this process serves: a limit on a process's
            # sessions, as for a plain session/new (D482), not a server it failed to start.
            self.mcp_made = False
            self._one_session_only()
            self.log.append("mcp-new refused")
            return
        MCP_CONNECTED.check(
            answer.error is None,
            lambda: (
                f"session/new naming a stdio MCP server that starts was answered {answer.error}"
            ),
        )
        # The spec asks an agent to connect (SHOULD), not when: one that starts the server
        # only when the session's first prompt runs is not failed for it here.
        agent.mcp_records.append(record)
        session = self._add_session(answer)
        self.log.append("mcp-new")
        token = self._token(session)
        mark = f"echoed-{token}"
        reply = f"reply {token} done"
        endpoint = self.endpoint
        endpoint.scripts[token] = (Mcp(MCP_SERVER, "echo", {"text": mark}), Say(reply))
        before = len(endpoint.bodies)
        self.host.call(self._prompt_to_end, session, token, reply)
        MCP_CONNECTED.check(
            "ready" in _recorded(record),
            lambda: (
                f"prompt {token} ended, and the stdio MCP server its session/new named "
                f"(`{sys.executable} {ECHO_SERVER} {record}`) was never started"
            ),
        )
        called = [s for s in endpoint.calls(token) if isinstance(s.step, Mcp)]
        if not called:
            # The agent offered the model no tool of the server: no MCP tool reached it.
            MCP_CONNECTED.fail(
                f"prompt {token} of a session naming MCP server {MCP_SERVER!r}: no tool the "
                f"model was offered is its echo (named 'echo', or holding {MCP_SERVER!r} and "
                "ending with 'echo')"
            )
        shown = "\n".join(endpoint.bodies[before:])
        MCP_CONNECTED.check(
            shown.count(mark) >= 2,  # the call's arguments, then its result
            lambda: (
                f"prompt {token}: the model called {called[0].tool} with text {mark!r}, and no "
                "later model request of the turn held the tool's result"
            ),
        )
        self.log.append("mcp-call")


def _recorded(record: Path) -> dict[str, list[int]]:
    """The reference server's record: event -> pids, for `ready` (the server) and `child`;
    an agent that starts the server more than once (per prompt, on a load) adds to it."""
    found: dict[str, list[int]] = {}
    try:
        lines = record.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            event: Any = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            fields = cast("dict[str, Any]", event)
            kind, pid = fields.get("event"), fields.get("pid")
            if kind in ("ready", "child") and isinstance(pid, int):
                found.setdefault(str(kind), []).append(pid)
    return found


def mcp_left(agent: AgentProcess) -> list[Proc]:
    """The processes of the MCP servers `agent` was given that are still alive (read from
    each server's record as it is first asked: a server may start late)."""
    for record in agent.mcp_records:
        for pid in (pid for pids in _recorded(record).values() for pid in pids):
            if pid not in {p.pid for p in agent.mcp} and (proc := proc_of(pid)) is not None:
                agent.mcp.append(proc)
    return [p for p in agent.mcp if alive(p)]


def check_reaped(agent: AgentProcess) -> None:
    """P17, once the agent has exited (and its stragglers had their moment)."""
    left = mcp_left(agent)
    MCP_REAPED.check(
        not left,
        lambda: (
            "processes of the MCP servers the client named outlived the agent: "
            + "; ".join(f"pid {p.pid}: {p.command[:100]}" for p in left)
        ),
    )
