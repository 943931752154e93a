"""Tools for testing agents: scripted models and tools, a trio host for Hypothesis state
machines, the pure reference models, the conformance checks and the types of their targets.

The state machines and `check_*` functions import Hypothesis; they load on first use, so
`from trio_agents.testing import ScriptedModel` does not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._asyncio import AsyncioModel as AsyncioModel
from ._asyncio import AsyncioPeer as AsyncioPeer
from ._asyncio import AsyncioTool as AsyncioTool
from ._asyncio import PeerAgent as PeerAgent
from ._asyncio import open_asyncio_peer as open_asyncio_peer
from ._features import Features as Features
from ._history import history_problems as history_problems
from ._host import TrioHost as TrioHost
from ._host import WallClock as WallClock
from ._observer import AgentObserver as AgentObserver
from ._observer import ObservedAgent as ObservedAgent
from ._observer import ObservedFactory as ObservedFactory
from ._observer import observed as observed
from ._properties import ContractViolation as ContractViolation
from ._properties import Property as Property
from ._reference import AgentReference as AgentReference
from ._scripted import HOLD as HOLD
from ._scripted import EchoTool as EchoTool
from ._scripted import GateTool as GateTool
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import ScriptedStep as ScriptedStep
from ._scripted import echo_reply as echo_reply
from ._scripted import reply as reply
from ._scripted import tool_step as tool_step
from ._targets import AgentFactory as AgentFactory
from ._targets import AgentSurface as AgentSurface
from ._targets import McpOpener as McpOpener
from ._targets import RuntimeFactory as RuntimeFactory
from ._targets import RuntimeSurface as RuntimeSurface
from ._targets import ShellFactory as ShellFactory

if TYPE_CHECKING:
    from ._agent_machine import AgentMachine as AgentMachine
    from ._agent_machine import RandomSeeder as RandomSeeder
    from ._catalogue import PROPERTIES as PROPERTIES
    from ._checks import check_agent_conformance as check_agent_conformance
    from ._checks import check_durable_conformance as check_durable_conformance
    from ._checks import check_lifecycle_conformance as check_lifecycle_conformance
    from ._checks import check_mcp_conformance as check_mcp_conformance
    from ._checks import check_shell_conformance as check_shell_conformance
    from ._durable_machine import DurableMachine as DurableMachine
    from ._lifecycle_machine import LifecycleMachine as LifecycleMachine
    from ._machine import Draws as Draws
    from ._mcp_machine import McpMachine as McpMachine
    from ._shell_machine import ShellMachine as ShellMachine

__all__ = [
    "HOLD",
    "PROPERTIES",
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
    "EchoTool",
    "Features",
    "GateTool",
    "LifecycleMachine",
    "McpMachine",
    "McpOpener",
    "ObservedAgent",
    "ObservedFactory",
    "PeerAgent",
    "Property",
    "RandomSeeder",
    "RuntimeFactory",
    "RuntimeSurface",
    "ScriptedModel",
    "ScriptedStep",
    "ShellFactory",
    "ShellMachine",
    "TrioHost",
    "WallClock",
    "check_agent_conformance",
    "check_durable_conformance",
    "check_lifecycle_conformance",
    "check_mcp_conformance",
    "check_shell_conformance",
    "echo_reply",
    "history_problems",
    "observed",
    "open_asyncio_peer",
    "reply",
    "tool_step",
]

_LAZY = {
    "AgentMachine": "._agent_machine",
    "check_agent_conformance": "._checks",
    "RandomSeeder": "._agent_machine",
    "PROPERTIES": "._catalogue",
    "Draws": "._machine",
    "McpMachine": "._mcp_machine",
    "check_mcp_conformance": "._checks",
    "DurableMachine": "._durable_machine",
    "check_durable_conformance": "._checks",
    "LifecycleMachine": "._lifecycle_machine",
    "check_lifecycle_conformance": "._checks",
    "ShellMachine": "._shell_machine",
    "check_shell_conformance": "._checks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    _fixup_module_metadata(__name__, [value])
    return value


_fixup_module_metadata(
    __name__, [globals()[name] for name in __all__ if name not in _LAZY and name != "PROPERTIES"]
)
