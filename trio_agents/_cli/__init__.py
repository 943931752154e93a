"""The `trio-agents` command. Private: nothing in the library imports this package."""

from ._main import main as main

__all__ = ["main"]
