"""The `agent-conformance` command (and `trio-agents conformance`, which calls it). Private:
no module of the suite imports it; the namespace loads it only for `agent_conformance.main`,
on first use."""

from ._main import main as main

__all__ = ["main"]
