"""Tools for testing agents: scripted models and tools, a trio host for Hypothesis state
machines, and the conformance checks.

The checks that need Hypothesis import it lazily, so `trio_agents.testing.ScriptedModel`
works without it.
"""

from .scripted import (
    HOLD,
    EchoTool,
    GateTool,
    ScriptedModel,
    ScriptedStep,
    echo_reply,
    reply,
    tool_step,
)

__all__ = [
    "HOLD",
    "EchoTool",
    "GateTool",
    "ScriptedModel",
    "ScriptedStep",
    "echo_reply",
    "reply",
    "tool_step",
]
