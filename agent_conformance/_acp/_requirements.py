"""The ACP machine's requirements: what each property checks, as a clause of the ACP spec
(or of JSON-RPC 2.0, where that is the source), with its tier (D470).

Tiers follow the spec's words, not how much a break hurts:

- `MUST`: the spec says MUST (or MUST NOT) of the agent, in so many words;
- `SHOULD`: the spec says SHOULD, or the rule follows from a clause without an RFC 2119
  keyword (a definition, a lowercase "must", "once permission is granted");
- `INFO`: the spec is silent; the rule is this project's contract (docs/contract.md), which
  editors' users rely on all the same (a session that survives a crash, no orphans).

An agent is conformant when every applicable `MUST` of the ACP spec passed. Strictness that
only JSON-RPC 2.0 asks for (`source="json-rpc"`) is reported apart and does not decide it:
both official ACP SDKs drop a line that is not JSON, unanswered.

Clauses cite the spec's pages as of `agentclientprotocol/agent-client-protocol` v1.7.0
(docs/protocol/v1/...), and for v2 the draft's pages (docs/protocol/v2/..., schema
2.0.0-alpha.3) and the v2 schema `@agentclientprotocol/sdk` 2.4.0 ships (schema/v2).
`tck` names the requirements of the official ACP TCK (`agentclientprotocol/acp-tck`, its v1
and v2 registries) that check the same thing, in part or whole.

A pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from .._properties import Property
from . import _properties as p

__all__ = [
    "REQUIREMENTS",
    "TIERS",
    "Requirement",
    "Tier",
    "by_property",
    "select",
    "selector_problem",
]

Tier = Literal["MUST", "SHOULD", "INFO"]
TIERS: tuple[Tier, ...] = ("MUST", "SHOULD", "INFO")


@dataclass(frozen=True)
class Requirement:
    """One requirement of the ACP suite.

    id: `TA-<AREA>-<NNN>`, stable across releases.
    tier: `MUST`, `SHOULD` or `INFO`.
    property: the name of the property that checks it.
    source: `acp` (the ACP spec) or `json-rpc` (JSON-RPC 2.0 only).
    clause: where the source says it (page:line).
    quote: what it says there, in its words.
    capability: what the agent must advertise for it to apply, or "".
    tck: ids of the ACP TCK's requirements that check the same thing, in part.
    """

    id: str
    tier: Tier
    property: str
    source: Literal["acp", "json-rpc"]
    clause: str
    quote: str
    capability: str = ""
    tck: tuple[str, ...] = ()


def _r(
    id: str,
    tier: Tier,
    prop: Property,
    clause: str,
    quote: str,
    *,
    source: Literal["acp", "json-rpc"] = "acp",
    capability: str = "",
    tck: Iterable[str] = (),
) -> Requirement:
    return Requirement(id, tier, prop.name, source, clause, quote, capability, tuple(tck))


_PT = "docs/protocol/v1/prompt-turn.mdx"
_SS = "docs/protocol/v1/session-setup.mdx"
_JR = "JSON-RPC 2.0"
_V2 = "docs/protocol/v2"

REQUIREMENTS: tuple[Requirement, ...] = (
    _r(
        "TA-RPC-001",
        "MUST",
        p.REQUEST_ANSWERED,
        f"{_PT}:217; {_JR} §5",
        "the turn ends and the Agent MUST respond to the original session/prompt request "
        "with a StopReason / When a rpc call is made, the Server MUST reply with a Response",
        tck=("ACP-PROMPT-001", "ACP-JSONRPC-002", "ACP-EXT-001"),
    ),
    _r(
        "TA-RPC-002",
        "MUST",
        p.ANSWER_UNIQUE,
        f"{_JR} §5, §4.1",
        "id: It MUST be the same as the value of the id member in the Request Object / The "
        "Server MUST NOT reply to a Notification",
        source="json-rpc",
        tck=("ACP-JSONRPC-001", "ACP-JSONRPC-003"),
    ),
    _r(
        "TA-RPC-003",
        "MUST",
        p.MALFORMED_ANSWERED,
        f"{_JR} §5, §5.1",
        "If there was an error in detecting the id in the Request object (e.g. Parse "
        "error/Invalid Request), it MUST be Null; -32700 Parse error",
        source="json-rpc",
        tck=("ACP-INFO-PARSE-001", "ACP-INFO-INVALIDREQ-001"),
    ),
    _r(
        "TA-RPC-004",
        "INFO",
        p.MALFORMED_SURVIVES,
        "not stated (acp-tck: a de-facto rule of the reference SDKs)",
        "after an erroneous request the connection remains usable",
        tck=("ACP-JSONRPC-005",),
    ),
    _r(
        "TA-TRANSPORT-001",
        "MUST",
        p.SCHEMA_VALID,
        "docs/protocol/v1/transports.mdx:26",
        "The agent MUST NOT write anything to its stdout that is not a valid ACP message.",
        tck=("ACP-TRANSPORT-001", "ACP-TRANSPORT-002", "ACP-SCHEMA-001"),
    ),
    _r(
        "TA-CANCEL-001",
        "MUST",
        p.CANCEL_ANSWERS_CANCELLED,
        f"{_PT}:332,339",
        "the Agent MUST respond to the original session/prompt request with the cancelled "
        "stop reason",
        tck=("ACP-CANCEL-001",),
    ),
    _r(
        "TA-CANCEL-003",
        "MUST",
        p.CANCEL_ABORTS,
        f"{_PT}:332",
        "After all ongoing operations have been successfully aborted and pending updates "
        "have been sent, the Agent MUST respond to the original session/prompt request with "
        "the cancelled stop reason.",
        tck=("ACP-CANCEL-204",),
    ),
    _r(
        "TA-CANCEL-002",
        "MUST",
        p.QUIET_AFTER_CANCEL,
        f"{_PT}:343",
        "The Agent MAY send session/update notifications ... after receiving the "
        "session/cancel notification, but it MUST ensure that it does so before responding "
        "to the session/prompt request.",
        tck=("ACP-CANCEL-002",),
    ),
    _r(
        "TA-PROMPT-001",
        "SHOULD",
        p.PROMPT_ENDS_TURN,
        f"{_PT}:294,296",
        "When an Agent stops a turn, it must specify the corresponding StopReason; end_turn: "
        "The language model finishes responding without requesting more tools",
        tck=("ACP-PROMPT-001", "ACP-JSONRPC-003"),
    ),
    _r(
        "TA-PROMPT-002",
        "SHOULD",
        p.CUT_ANSWERS_MAX_TOKENS,
        f"{_PT}:294,300",
        "it must specify the corresponding StopReason; max_tokens: The maximum token limit "
        "is reached",
    ),
    _r(
        "TA-PROMPT-003",
        "MUST",
        p.PROMPT_REACHES_MODEL,
        "docs/protocol/v1/initialization.mdx:204; docs/protocol/v1/content.mdx:31",
        "all Agents MUST support ContentBlock::Text and ContentBlock::ResourceLink in "
        "session/prompt requests",
        tck=("ACP-PROMPT-001", "ACP-PROMPT-003", "ACP-PROMPTCAP-003"),
    ),
    _r(
        "TA-SESSION-001",
        "MUST",
        p.SESSIONS_ISOLATED,
        f"{_SS}:71; docs/protocol/v1/initialization.mdx:245",
        "The Agent MUST respond with a unique Session ID that identifies this conversation; "
        "SessionNotification.sessionId: The ID of the session this update pertains to",
        tck=("ACP-PROMPT-002", "ACP-SESSION-002"),
    ),
    _r(
        "TA-PERM-001",
        "SHOULD",
        p.PERMISSION_REFUSED_NOT_RUN,
        f"{_PT}:235",
        "Once permission is granted (if required), the Agent SHOULD invoke the tool",
    ),
    _r(
        "TA-PERM-002",
        "MUST",
        p.PERMISSION_SKIPPED_BY_CANCEL,
        f"{_PT}:328,332",
        "The Client MUST respond to all pending session/request_permission requests with the "
        "cancelled outcome ... the Agent MUST respond to the original session/prompt request "
        "with the cancelled stop reason",
        tck=("ACP-CANCEL-001",),
    ),
    _r(
        "TA-TOOL-001",
        "SHOULD",
        p.TOOL_STATUS_FORWARD,
        "docs/protocol/v1/tool-calls.mdx:106,212",
        "ToolCallUpdate: An update to an existing tool call; Tool calls progress through "
        "different statuses during their lifecycle",
    ),
    _r(
        "TA-LOAD-001",
        "MUST",
        p.LOAD_REPLAYS,
        f"{_SS}:134,178",
        "The Agent MUST replay the entire conversation to the Client in the form of "
        "session/update notifications",
        capability="agentCapabilities.loadSession",
        tck=("ACP-LOAD-001", "ACP-LOAD-002"),
    ),
    _r(
        "TA-LOAD-002",
        "SHOULD",
        p.LOADS_UNPROMPTED,
        f"{_SS}:85",
        "This feature enables persistence across restarts and sharing sessions between "
        "different Client instances.",
        capability="agentCapabilities.loadSession",
        tck=("ACP-LOAD-003",),
    ),
    _r(
        "TA-LOAD-003",
        "INFO",
        p.ANSWERED_DURABLE,
        "not stated (docs/contract.md L9)",
        "a prompt the agent answered is stored: a crash right after the answer loses none",
        capability="agentCapabilities.loadSession",
    ),
    _r(
        "TA-LIST-001",
        "MUST",
        p.SESSIONS_LISTED,
        "docs/protocol/v1/session-list.mdx:84,94",
        "The Agent MUST respond with a list of sessions and optional pagination metadata; "
        "cwd: Only sessions with a matching cwd are returned.",
        capability="agentCapabilities.sessionCapabilities.list",
        tck=("ACP-LIST-001", "ACP-LIST-002"),
    ),
    _r(
        "TA-LIST-002",
        "SHOULD",
        p.SESSIONS_ALL_LISTED,
        "docs/rfds/session-list.mdx:77,287",
        "A request with no filters returns all sessions with default sorting; Servers SHOULD "
        "provide stable cursors and handle invalid cursors gracefully.",
        capability="agentCapabilities.sessionCapabilities.list",
    ),
    _r(
        "TA-FS-001",
        "SHOULD",
        p.CLIENT_TEXT_USED,
        "docs/protocol/v1/file-system.mdx:6,32",
        "These methods enable Agents to access unsaved editor state",
    ),
    _r(
        "TA-CONFIG-001",
        "MUST",
        p.CONFIG_SWITCHED,
        "docs/protocol/v1/session-config-options.mdx:255",
        "The Agent MUST respond with the complete list of all configuration options and "
        "their current values",
        capability="configOptions or modes offered",
        tck=("ACP-CONFIG-002", "ACP-MODES-002"),
    ),
    _r(
        "TA-CONFIG-002",
        "INFO",
        p.CONFIG_REFUSED_UNCHANGED,
        "not stated (docs/contract.md P19)",
        "a switch to a value, option or mode the session did not offer changes nothing",
        capability="configOptions or modes offered",
    ),
    _r(
        "TA-MCP-001",
        "SHOULD",
        p.MCP_CONNECTED,
        f"{_SS}:373,543",
        "All Agents MUST support the stdio transport / Agents SHOULD connect to all MCP "
        "servers specified by the Client.",
        tck=("ACP-MCP-201",),
    ),
    _r(
        "TA-MCP-002",
        "INFO",
        p.MCP_REAPED,
        "not stated (docs/contract.md P17)",
        "no process of a session's MCP servers outlives the agent, the children it spawned "
        "included",
    ),
    _r(
        "TA-STEER-001",
        "INFO",
        p.STEER_REACHES_TURN,
        "not stated (RFD session/inject, agent-client-protocol#1261, open; docs/contract.md P21)",
        "a prompt steered into a running turn reaches the model at that turn's next step",
        capability="agentCapabilities._meta.unstable_session_inject",
    ),
    _r(
        "TA-STEER-002",
        "INFO",
        p.QUEUED_RUNS_NEXT,
        "not stated (RFD session/inject, agent-client-protocol#1261, open; docs/contract.md P22)",
        "a queued prompt runs after the turn under way, as a turn of its own",
        capability="agentCapabilities._meta.unstable_session_inject",
    ),
    _r(
        "TA-STEER-003",
        "INFO",
        p.INJECTED_NEVER_LOST,
        "not stated (RFD session/inject, agent-client-protocol#1261, open; docs/contract.md P23)",
        "every steered or queued prompt ends answered or dropped with a reason, and is told "
        "so once; a cancel drops what its turn had not taken",
        capability="agentCapabilities._meta.unstable_session_inject",
    ),
    _r(
        "TA-V2-001",
        "MUST",
        p.V2_NEGOTIATED,
        f"{_V2}/initialization.mdx:92-96; schema/v2 InitializeResponse.protocolVersion",
        "If the Agent supports the requested version, it MUST respond with the same version / "
        "The highest protocol version supported by the agent that is at or below the version "
        "requested by the client",
        tck=("ACP-INIT-201", "ACP-INIT-202"),
    ),
    _r(
        "TA-V2-002",
        "MUST",
        p.V2_WIRE,
        f"{_V2}/transports.mdx; {_V2}/migration.mdx; schema/v2",
        "Messages MUST be valid JSON-RPC ... (held to the v2 schema) / tool_call is removed (a "
        "tool call starts with tool_call_update), plan became plan_update, modes became "
        "config options; unknown values are reserved, extensions begin with `_`",
        capability="protocolVersion 2",
    ),
    _r(
        "TA-V2-003",
        "MUST",
        p.V2_RECEIPT,
        f"{_V2}/prompt-lifecycle.mdx:109; schema/v2 PromptResponse",
        "the Agent MUST respond once it has accepted the prompt / Response acknowledging that "
        "a user prompt was inserted ... messageId (required)",
        capability="protocolVersion 2",
        tck=("ACP-PROMPT-201",),
    ),
    _r(
        "TA-V2-004",
        "MUST",
        p.V2_USER_MESSAGE,
        f"{_V2}/prompt-lifecycle.mdx:119",
        "the Agent MUST report where the user message was inserted ... the source of truth "
        "for the agent-owned messageId",
        capability="protocolVersion 2",
        tck=("ACP-PROMPT-203",),
    ),
    _r(
        "TA-V2-005",
        "MUST",
        p.V2_TURN_ENDS,
        f"schema/v2 StateUpdate, CloseSessionRequest; {_V2}/prompt-lifecycle.mdx:503",
        "the agent MUST report running when foreground work starts ... and idle when it "
        "ends / the Agent MUST send an idle state_update with the cancelled stop reason / "
        "the idle state_update with stopReason cancelled before responding successfully to "
        "session/close",
        capability="protocolVersion 2",
        tck=("ACP-STATE-201", "ACP-STATE-202", "ACP-CANCEL-201", "ACP-CANCEL-208"),
    ),
    _r(
        "TA-V2-006",
        "MUST",
        p.V2_STATE_TRUE,
        f"schema/v2 RequiresActionStateUpdate; {_V2}/prompt-lifecycle.mdx:514",
        "Once reported, agents MUST report running when progress resumes / updates after "
        "the cancel only before the idle that ends the cancelled work",
        capability="protocolVersion 2",
        tck=("ACP-CANCEL-202",),
    ),
    _r(
        "TA-V2-007",
        "MUST",
        p.V2_RESUME_REPLAYS,
        f"{_V2}/session-setup.mdx:118-212; schema/v2 StateUpdate",
        "replayFrom {type: start} ... replays everything before responding / Resume MUST "
        "send a current-state snapshot after any replay and before its response",
        capability="protocolVersion 2",
    ),
    _r(
        "TA-PROC-001",
        "SHOULD",
        p.EXITS_AT_EOF,
        "docs/protocol/v1/transports.mdx:40",
        "Client->>Agent Process: Close stdin, terminate subprocess",
        tck=("ACP-SHUTDOWN-001",),
    ),
    _r(
        "TA-PROC-002",
        "INFO",
        p.NO_ORPHANS,
        "not stated (docs/contract.md P6)",
        "once the agent has exited, no process it started is left alive",
    ),
)
"""Every requirement, one per property of the ACP machine."""


def by_property() -> dict[str, Requirement]:
    """The requirement of each ACP property, by property name."""
    return {r.property: r for r in REQUIREMENTS}


def selector_problem(selectors: Sequence[str], properties: Sequence[Property]) -> str | None:
    """Why a selector of `--only`/`--skip` names nothing, or None: each selector is a
    property name, a rule id (P5), a requirement id (TA-RPC-003) or a tier (MUST)."""
    for selector in selectors:
        if not select([selector], properties):
            return (
                f"{selector!r} names no property, rule, requirement or tier of the ACP "
                "machine; name one of: a property (malformed-answered), a rule (P5), a "
                "requirement (TA-RPC-003) or a tier (MUST, SHOULD, INFO)"
            )
    return None


def select(selectors: Iterable[str], properties: Sequence[Property]) -> frozenset[str]:
    """The names of the `properties` any of `selectors` names."""
    reqs: Mapping[str, Requirement] = by_property()
    chosen: set[str] = set()
    for selector in selectors:
        key = selector.strip()
        for prop in properties:
            req = reqs.get(prop.name)
            if key in (prop.name, prop.rule) or (
                req is not None and key.upper() in (req.id, req.tier)
            ):
                chosen.add(prop.name)
    return frozenset(chosen)
