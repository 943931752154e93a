"""The library's exceptions, all of them, in one tree.

Every error trio-agents raises on purpose is a `TrioAgentsError`, so a caller can catch the
library's refusals without catching its own bugs. Each is also the trio or stdlib exception
it means (in brackets), so `except trio.ClosedResourceError` or `except KeyError` catch it as
they would for any other resource or mapping. There is one class per reason; the message
names the value and what to do.

    TrioAgentsError
     +-- AgentClosedError ............ [trio.ClosedResourceError]
     +-- FiberClosedError ............ [trio.ClosedResourceError]
     +-- ShellClosedError ............ [trio.ClosedResourceError, RuntimeError]
     +-- StoreClosedError ............ [trio.ClosedResourceError]
     +-- StoreBrokenError ............ [trio.BrokenResourceError]
     |    +-- SessionClaimLostError
     +-- StoreLockedError ............ [trio.BusyResourceError]
     +-- StoreFileError .............. [OSError]
     +-- StoreConnectionError ........ [ConnectionError]
     +-- AlreadyRunningError ......... [RuntimeError]
     +-- AlreadyLoadedError .......... [ValueError]
     +-- DuplicateSessionError
     |    +-- SessionExistsError ..... [FileExistsError]
     |    +-- SessionLiveError ....... [trio.BusyResourceError]
     |         +-- SessionLiveElsewhereError
     +-- SessionNotFoundError ........ [KeyError]
     +-- JobNotFoundError ............ [KeyError]
     +-- SpillDirectoryError ......... [OSError]
     +-- LabelNotFoundError .......... [KeyError]
     +-- CorruptSessionError ......... [ValueError]
     +-- PersistenceError
     +-- FlushTimeoutError ........... [TimeoutError]
     +-- StoreNotFoundError .......... [FileNotFoundError]
     +-- NotAStoreError .............. [ValueError]
     +-- UnknownStoreVersionError .... [ValueError]
     +-- ReadOnlyStoreError .......... [io.UnsupportedOperation]
     +-- ChatStreamError ............. [ValueError]
     +-- ModelEndpointError .......... [RuntimeError]
     +-- SandboxUnavailableError ..... [RuntimeError]
     +-- McpConfigError .............. [ValueError]
     +-- McpServerError .............. [RuntimeError]
     +-- TurnNotFoundError ........... [LookupError]
     +-- ObserverMisuse .............. [ValueError]
     +-- TracingUnavailableError ..... [ImportError]

Kept in their own modules, outside the tree, because no caller ever sees them:
`acp._jsonrpc.JsonRpcError` is the value an ACP request handler raises to answer with a
JSON-RPC error; the server turns it into the error frame it sends.
`acp._jsonrpc.ClientRequestError` is what a request the server sends its client (a
permission request) raises when the client answers an error or the connection ends first.
The conformance suite's own exceptions (`ContractViolation`, its verdicts and the machines'
probes) are in `agent_conformance`, not here: they are not errors of the library but
verdicts about the implementation it checks.

A wrong argument (a bad value or type whatever the state, e.g. `max_steps=0`) is a plain
`ValueError` or `TypeError`, as in the stdlib: it is a bug at the call site, not a refusal
to handle. Stand-ins in `trio_agents.testing` raise plain errors too.

This module imports only trio and the stdlib, so every other module can import it.
"""

from __future__ import annotations

import io

import trio

__all__ = [
    "AgentClosedError",
    "AlreadyLoadedError",
    "AlreadyRunningError",
    "ChatStreamError",
    "CorruptSessionError",
    "DuplicateSessionError",
    "FiberClosedError",
    "FlushTimeoutError",
    "JobNotFoundError",
    "LabelNotFoundError",
    "McpConfigError",
    "McpServerError",
    "ModelEndpointError",
    "NotAStoreError",
    "ObserverMisuse",
    "PersistenceError",
    "ReadOnlyStoreError",
    "SandboxUnavailableError",
    "SessionClaimLostError",
    "SessionExistsError",
    "SessionLiveElsewhereError",
    "SessionLiveError",
    "SessionNotFoundError",
    "ShellClosedError",
    "SpillDirectoryError",
    "StoreBrokenError",
    "StoreClosedError",
    "StoreConnectionError",
    "StoreFileError",
    "StoreLockedError",
    "StoreNotFoundError",
    "TracingUnavailableError",
    "TrioAgentsError",
    "TurnNotFoundError",
    "UnknownStoreVersionError",
]


def _message(self: BaseException) -> str:
    # KeyError's own __str__ quotes its argument as if it were a key: print the sentence.
    return str(self.args[0]) if self.args else ""


class TrioAgentsError(Exception):
    """Base class of every error trio-agents raises deliberately."""


# -- closed and broken resources ------------------------------------------------------------


class AgentClosedError(TrioAgentsError, trio.ClosedResourceError):
    """A message was delivered to an agent that is closing or closed.

    It is a `trio.ClosedResourceError`, like using any other closed trio resource.
    """


class FiberClosedError(TrioAgentsError, trio.ClosedResourceError):
    """Something was attached to a fiber that is closing or closed."""


class ShellClosedError(TrioAgentsError, trio.ClosedResourceError, RuntimeError):
    """A job was started on a shell executor that is not running: `running()` was not
    entered yet, or it is closing or closed (also when it began closing while the job was
    being spawned; that process is killed). A RuntimeError too, as it was before it had a
    class of its own."""


class StoreClosedError(TrioAgentsError, trio.ClosedResourceError):
    """A store that needs `running()` was used outside it (not yet entered, or left)."""


class StoreBrokenError(TrioAgentsError, trio.BrokenResourceError):
    """The store's writer failed (its error is the cause): the store cannot make records
    durable any more."""


class SessionClaimLostError(StoreBrokenError):
    """The store lost its claim on one live session (a PostgreSQL connection holding it was
    cut and another process took the session, or it could not be re-established in time):
    that session's records cannot be made durable here any more, while the store's other
    sessions go on. The agent of the session closes; resume the session where it is live."""


class StoreLockedError(TrioAgentsError, trio.BusyResourceError):
    """Another process held the store file's write lock for longer than this store could
    wait (its `close_grace` when it closed, or SQLite's busy timeout when it opened): the
    records it names were not stored."""


# -- used twice -------------------------------------------------------------------------------


class AlreadyRunningError(TrioAgentsError, RuntimeError):
    """A task was asked to run something that already runs: a second `running()` of a shell
    executor or a store, a second `run()` of an agent, a second `serve()` of a fiber."""


class AlreadyLoadedError(TrioAgentsError, ValueError):
    """A plugin was applied where it is already applied: `Runtime.load` of a loaded plugin,
    a `BashTools` loaded in another runtime, a `ConfiguredAgents` applied to a second open
    fiber. Reload it instead."""


# -- sessions -------------------------------------------------------------------------------


class DuplicateSessionError(TrioAgentsError):
    """A session id is taken: it is stored already, or live. Catch this for any of them."""


class SessionExistsError(DuplicateSessionError, FileExistsError):
    """`create` was given the id of a stored session: resume it, or choose another id."""


class SessionLiveError(DuplicateSessionError, trio.BusyResourceError):
    """The session is live (its agent is open), or became live while it was being restored;
    it lost a same-id race or names a session still open."""


class SessionLiveElsewhereError(SessionLiveError):
    """The session is live in another process sharing the store file."""


class SessionNotFoundError(TrioAgentsError, KeyError):
    """No session with that id is stored."""

    __str__ = _message


class CorruptSessionError(TrioAgentsError, ValueError):
    """A stored session is damaged beyond what crash repair may fix: a record is missing in
    the middle, or a record (or the header) is not valid JSON or lacks a field its type
    needs. It is never repaired silently.

    `session_id` is the session's id; `seq` the number of the damaged record, or None when
    the damage is in the session's header.
    """

    def __init__(self, message: str, *, session_id: str = "", seq: int | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.seq = seq


class PersistenceError(TrioAgentsError):
    """A session record could not be handed to its store. It propagates out of the agent's
    loop rather than being recorded as a failed turn: history that cannot be kept must not
    pass silently."""


class FlushTimeoutError(TrioAgentsError, TimeoutError):
    """A closing agent's session was not flushed to its store within `close_grace`."""


# -- lookups --------------------------------------------------------------------------------


class JobNotFoundError(TrioAgentsError, KeyError):
    """The shell executor has no job with that id."""

    __str__ = _message


class SpillDirectoryError(TrioAgentsError, OSError):
    """A spill directory was removed, replaced or turned into a symlink behind the
    executor's back: no path in it is handed out, and nothing is spilled into it again."""


class LabelNotFoundError(TrioAgentsError, KeyError):
    """A `ConfiguredAgents` has no config with that label (a typo, not an agent that is
    down)."""

    __str__ = _message


# -- store files ----------------------------------------------------------------------------


class StoreNotFoundError(TrioAgentsError, FileNotFoundError):
    """A store opened read-only does not exist (read-only never creates one)."""


class NotAStoreError(TrioAgentsError, ValueError):
    """The file is not a trio-agents session store: not SQLite, or someone else's database.
    It is refused rather than given our tables."""


class StoreFileError(TrioAgentsError, OSError):
    """The store file cannot be opened or written: its directory cannot be made, it is
    read-only, its disk is full, or the system reported an I/O error. The message names the
    file and the cause; `path` is the file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:
        # OSError's own __str__ would print the args tuple of a one-argument error as is;
        # print the sentence.
        return _message(self)


class StoreConnectionError(TrioAgentsError, ConnectionError):
    """A database store cannot reach its server, or lost its connection: the server is
    down, the DSN names no such host or database, or the driver is not installed. The
    message names the database (never its password) and the cause."""


class UnknownStoreVersionError(TrioAgentsError, ValueError):
    """The file is a trio-agents session store of a format this version does not read."""


class ReadOnlyStoreError(TrioAgentsError, io.UnsupportedOperation):
    """A session was entered into a store opened with `readonly=True`: like writing to a
    file opened for reading."""


# -- models ---------------------------------------------------------------------------------


class ChatStreamError(TrioAgentsError, ValueError):
    """The event stream broke the protocol, or the server reported an error inside it. The
    OpenAI-compatible model reports it as a `ModelEndpointError` naming the endpoint."""


class ModelEndpointError(TrioAgentsError, RuntimeError):
    """The endpoint answered an error status, broke the streaming protocol, or could not be
    reached. The message names the URL and the HTTP status; it never holds the API key.

    `status` is the HTTP status when there was one; `url` the endpoint (no credentials).
    """

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class SandboxUnavailableError(TrioAgentsError, RuntimeError):
    """Shell commands are to run sandboxed, but this machine cannot: bubblewrap (`bwrap`) is
    missing or the kernel refuses it a user or PID namespace. The message says which, and how
    to allow unsandboxed commands instead (`SandboxPolicy(allow_unsandboxed=True)`, the CLI's
    `--allow-unsandboxed`)."""


class McpConfigError(TrioAgentsError, ValueError):
    """An MCP server configuration (a `--mcp` file, ACP's `mcpServers`) is not one this
    runtime can use. The message names the entry and the field (`mcpServers.fs.args must be
    a list of strings, got 'x'`)."""


class McpServerError(TrioAgentsError, RuntimeError):
    """An MCP server could not be used: it did not start, exited, or did not answer
    `initialize` within the bound. `server` is its configured name; the message names it
    and the reason. Nothing of it is left running when this is raised."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class TurnNotFoundError(TrioAgentsError, LookupError):
    """There is no finished turn to give a result for: `turn_result` found no such turn in
    the records, or it has not ended in them; or a `TurnStream`'s prompt never got a turn
    (it was dropped from the queue) or the agent's loop stopped before the turn ended. The
    message names the turn or prompt and what to do."""


# -- the conformance suite ------------------------------------------------------------------


class ObserverMisuse(TrioAgentsError, ValueError):
    """An adapter called the conformance suite's `AgentObserver` out of order (a step
    outside a turn, a result for a call it never announced): a bug of the adapter, not a
    contract violation of the agent. The message names the call and what to call first."""


class TracingUnavailableError(TrioAgentsError, ImportError):
    """An `AgentTracer` was asked for, but the OpenTelemetry API is not installed; the
    message says how to install it (`pip install 'trio-agents[tracing]'`)."""
