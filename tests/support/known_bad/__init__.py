"""Known-bad implementations: each is the real one with one seeded defect. The conformance
suite must fail on every one of them, with a violation of the property docs/conformance.md
names for it (tests/test_known_bad.py). Targets are named `tests.support.known_bad:NAME`:
any name of the machine modules below."""

from __future__ import annotations

from types import ModuleType

from . import _agent, _approval, _durable, _function, _lifecycle, _mcp, _model, _shell, _streams
from ._seeded import Seeded

__all__ = ["SEEDED", "Seeded"]

_MODULES: tuple[ModuleType, ...] = (
    _agent,
    _streams,
    _approval,
    _lifecycle,
    _durable,
    _shell,
    _mcp,
    _function,
    _model,
)

SEEDED: tuple[Seeded, ...] = tuple(s for module in _MODULES for s in module.SEEDED)
"""Every seeded defect, with the machine and the property that must catch it."""


def __getattr__(name: str) -> object:
    for module in _MODULES:
        if not name.startswith("_") and hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
