"""The machines as plain functions, for any test runner: each runs one machine on its
target and returns the report the command prints, or raises the shrunk failure.

They live apart from the machines because they need the runner (`_conformance`), which
imports every machine: defined in the machines' own modules they made an import cycle.
"""

from __future__ import annotations

from hypothesis import settings as Settings

from ._agent_machine import agent_machine_for
from ._conformance import MachineReport, check_machine
from ._durable_machine import DurableMachine
from ._features import Features
from ._function_machine import FunctionMachine
from ._lifecycle_machine import LifecycleMachine
from ._machine import machine_for
from ._mcp_machine import McpMachine
from ._model_machine import ModelMachine
from ._shell_machine import ShellMachine
from ._targets import (
    AgentFactory,
    FunctionToolFactory,
    McpOpener,
    ModelFactory,
    RuntimeFactory,
    ShellFactory,
)

__all__ = [
    "check_agent_conformance",
    "check_durable_conformance",
    "check_function_conformance",
    "check_lifecycle_conformance",
    "check_mcp_conformance",
    "check_model_conformance",
    "check_shell_conformance",
]


def check_agent_conformance(
    factory: AgentFactory | None = None,
    *,
    settings: Settings | None = None,
    features: Features | None = None,
    seed: int | None = None,
) -> MachineReport:
    """Run the agent state machine against `factory` (default: the built-in agent), on the
    `features` it has (default: its `conformance_features` attribute, else all of them).

    Returns the report (seed, examples, the properties checked); raises the shrunk
    failing program's error, with a note of its seed, on the first violation. Any
    `settings` work: the machine's budget is made from them, without a deadline. Plain
    function, no pytest needed: call it from any test runner."""
    machine = agent_machine_for(factory, features)
    return check_machine("agent", machine, settings, seed, features)


def check_lifecycle_conformance(
    factory: RuntimeFactory | None = None,
    *,
    settings: Settings | None = None,
    seed: int | None = None,
) -> MachineReport:
    """Run the lifecycle machine against `factory` (default: `open_runtime`).

    Returns the report (seed, examples, the properties checked); raises the shrunk
    failing program's error, with a note of its seed, on the first violation. Any
    `settings` work: the machine's budget is made from them, without a deadline. Plain
    function, no pytest needed: call it from any test runner."""
    return check_machine("lifecycle", machine_for(LifecycleMachine, factory), settings, seed)


def check_durable_conformance(
    factory: RuntimeFactory | None = None,
    *,
    settings: Settings | None = None,
    seed: int | None = None,
) -> MachineReport:
    """Run the durable machine against `factory` (default: `open_runtime`), over the real
    SqliteStore in a temporary file, with crashes and resumes.

    Returns the report (seed, examples, the properties checked); raises the shrunk
    failing program's error, with a note of its seed, on the first violation. Any
    `settings` work: the machine's budget is made from them, without a deadline. Plain
    function, no pytest needed: call it from any test runner."""
    return check_machine("durable", machine_for(DurableMachine, factory), settings, seed)


def check_shell_conformance(
    factory: ShellFactory | None = None,
    *,
    settings: Settings | None = None,
    seed: int | None = None,
) -> MachineReport:
    """Run the shell machine against executors made by `factory` (default: ShellExecutor).
    The jobs are real processes, run in temporary directories.

    Returns the report (seed, examples, the properties checked); raises the shrunk
    failing program's error, with a note of its seed, on the first violation. Any
    `settings` work: the machine's budget is made from them, without a deadline. Plain
    function, no pytest needed: call it from any test runner."""
    return check_machine("shell", machine_for(ShellMachine, factory), settings, seed)


def check_mcp_conformance(
    opener: McpOpener | None = None,
    *,
    settings: Settings | None = None,
    seed: int | None = None,
) -> MachineReport:
    """Run the MCP machine against `opener` (default: `open_mcp_tools`). The servers are
    real processes, run in temporary directories.

    Returns the report (seed, examples, the properties checked); raises the shrunk
    failing program's error, with a note of its seed, on the first violation. Any
    `settings` work: the machine's budget is made from them, without a deadline. Plain
    function, no pytest needed: call it from any test runner."""
    return check_machine("mcp", machine_for(McpMachine, opener), settings, seed)


def check_function_conformance(
    make: FunctionToolFactory | None = None,
    *,
    settings: Settings | None = None,
    seed: int | None = None,
) -> MachineReport:
    """Run the function machine against `make` (default: `function_tool`), a maker of
    tools from typed functions with `function_tool`'s signature.

    Returns the report (seed, examples, the properties checked); raises the shrunk
    failing program's error, with a note of its seed, on the first violation. Any
    `settings` work: the machine's budget is made from them, without a deadline. Plain
    function, no pytest needed: call it from any test runner."""
    return check_machine("function", machine_for(FunctionMachine, make), settings, seed)


def check_model_conformance(
    make: ModelFactory | None = None,
    *,
    settings: Settings | None = None,
    seed: int | None = None,
) -> MachineReport:
    """Run the model machine against `make` (default: the built-in `OpenAICompatibleModel`),
    a maker of model adapters for an OpenAI-compatible endpoint: `make(base_url, *, api_key,
    max_retries)`.

    Returns the report (seed, examples, the properties checked); raises the shrunk
    failing program's error, with a note of its seed, on the first violation. Any
    `settings` work: the machine's budget is made from them, without a deadline. Plain
    function, no pytest needed: call it from any test runner."""
    return check_machine("model", machine_for(ModelMachine, make), settings, seed)
