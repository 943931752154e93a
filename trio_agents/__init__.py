"""trio-agents: an agent runtime on trio whose lifecycle is correct by construction."""

from .agent import Agent, CancelCause, Closer, MessageId, open_agent
from .errors import AgentClosedError, DuplicateSessionError, TrioAgentsError
from .events import (
    AgentClosed,
    AgentCreated,
    CancelRequested,
    Event,
    EventBus,
    Listener,
    SessionClosed,
    SessionCreated,
    StatusChanged,
    StepEnded,
    StepStarted,
    TextStreamed,
    TurnEnded,
    TurnStarted,
)
from .model import (
    Finish,
    Message,
    Model,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from .options import AgentOptions
from .records import Record
from .session import Session
from .status import AgentStatus
from .tool import Tool, ToolContext, ToolResult

__all__ = [
    "Agent",
    "AgentClosed",
    "AgentClosedError",
    "AgentCreated",
    "AgentOptions",
    "AgentStatus",
    "CancelCause",
    "CancelRequested",
    "Closer",
    "DuplicateSessionError",
    "Event",
    "EventBus",
    "Finish",
    "Listener",
    "Message",
    "MessageId",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "Record",
    "Session",
    "SessionClosed",
    "SessionCreated",
    "StatusChanged",
    "StepEnded",
    "StepStarted",
    "TextDelta",
    "TextStreamed",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolSpec",
    "TrioAgentsError",
    "TurnEnded",
    "TurnStarted",
    "Usage",
    "open_agent",
]
