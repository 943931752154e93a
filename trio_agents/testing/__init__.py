"""Tools for testing agents: scripted models and tools, a trio host for Hypothesis state
machines, the pure reference models, the conformance checks and the types of their targets.

The state machines and `check_*` functions import Hypothesis; they load on first use, so
`from trio_agents.testing import ScriptedModel` does not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._history import history_problems
from ._host import TrioHost, WallClock
from ._reference import AgentReference
from ._scripted import (
    HOLD,
    EchoTool,
    GateTool,
    ScriptedModel,
    ScriptedStep,
    echo_reply,
    reply,
    tool_step,
)
from ._targets import AgentFactory, AgentSurface, RuntimeFactory, RuntimeSurface, ShellFactory

if TYPE_CHECKING:
    from ._agent_machine import AgentMachine, RandomSeeder, check_agent_conformance
    from ._lifecycle_machine import LifecycleMachine, check_lifecycle_conformance
    from ._shell_machine import ShellMachine, check_shell_conformance

__all__ = [
    "HOLD",
    "AgentFactory",
    "AgentMachine",
    "AgentReference",
    "AgentSurface",
    "EchoTool",
    "GateTool",
    "LifecycleMachine",
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
    "check_lifecycle_conformance",
    "check_shell_conformance",
    "echo_reply",
    "history_problems",
    "reply",
    "tool_step",
]

_LAZY = {
    "AgentMachine": "._agent_machine",
    "check_agent_conformance": "._agent_machine",
    "RandomSeeder": "._agent_machine",
    "LifecycleMachine": "._lifecycle_machine",
    "check_lifecycle_conformance": "._lifecycle_machine",
    "ShellMachine": "._shell_machine",
    "check_shell_conformance": "._shell_machine",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
