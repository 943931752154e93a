"""The `agent-conformance` command (and `trio-agents conformance`, which calls it). Private:
nothing in the suite's library imports this package."""

from ._main import main as main

__all__ = ["main"]
