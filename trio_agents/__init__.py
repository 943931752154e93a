"""trio-agents: an agent runtime on trio whose lifecycle is correct by construction."""

from .agent import Agent, CancelCause, Closer, MessageId, open_agent
from .bash_tools import BashTools
from .configured import AgentConfig, ConfiguredAgents
from .errors import (
    AgentClosedError,
    CorruptSessionError,
    DuplicateSessionError,
    PersistenceError,
    TrioAgentsError,
)
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
from .fiber import Fiber, FiberClosedError, Plugin
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
from .openai_model import ModelEndpointError, OpenAICompatibleModel
from .options import AgentOptions
from .records import Record
from .registry import AgentHandle, AgentRegistry
from .runtime import Runtime, open_runtime
from .session import Session
from .shell import JobOutput, RunResult, ShellExecutor, ShellRequest, ShellSpec
from .sqlite_store import SqliteStore
from .status import AgentStatus
from .store import MemoryStore, SessionInfo, SessionNotFoundError, SessionStore
from .tool import Tool, ToolContext, ToolResult

__all__ = [
    "Agent",
    "AgentClosed",
    "AgentClosedError",
    "AgentConfig",
    "AgentCreated",
    "AgentHandle",
    "AgentOptions",
    "AgentRegistry",
    "AgentStatus",
    "BashTools",
    "CancelCause",
    "CancelRequested",
    "Closer",
    "ConfiguredAgents",
    "CorruptSessionError",
    "DuplicateSessionError",
    "Event",
    "EventBus",
    "Fiber",
    "FiberClosedError",
    "Finish",
    "JobOutput",
    "Listener",
    "MemoryStore",
    "Message",
    "MessageId",
    "Model",
    "ModelChunk",
    "ModelEndpointError",
    "ModelRequest",
    "OpenAICompatibleModel",
    "PersistenceError",
    "Plugin",
    "Record",
    "RunResult",
    "Runtime",
    "Session",
    "SessionClosed",
    "SessionCreated",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "ShellExecutor",
    "ShellRequest",
    "ShellSpec",
    "SqliteStore",
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
    "open_runtime",
]
