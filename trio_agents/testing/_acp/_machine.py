"""`acp_machine` of ACP reproductions printed before the suite moved: `agent_conformance`'s
now, with a DeprecationWarning (design D385)."""

from __future__ import annotations

from typing import Any

from .._moved import moved

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    if name != "acp_machine":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return moved(__name__, name)
