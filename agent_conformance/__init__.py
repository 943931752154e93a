"""agent-conformance: a property-based conformance suite for coding agents.

Hypothesis state machines race cancel, send and dispose against an agent and check every
numbered rule of the contract (docs/contract.md): against the trio-agents runtime, against
agents of other Python frameworks (through `observed` or the asyncio peer), and against any
ACP agent, in any language, over its stdio (`agent-conformance --acp -- CMD`).

The state machines and `check_*` functions import Hypothesis; they load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._asyncio import AsyncioModel as AsyncioModel
from ._asyncio import AsyncioPeer as AsyncioPeer
from ._asyncio import AsyncioTool as AsyncioTool
from ._asyncio import PeerAgent as PeerAgent
from ._asyncio import open_asyncio_peer as open_asyncio_peer
from ._features import Features as Features
from ._history import history_problems as history_problems
from ._names import show_namespace as _show_namespace
from ._observer import AgentObserver as AgentObserver
from ._observer import ObservedAgent as ObservedAgent
from ._observer import ObservedFactory as ObservedFactory
from ._observer import observed as observed
from ._properties import ContractViolation as ContractViolation
from ._properties import Property as Property
from ._reference import AgentReference as AgentReference
from ._targets import AgentFactory as AgentFactory
from ._targets import AgentSurface as AgentSurface
from ._targets import FunctionToolFactory as FunctionToolFactory
from ._targets import McpOpener as McpOpener
from ._targets import ModelFactory as ModelFactory
from ._targets import RuntimeFactory as RuntimeFactory
from ._targets import RuntimeSurface as RuntimeSurface
from ._targets import ShellFactory as ShellFactory

if TYPE_CHECKING:
    from ._acp._client import AcpTarget as AcpTarget
    from ._acp._machine import acp_machine as acp_machine
    from ._agent_machine import AgentMachine as AgentMachine
    from ._agent_machine import RandomSeeder as RandomSeeder
    from ._catalogue import PROPERTIES as PROPERTIES
    from ._checks import check_agent_conformance as check_agent_conformance
    from ._checks import check_durable_conformance as check_durable_conformance
    from ._checks import check_function_conformance as check_function_conformance
    from ._checks import check_lifecycle_conformance as check_lifecycle_conformance
    from ._checks import check_mcp_conformance as check_mcp_conformance
    from ._checks import check_model_conformance as check_model_conformance
    from ._checks import check_shell_conformance as check_shell_conformance
    from ._cli import main as main
    from ._conformance import MachineReport as MachineReport
    from ._durable_machine import DurableMachine as DurableMachine
    from ._function_machine import FunctionMachine as FunctionMachine
    from ._lifecycle_machine import LifecycleMachine as LifecycleMachine
    from ._machine import Draws as Draws
    from ._mcp_machine import McpMachine as McpMachine
    from ._model_machine import ModelMachine as ModelMachine
    from ._shell_machine import ShellMachine as ShellMachine

__all__ = [
    "PROPERTIES",
    "AcpTarget",
    "AgentFactory",
    "AgentMachine",
    "AgentObserver",
    "AgentReference",
    "AgentSurface",
    "AsyncioModel",
    "AsyncioPeer",
    "AsyncioTool",
    "ContractViolation",
    "Draws",
    "DurableMachine",
    "Features",
    "FunctionMachine",
    "FunctionToolFactory",
    "LifecycleMachine",
    "MachineReport",
    "McpMachine",
    "McpOpener",
    "ModelFactory",
    "ModelMachine",
    "ObservedAgent",
    "ObservedFactory",
    "PeerAgent",
    "Property",
    "RandomSeeder",
    "RuntimeFactory",
    "RuntimeSurface",
    "ShellFactory",
    "ShellMachine",
    "acp_machine",
    "check_agent_conformance",
    "check_durable_conformance",
    "check_function_conformance",
    "check_lifecycle_conformance",
    "check_mcp_conformance",
    "check_model_conformance",
    "check_shell_conformance",
    "history_problems",
    "main",
    "observed",
    "open_asyncio_peer",
]

_LAZY = {
    "AcpTarget": "._acp._client",
    "acp_machine": "._acp._machine",
    "AgentMachine": "._agent_machine",
    "RandomSeeder": "._agent_machine",
    "PROPERTIES": "._catalogue",
    "check_agent_conformance": "._checks",
    "check_durable_conformance": "._checks",
    "check_function_conformance": "._checks",
    "check_lifecycle_conformance": "._checks",
    "check_mcp_conformance": "._checks",
    "check_model_conformance": "._checks",
    "check_shell_conformance": "._checks",
    "main": "._cli",
    "MachineReport": "._conformance",
    "DurableMachine": "._durable_machine",
    "FunctionMachine": "._function_machine",
    "LifecycleMachine": "._lifecycle_machine",
    "Draws": "._machine",
    "McpMachine": "._mcp_machine",
    "ModelMachine": "._model_machine",
    "ShellMachine": "._shell_machine",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    _show_namespace(__name__, [value])
    return value


_show_namespace(
    __name__, [globals()[name] for name in __all__ if name not in _LAZY and name != "PROPERTIES"]
)
