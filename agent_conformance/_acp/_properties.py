"""The ACP machine's named properties, rule by rule (rules P1-P9, P11, P12, P14, P15, P17-P27 of
docs/contract.md's ACP section, and L9 where an agent can load sessions). Pure: no trio."""

from __future__ import annotations

from .._properties import Property

__all__ = [
    "ANSWERED_DURABLE",
    "ANSWER_UNIQUE",
    "CANCEL_ABORTS",
    "CANCEL_ANSWERS_CANCELLED",
    "CLIENT_TEXT_USED",
    "CONFIG_REFUSED_UNCHANGED",
    "CONFIG_SWITCHED",
    "CUT_ANSWERS_MAX_TOKENS",
    "EXITS_AT_EOF",
    "INJECTED_NEVER_LOST",
    "LOADS_UNPROMPTED",
    "LOAD_REPLAYS",
    "MALFORMED_ANSWERED",
    "MALFORMED_SURVIVES",
    "MCP_CONNECTED",
    "MCP_REAPED",
    "NO_ORPHANS",
    "PERMISSION_REFUSED_NOT_RUN",
    "PERMISSION_SKIPPED_BY_CANCEL",
    "PROMPT_ENDS_TURN",
    "PROMPT_REACHES_MODEL",
    "PROPERTIES",
    "QUEUED_RUNS_NEXT",
    "QUIET_AFTER_CANCEL",
    "REQUEST_ANSWERED",
    "SCHEMA_VALID",
    "SESSIONS_ALL_LISTED",
    "SESSIONS_ISOLATED",
    "SESSIONS_LISTED",
    "STEER_REACHES_TURN",
    "TOOL_STATUS_FORWARD",
    "V2_NEGOTIATED",
    "V2_PROPERTIES",
    "V2_RECEIPT",
    "V2_RESUME_REPLAYS",
    "V2_STATE_TRUE",
    "V2_TURN_ENDS",
    "V2_USER_MESSAGE",
    "V2_WIRE",
]

_M = "acp"

REQUEST_ANSWERED = Property(
    "P1",
    "request-answered",
    _M,
    "every request the client sends is answered, by a response with its id holding a "
    "result or an error (a prompt once its turn is over, anything else within the timeout)",
)
ANSWER_UNIQUE = Property(
    "P1",
    "answer-unique",
    _M,
    "a request is answered exactly once, and nothing is answered that was not asked",
)
CANCEL_ANSWERS_CANCELLED = Property(
    "P2",
    "cancel-answers-cancelled",
    _M,
    'after session/cancel, the prompt in flight in that session answers stopReason "cancelled"',
)
CANCEL_ABORTS = Property(
    "P20",
    "cancel-aborts",
    _M,
    'a prompt answers "cancelled" once what its turn had under way is aborted: the agent has '
    "closed the model request in flight, and the processes of the tool call it was running "
    "have ended (each seen within the grace of the answer)",
)
QUIET_AFTER_CANCEL = Property(
    "P2",
    "quiet-after-cancel",
    _M,
    "once a cancelled prompt is answered, no session/update of that session follows until "
    "the client sends that session's next prompt",
)
PROMPT_ENDS_TURN = Property(
    "P2",
    "prompt-ends-turn",
    _M,
    'a prompt that was not cancelled answers stopReason "end_turn" once its model finished; '
    "a session/cancel with no prompt in flight changes nothing",
)
CUT_ANSWERS_MAX_TOKENS = Property(
    "P2",
    "cut-answers-max-tokens",
    _M,
    'a prompt whose model\'s last reply was cut at the token limit (finish_reason "length") '
    'answers stopReason "max_tokens"',
)
SESSIONS_ISOLATED = Property(
    "P3",
    "sessions-isolated",
    _M,
    "a session/update names a session the client opened, and never carries what another "
    "session's prompt or model produced",
)
LOAD_REPLAYS = Property(
    "P4",
    "load-replays",
    _M,
    "when the agent advertises loadSession, session/load of a session from an earlier "
    "process replays, before it answers, each prompt of its completed turns and the text "
    "the model streamed for it",
)
LOADS_UNPROMPTED = Property(
    "P12",
    "loads-unprompted",
    _M,
    "when the agent advertises loadSession, a session created by session/new and never "
    "prompted loads in a new process (after an end of input or a SIGKILL), and a prompt to it "
    "then runs",
)
ANSWERED_DURABLE = Property(
    "L9",
    "answered-durable",
    _M,
    "when the agent advertises loadSession, a prompt it answered is stored: killed (SIGKILL "
    "to its process group) the moment the client reads the answer, a new process's "
    "session/load replays that prompt and every prompt of the session answered before",
)
MALFORMED_ANSWERED = Property(
    "P5",
    "malformed-answered",
    _M,
    "a malformed frame gets a JSON-RPC error: with the frame's id when it has one, with id "
    "null when none can be read",
)
MALFORMED_SURVIVES = Property(
    "P5",
    "malformed-survives",
    _M,
    "after a malformed frame the agent keeps serving: the next request is answered",
)
EXITS_AT_EOF = Property(
    "P6",
    "exits-at-eof",
    _M,
    "at the end of its standard input the agent exits within the grace",
)
NO_ORPHANS = Property(
    "P6",
    "no-orphans",
    _M,
    "once the agent has exited, no process it started is left alive",
)
SCHEMA_VALID = Property(
    "P7",
    "schema-valid",
    _M,
    "every line the agent writes to its standard output is one JSON-RPC 2.0 message, valid "
    "against the ACP schema",
)
PERMISSION_REFUSED_NOT_RUN = Property(
    "P8",
    "permission-refused-not-run",
    _M,
    "a tool call whose session/request_permission is answered with a reject option, an "
    'error, an option it did not offer or the outcome "cancelled" does not run; its prompt '
    'then ends its turn, or for "cancelled" answers stopReason "cancelled"',
)
PERMISSION_SKIPPED_BY_CANCEL = Property(
    "P9",
    "permission-skipped-by-cancel",
    _M,
    'after session/cancel, a prompt whose permission request is unanswered answers "cancelled" '
    "without that answer, its call does not run, and an answer sent later gets no update and "
    "no error",
)
TOOL_STATUS_FORWARD = Property(
    "P14",
    "tool-status-forward",
    _M,
    "a tool_call_update names a call its session announced with tool_call, and a call's "
    "status only moves forward: pending, in_progress, then completed or failed, which is final",
)

SESSIONS_LISTED = Property(
    "P11",
    "sessions-listed-once",
    _M,
    "an agent that advertises sessionCapabilities.list answers session/list with its "
    "sessions, none more than once across the pages of one listing (following each "
    "nextCursor), each with the cwd it was created in; with cwd given, only the sessions of "
    "that directory; a session created between two pages makes the later page repeat none",
)
SESSIONS_ALL_LISTED = Property(
    "P11",
    "sessions-all-listed",
    _M,
    "a listing that pages to its end leaves out no session the agent created, in this "
    "process or an earlier one, with a turn that ended before it began; nor, once the agent "
    "has listed a session that never took a prompt, any other such session (D479)",
)
PROMPT_REACHES_MODEL = Property(
    "P18",
    "prompt-reaches-model",
    _M,
    "what a prompt holds reaches the model: its turn's model requests hold the text of each "
    "text block, of each embedded text resource (an agent advertising embeddedContext), and "
    "of each resource_link its URI or the text it names; a link inside the session's cwd "
    "does not fail the prompt",
)
CLIENT_TEXT_USED = Property(
    "P18",
    "client-text-used",
    _M,
    "an agent that reads a linked file through the client (fs/read_text_file) gives the "
    "model the client's text, which an editor may hold unsaved, not the file's on disk",
)
CONFIG_SWITCHED = Property(
    "P19",
    "config-switched",
    _M,
    "session/set_config_option with a value the session offered is answered with every "
    "option, that one at that value and the others as they were; session/set_mode with a "
    "mode it offered is answered without an error",
)
CONFIG_REFUSED_UNCHANGED = Property(
    "P19",
    "config-refused-unchanged",
    _M,
    "a session/set_config_option or session/set_mode naming an option, value or mode the "
    "session did not offer changes nothing: no current_mode_update for it, and the options "
    "are then as they were",
)

MCP_CONNECTED = Property(
    "P15",
    "mcp-connected",
    _M,
    "a session/new naming a stdio MCP server that starts is answered without an error once "
    "the server is running, and the session's model can call the server's tools: a call "
    "of its echo tool gives the model what the tool returned",
)
MCP_REAPED = Property(
    "P17",
    "mcp-reaped",
    _M,
    "once the agent has exited, no process of the MCP servers it was given is left, the "
    "children a server started included",
)

STEER_REACHES_TURN = Property(
    "P21",
    "steer-reaches-turn",
    _M,
    "on an agent that advertises steering, a prompt steered into a running turn reaches "
    "the model in that turn: its next model request, made before the turn's prompt is "
    "answered, holds it",
)
QUEUED_RUNS_NEXT = Property(
    "P22",
    "queued-runs-next",
    _M,
    "on an agent that advertises steering, a prompt queued while a turn runs reaches the "
    "model only after that turn's last reply, and then runs as a turn of its own",
)
INJECTED_NEVER_LOST = Property(
    "P23",
    "injected-never-lost",
    _M,
    "on an agent that advertises steering, each steered or queued prompt gets a receipt with "
    "its messageId and is told its outcome exactly once: answered with a stop reason, or "
    "dropped with a reason; a session/cancel drops those its turn had not taken, by the "
    "time the cancelled prompt answers, and they never reach the model",
)

V2_NEGOTIATED = Property(
    "P24",
    "v2-negotiated",
    _M,
    "asked for protocol 2, initialize answers a version the agent speaks at or below 2 (1 "
    "or 2), never an error",
)
V2_WIRE = Property(
    "P24",
    "v2-wire",
    _M,
    "on a v2 connection, every frame holds to ACP v2's schema, and every session/update is "
    "of a kind v2 has or an extension's (`_`-prefixed): none of v1's tool_call, plan or "
    "current_mode_update",
)
V2_RECEIPT = Property(
    "P25",
    "v2-receipt",
    _M,
    "on a v2 connection, a session/prompt to an idle session is answered while its turn "
    "runs (its model's stream held), with a receipt: a non-empty messageId and no stop reason",
)
V2_USER_MESSAGE = Property(
    "P25",
    "v2-user-message",
    _M,
    "on a v2 connection, the receipt's messageId is on a user_message or user_message_chunk "
    "of that session no later than the idle that ends the prompt's turn",
)
V2_TURN_ENDS = Property(
    "P26",
    "v2-turn-ends",
    _M,
    "on a v2 connection, an accepted prompt's turn is told as running (or requires_action), "
    "then an idle; the idle's stop reason, when given, is the one rule P2 gives "
    '("end_turn", "max_tokens" when cut), and after session/cancel or session/close it is '
    'given and is "cancelled", before the close is answered',
)
V2_STATE_TRUE = Property(
    "P26",
    "v2-state-true",
    _M,
    "on a v2 connection, no model output of a session (agent_message, agent_thought and "
    "their chunks) arrives while its last state is requires_action, nor after the "
    "cancelled idle of its turn until its next prompt",
)
V2_RESUME_REPLAYS = Property(
    "P27",
    "v2-resume-replays",
    _M,
    'on a v2 connection, session/resume of a closed session with replayFrom {"type": '
    '"start"} is answered without an error, after replaying the user message of each of '
    "its earlier prompts with its receipt's messageId, then a state_update telling the "
    "session's state",
)

V2_PROPERTIES: tuple[Property, ...] = (
    V2_NEGOTIATED,
    V2_WIRE,
    V2_RECEIPT,
    V2_USER_MESSAGE,
    V2_TURN_ENDS,
    V2_STATE_TRUE,
    V2_RESUME_REPLAYS,
)
"""The properties of ACP v2 (P24-P27): checked on a v2 connection only."""

PROPERTIES: tuple[Property, ...] = (
    REQUEST_ANSWERED,
    ANSWER_UNIQUE,
    CANCEL_ANSWERS_CANCELLED,
    CANCEL_ABORTS,
    QUIET_AFTER_CANCEL,
    PROMPT_ENDS_TURN,
    CUT_ANSWERS_MAX_TOKENS,
    SESSIONS_ISOLATED,
    LOAD_REPLAYS,
    ANSWERED_DURABLE,
    LOADS_UNPROMPTED,
    MALFORMED_ANSWERED,
    MALFORMED_SURVIVES,
    EXITS_AT_EOF,
    NO_ORPHANS,
    SCHEMA_VALID,
    PERMISSION_REFUSED_NOT_RUN,
    PERMISSION_SKIPPED_BY_CANCEL,
    TOOL_STATUS_FORWARD,
    SESSIONS_LISTED,
    SESSIONS_ALL_LISTED,
    PROMPT_REACHES_MODEL,
    CLIENT_TEXT_USED,
    CONFIG_SWITCHED,
    CONFIG_REFUSED_UNCHANGED,
    MCP_CONNECTED,
    MCP_REAPED,
    STEER_REACHES_TURN,
    QUEUED_RUNS_NEXT,
    INJECTED_NEVER_LOST,
    *V2_PROPERTIES,
)
"""Every property of the ACP machine."""
