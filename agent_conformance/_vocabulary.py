"""The contract's names, as the suite reads them: record types, the kinds of a turn's end,
and the name a model calls an MCP tool by. Pure; no trio import.

The suite keeps its own copy of these rather than importing the runtime's constants: a
runtime that renamed `turn/end`, or a tool, would otherwise move its oracle along with it
and still pass (docs/design.md, Layout: the suite imports only public namespaces).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "ASSISTANT_MESSAGE",
    "CONTEXT_MESSAGE",
    "MESSAGE_RECORD_TYPES",
    "PROMPT_DROPPED",
    "PROMPT_QUEUED",
    "PROMPT_RECORD_TYPES",
    "STEERING_MESSAGE",
    "STEP_END",
    "STEP_START",
    "TOOL_APPROVAL",
    "TOOL_CALL",
    "TOOL_RESULT",
    "TURN_END",
    "TURN_START",
    "USER_MESSAGE",
    "is_turn_end_reason",
    "mcp_tool_name",
]

# docs/contract.md, "Records".
TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
USER_MESSAGE: Final = "user/message"
STEERING_MESSAGE: Final = "steering/message"
CONTEXT_MESSAGE: Final = "context/message"
ASSISTANT_MESSAGE: Final = "assistant/message"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
TOOL_APPROVAL: Final = "tool/approval"

# The prompt queue's records stand outside turns (rule L8).
PROMPT_QUEUED: Final = "prompt/queued"
PROMPT_DROPPED: Final = "prompt/dropped"
PROMPT_RECORD_TYPES: Final = frozenset({PROMPT_QUEUED, PROMPT_DROPPED})
# The records that deliver an inbox message (data keys `id` and `content`).
MESSAGE_RECORD_TYPES: Final = frozenset({USER_MESSAGE, STEERING_MESSAGE, CONTEXT_MESSAGE})

# The kinds of `TurnEndReason` (docs/contract.md, "Records").
TURN_END_KINDS: Final = frozenset(
    {"completed", "max_steps", "closed", "interrupted", "aborted", "error"}
)

_TOOL_NAME_LIMIT: Final = 64  # the longest tool name model APIs accept
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


def is_turn_end_reason(value: Mapping[str, object]) -> bool:
    """Whether a `turn/end` record's `reason` has a kind the contract names."""
    return value.get("kind") in TURN_END_KINDS


def mcp_tool_name(server: str, tool: str) -> str:
    """The name a model calls a server's tool by: `mcp__<server>__<tool>`, with characters
    model APIs refuse replaced by `_`, cut to 64 characters (rule M1)."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:_TOOL_NAME_LIMIT]
