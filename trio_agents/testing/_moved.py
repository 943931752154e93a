"""The suite's names where they were before it became `agent_conformance` (design D385):
they still resolve, for one release, with a DeprecationWarning that says where each went.
The suite is loaded by name, on first use, so the runtime's import graph never reaches it."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["REMOVED_IN", "moved"]

REMOVED_IN = "0.3.0"


def moved(old: str, name: str, new: str | None = None, *, stacklevel: int = 3) -> Any:
    """The suite's public `new` (default: `name`), warning that `old.name` moved there."""
    new = new or name
    warnings.warn(
        f"{old}.{name} moved to agent_conformance.{new}: write `from agent_conformance import "
        f"{new}` (the old name goes in trio-agents {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return getattr(importlib.import_module("agent_conformance"), new)
