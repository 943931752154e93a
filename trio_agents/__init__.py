"""trio-agents: an agent runtime on trio whose lifecycle is correct by construction."""

from ._agent import Agent, CancelCause, Closer, MessageId, open_agent
from ._configured import AgentConfig, ConfiguredAgents
from ._errors import (
    AgentClosedError,
    CorruptSessionError,
    DuplicateSessionError,
    PersistenceError,
    TrioAgentsError,
)
from ._events import (
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
from ._fiber import Fiber, FiberClosedError, Plugin
from ._model import (
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
from ._model_openai import ModelEndpointError, OpenAICompatibleModel
from ._options import AgentOptions
from ._records import Record
from ._registry import AgentHandle, AgentRegistry
from ._runtime import Runtime, open_runtime
from ._session import Session
from ._shell import JobOutput, RunResult, ShellExecutor, ShellRequest, ShellSpec
from ._shell_tools import BashTools
from ._status import AgentStatus
from ._store import MemoryStore, SessionInfo, SessionNotFoundError, SessionStore
from ._store_sqlite import SqliteStore
from ._tool import Tool, ToolContext, ToolResult

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
