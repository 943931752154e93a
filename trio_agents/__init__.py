"""trio-agents: an agent runtime on trio whose lifecycle is correct by construction.

`McpTools` and `open_mcp_tools` load on first use: the `mcp` SDK takes seconds to import,
and a program that connects no MCP server should not pay for it.
"""

import importlib
from typing import TYPE_CHECKING

from ._agent._agent import Agent as Agent
from ._agent._approval import Approval as Approval
from ._agent._approval import ApprovalPolicy as ApprovalPolicy
from ._agent._approval import ApprovalRequest as ApprovalRequest
from ._agent._approval import Approver as Approver
from ._agent._approval import Decision as Decision
from ._agent._approval import DecisionOutcome as DecisionOutcome
from ._agent._approval import Policy as Policy
from ._agent._approval import Verdict as Verdict
from ._agent._events import AgentClosed as AgentClosed
from ._agent._events import AgentCreated as AgentCreated
from ._agent._events import CancelRequested as CancelRequested
from ._agent._events import Event as Event
from ._agent._events import EventBus as EventBus
from ._agent._events import Listener as Listener
from ._agent._events import SessionClosed as SessionClosed
from ._agent._events import SessionCreated as SessionCreated
from ._agent._events import StatusChanged as StatusChanged
from ._agent._events import StepEnded as StepEnded
from ._agent._events import StepStarted as StepStarted
from ._agent._events import TextStreamed as TextStreamed
from ._agent._events import ToolStarted as ToolStarted
from ._agent._events import TurnEnded as TurnEnded
from ._agent._events import TurnStarted as TurnStarted
from ._agent._options import AgentOptions as AgentOptions
from ._agent._standalone import open_agent as open_agent
from ._agent._status import AgentStatus as AgentStatus
from ._agent._system_prompt import SystemPrompt as SystemPrompt
from ._agent._system_prompt import coding_system_prompt as coding_system_prompt
from ._agent._turn import CancelCause as CancelCause
from ._agent._turn import Closer as Closer
from ._agent._turn import MessageId as MessageId
from ._agent._turn_events import TurnDropped as TurnDropped
from ._agent._turn_events import TurnEnd as TurnEnd
from ._agent._turn_events import TurnEvent as TurnEvent
from ._agent._turn_events import TurnStepEnd as TurnStepEnd
from ._agent._turn_events import TurnText as TurnText
from ._agent._turn_events import TurnToolCall as TurnToolCall
from ._agent._turn_events import TurnToolResult as TurnToolResult
from ._agent._turn_result import ToolCallResult as ToolCallResult
from ._agent._turn_result import TurnResult as TurnResult
from ._agent._turn_result import turn_result as turn_result
from ._agent._turn_stream import TurnStream as TurnStream
from ._configured import AgentConfig as AgentConfig
from ._configured import ConfiguredAgents as ConfiguredAgents
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
from ._errors import SessionClaimLostError as SessionClaimLostError
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
from ._fiber import Fiber as Fiber
from ._fiber import Plugin as Plugin
from ._mcp._config import McpServer as McpServer
from ._mcp._config import mcp_servers_from_config as mcp_servers_from_config
from ._mcp._servers import McpServers as McpServers
from ._model._offline import OfflineModel as OfflineModel
from ._model._openai import OpenAICompatibleModel as OpenAICompatibleModel
from ._model._seam import Finish as Finish
from ._model._seam import Message as Message
from ._model._seam import Model as Model
from ._model._seam import ModelChunk as ModelChunk
from ._model._seam import ModelRequest as ModelRequest
from ._model._seam import TextDelta as TextDelta
from ._model._seam import ToolCall as ToolCall
from ._model._seam import ToolSpec as ToolSpec
from ._model._seam import Usage as Usage
from ._registry import AgentHandle as AgentHandle
from ._registry import AgentRegistry as AgentRegistry
from ._runtime import Runtime as Runtime
from ._runtime import open_runtime as open_runtime
from ._shell._bash_tools import BashTools as BashTools
from ._shell._dumpable import make_non_dumpable as make_non_dumpable
from ._shell._executor import JobOutput as JobOutput
from ._shell._executor import RunResult as RunResult
from ._shell._executor import ShellExecutor as ShellExecutor
from ._shell._executor import ShellRequest as ShellRequest
from ._shell._executor import ShellSpec as ShellSpec
from ._shell._sandbox_policy import SandboxPolicy as SandboxPolicy
from ._store._base import MemoryStore as MemoryStore
from ._store._base import SessionInfo as SessionInfo
from ._store._base import SessionStore as SessionStore
from ._store._base import StoredSession as StoredSession
from ._store._postgres import PostgresStore as PostgresStore
from ._store._records import Record as Record
from ._store._records import TurnEndReason as TurnEndReason
from ._store._session import Committer as Committer
from ._store._session import Session as Session
from ._store._sqlite import SqliteStore as SqliteStore
from ._store._sqlite import default_store_path as default_store_path
from ._tool._file_access import FileAccess as FileAccess
from ._tool._file_tools import FileTools as FileTools
from ._tool._function import FunctionTool as FunctionTool
from ._tool._function import function_tool as function_tool
from ._tool._seam import Tool as Tool
from ._tool._seam import ToolContext as ToolContext
from ._tool._seam import ToolResult as ToolResult
from ._tracing import AgentTracer as AgentTracer
from ._util import fixup_module_metadata as _fixup_module_metadata
from ._version import VERSION as _VERSION

if TYPE_CHECKING:
    from ._mcp._tools import McpTools as McpTools
    from ._mcp._tools import open_mcp_tools as open_mcp_tools

# What `agent-conformance --version` reports; not in __all__ (a dunder, not an API name).
__version__ = _VERSION

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
    "FileAccess",
    "FileTools",
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
    "SessionClaimLostError",
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

_LAZY = {"McpTools": "._mcp._tools", "open_mcp_tools": "._mcp._tools"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    _fixup_module_metadata(__name__, [value])
    return value


_fixup_module_metadata(__name__, [globals()[name] for name in __all__ if name not in _LAZY])
