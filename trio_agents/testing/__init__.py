"""Tools for testing code that uses trio-agents: a scripted model, tools that echo or wait at
a gate, and `TrioHost`, which drives one trio run step by step from synchronous code (as a
Hypothesis state machine's rules are).

The conformance suite is a package of its own, `agent_conformance`. Its names that this
namespace used to export still import from here for one release, with a DeprecationWarning
that names where each went.
"""

from __future__ import annotations

from typing import Any

from .._util import fixup_module_metadata as _fixup_module_metadata
from ._host import TrioHost as TrioHost
from ._host import WallClock as WallClock
from ._moved import moved as _moved
from ._scripted import HOLD as HOLD
from ._scripted import EchoTool as EchoTool
from ._scripted import GateTool as GateTool
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import ScriptedStep as ScriptedStep
from ._scripted import echo_reply as echo_reply
from ._scripted import reply as reply
from ._scripted import tool_step as tool_step

__all__ = [
    "HOLD",
    "EchoTool",
    "GateTool",
    "ScriptedModel",
    "ScriptedStep",
    "TrioHost",
    "WallClock",
    "echo_reply",
    "reply",
    "tool_step",
]

# The names that moved to `agent_conformance` (issue 33), each under the same name there.
_MOVED = frozenset(
    {
        "PROPERTIES", "AgentFactory", "AgentMachine", "AgentObserver", "AgentReference",
        "AgentSurface", "AsyncioModel", "AsyncioPeer", "AsyncioTool", "ContractViolation",
        "Draws", "DurableMachine", "Features", "LifecycleMachine", "McpMachine", "McpOpener",
        "ObservedAgent", "ObservedFactory", "PeerAgent", "Property", "RandomSeeder",
        "RuntimeFactory", "RuntimeSurface", "ShellFactory", "ShellMachine",
        "check_agent_conformance", "check_durable_conformance", "check_lifecycle_conformance",
        "check_mcp_conformance", "check_shell_conformance", "history_problems", "observed",
        "open_asyncio_peer",
    }
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _moved(__name__, name)


_fixup_module_metadata(__name__, [globals()[name] for name in __all__])
