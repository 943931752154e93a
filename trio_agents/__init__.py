"""trio-agents: an agent runtime on trio whose lifecycle is correct by construction.

`McpTools` and `open_mcp_tools` load on first use: the `mcp` SDK takes seconds to import,
and a program that connects no MCP server should not pay for it.
"""

import importlib
from typing import TYPE_CHECKING

from ._agent import Agent as Agent
from ._approval import Approval as Approval
from ._approval import ApprovalPolicy as ApprovalPolicy
from ._approval import ApprovalRequest as ApprovalRequest
from ._approval import Approver as Approver
from ._approval import Decision as Decision
from ._approval import DecisionOutcome as DecisionOutcome
from ._approval import Policy as Policy
from ._approval import Verdict as Verdict
from ._configured import AgentConfig as AgentConfig
from ._configured import ConfiguredAgents as ConfiguredAgents
from ._dumpable import make_non_dumpable as make_non_dumpable
from ._errors import AgentClosedError as AgentClosedError
from ._errors import AlreadyLoadedError as AlreadyLoadedError
from ._errors import AlreadyRunningError as AlreadyRunningError
from ._errors import ChatStreamError as ChatStreamError
from ._errors import CorruptSessionError as CorruptSessionError
from ._errors import DuplicateSessionError as DuplicateSessionError
from ._errors import FiberClosedError as FiberClosedError
from ._errors import FlushTimeoutError as FlushTimeoutError
from ._errors import JobNotFoundError as JobNotFoundError
from ._errors import LabelNotFoundError as LabelNotFoundError
from ._errors import McpConfigError as McpConfigError
from ._errors import McpServerError as McpServerError
from ._errors import ModelEndpointError as ModelEndpointError
from ._errors import NotAStoreError as NotAStoreError
from ._errors import ObserverMisuse as ObserverMisuse
from ._errors import PersistenceError as PersistenceError
from ._errors import ReadOnlyStoreError as ReadOnlyStoreError
from ._errors import SandboxUnavailableError as SandboxUnavailableError
from ._errors import SessionExistsError as SessionExistsError
from ._errors import SessionLiveElsewhereError as SessionLiveElsewhereError
from ._errors import SessionLiveError as SessionLiveError
from ._errors import SessionNotFoundError as SessionNotFoundError
from ._errors import ShellClosedError as ShellClosedError
from ._errors import SpillDirectoryError as SpillDirectoryError
from ._errors import StoreBrokenError as StoreBrokenError
from ._errors import StoreClosedError as StoreClosedError
from ._errors import StoreConnectionError as StoreConnectionError
from ._errors import StoreFileError as StoreFileError
from ._errors import StoreLockedError as StoreLockedError
from ._errors import StoreNotFoundError as StoreNotFoundError
from ._errors import TracingUnavailableError as TracingUnavailableError
from ._errors import TrioAgentsError as TrioAgentsError
from ._errors import TurnNotFoundError as TurnNotFoundError
from ._errors import UnknownStoreVersionError as UnknownStoreVersionError
from ._events import AgentClosed as AgentClosed
from ._events import AgentCreated as AgentCreated
from ._events import CancelRequested as CancelRequested
from ._events import Event as Event
from ._events import EventBus as EventBus
from ._events import Listener as Listener
from ._events import SessionClosed as SessionClosed
from ._events import SessionCreated as SessionCreated
from ._events import StatusChanged as StatusChanged
from ._events import StepEnded as StepEnded
from ._events import StepStarted as StepStarted
from ._events import TextStreamed as TextStreamed
from ._events import ToolStarted as ToolStarted
from ._events import TurnEnded as TurnEnded
from ._events import TurnStarted as TurnStarted
from ._fiber import Fiber as Fiber
from ._fiber import Plugin as Plugin
from ._function_tool import FunctionTool as FunctionTool
from ._function_tool import function_tool as function_tool
from ._mcp_config import McpServer as McpServer
from ._mcp_config import mcp_servers_from_config as mcp_servers_from_config
from ._mcp_servers import McpServers as McpServers
from ._model import Finish as Finish
from ._model import Message as Message
from ._model import Model as Model
from ._model import ModelChunk as ModelChunk
from ._model import ModelRequest as ModelRequest
from ._model import TextDelta as TextDelta
from ._model import ToolCall as ToolCall
from ._model import ToolSpec as ToolSpec
from ._model import Usage as Usage
from ._model_offline import OfflineModel as OfflineModel
from ._model_openai import OpenAICompatibleModel as OpenAICompatibleModel
from ._options import AgentOptions as AgentOptions
from ._records import Record as Record
from ._records import TurnEndReason as TurnEndReason
from ._registry import AgentHandle as AgentHandle
from ._registry import AgentRegistry as AgentRegistry
from ._runtime import Runtime as Runtime
from ._runtime import open_runtime as open_runtime
from ._sandbox_policy import SandboxPolicy as SandboxPolicy
from ._session import Committer as Committer
from ._session import Session as Session
from ._shell import JobOutput as JobOutput
from ._shell import RunResult as RunResult
from ._shell import ShellExecutor as ShellExecutor
from ._shell import ShellRequest as ShellRequest
from ._shell import ShellSpec as ShellSpec
from ._shell_tools import BashTools as BashTools
from ._standalone import open_agent as open_agent
from ._status import AgentStatus as AgentStatus
from ._store import MemoryStore as MemoryStore
from ._store import SessionInfo as SessionInfo
from ._store import SessionStore as SessionStore
from ._store import StoredSession as StoredSession
from ._store_postgres import PostgresStore as PostgresStore
from ._store_sqlite import SqliteStore as SqliteStore
from ._store_sqlite import default_store_path as default_store_path
from ._system_prompt import SystemPrompt as SystemPrompt
from ._system_prompt import coding_system_prompt as coding_system_prompt
from ._tool import Tool as Tool
from ._tool import ToolContext as ToolContext
from ._tool import ToolResult as ToolResult
from ._tracing import AgentTracer as AgentTracer
from ._turn import CancelCause as CancelCause
from ._turn import Closer as Closer
from ._turn import MessageId as MessageId
from ._turn_events import TurnDropped as TurnDropped
from ._turn_events import TurnEnd as TurnEnd
from ._turn_events import TurnEvent as TurnEvent
from ._turn_events import TurnStepEnd as TurnStepEnd
from ._turn_events import TurnText as TurnText
from ._turn_events import TurnToolCall as TurnToolCall
from ._turn_events import TurnToolResult as TurnToolResult
from ._turn_result import ToolCallResult as ToolCallResult
from ._turn_result import TurnResult as TurnResult
from ._turn_result import turn_result as turn_result
from ._turn_stream import TurnStream as TurnStream
from ._util import fixup_module_metadata as _fixup_module_metadata

if TYPE_CHECKING:
    from ._mcp import McpTools as McpTools
    from ._mcp import open_mcp_tools as open_mcp_tools

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
    "AgentTracer",
    "AlreadyLoadedError",
    "AlreadyRunningError",
    "Approval",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "BashTools",
    "CancelCause",
    "CancelRequested",
    "ChatStreamError",
    "Closer",
    "Committer",
    "ConfiguredAgents",
    "CorruptSessionError",
    "Decision",
    "DecisionOutcome",
    "DuplicateSessionError",
    "Event",
    "EventBus",
    "Fiber",
    "FiberClosedError",
    "Finish",
    "FlushTimeoutError",
    "FunctionTool",
    "JobNotFoundError",
    "JobOutput",
    "LabelNotFoundError",
    "Listener",
    "McpConfigError",
    "McpServer",
    "McpServerError",
    "McpServers",
    "McpTools",
    "MemoryStore",
    "Message",
    "MessageId",
    "Model",
    "ModelChunk",
    "ModelEndpointError",
    "ModelRequest",
    "NotAStoreError",
    "ObserverMisuse",
    "OfflineModel",
    "OpenAICompatibleModel",
    "PersistenceError",
    "Plugin",
    "Policy",
    "PostgresStore",
    "ReadOnlyStoreError",
    "Record",
    "RunResult",
    "Runtime",
    "SandboxPolicy",
    "SandboxUnavailableError",
    "Session",
    "SessionClosed",
    "SessionCreated",
    "SessionExistsError",
    "SessionInfo",
    "SessionLiveElsewhereError",
    "SessionLiveError",
    "SessionNotFoundError",
    "SessionStore",
    "ShellClosedError",
    "ShellExecutor",
    "ShellRequest",
    "ShellSpec",
    "SpillDirectoryError",
    "SqliteStore",
    "StatusChanged",
    "StepEnded",
    "StepStarted",
    "StoreBrokenError",
    "StoreClosedError",
    "StoreConnectionError",
    "StoreFileError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoredSession",
    "SystemPrompt",
    "TextDelta",
    "TextStreamed",
    "Tool",
    "ToolCall",
    "ToolCallResult",
    "ToolContext",
    "ToolResult",
    "ToolSpec",
    "ToolStarted",
    "TracingUnavailableError",
    "TrioAgentsError",
    "TurnDropped",
    "TurnEnd",
    "TurnEndReason",
    "TurnEnded",
    "TurnEvent",
    "TurnNotFoundError",
    "TurnResult",
    "TurnStarted",
    "TurnStepEnd",
    "TurnStream",
    "TurnText",
    "TurnToolCall",
    "TurnToolResult",
    "UnknownStoreVersionError",
    "Usage",
    "Verdict",
    "coding_system_prompt",
    "default_store_path",
    "function_tool",
    "make_non_dumpable",
    "mcp_servers_from_config",
    "open_agent",
    "open_mcp_tools",
    "open_runtime",
    "turn_result",
]

_LAZY = {"McpTools": "._mcp", "open_mcp_tools": "._mcp"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    _fixup_module_metadata(__name__, [value])
    return value


_fixup_module_metadata(__name__, [globals()[name] for name in __all__ if name not in _LAZY])
