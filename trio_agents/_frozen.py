"""Deep read-only copies of JSON values, and deep mutable copies back. Pure; no trio import.

What a record, a tool call or a model's request holds is frozen once (`freeze`), so nobody
who handed it in can change it afterwards; whoever needs a dict to give away thaws it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

__all__ = ["freeze", "thaw"]

# Most values in records are these: an exact type check answers for them before the slower
# `isinstance` against the Mapping ABC.
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """A deep read-only copy: mappings become MappingProxyType, sequences tuples. Raises
    TypeError for a value JSON has no form for (a datetime, bytes, an object): a record
    must be storable, and one that is not would fail the store's commit for every session
    whose records share it (D383)."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, str | int | float):  # subclasses: an IntEnum, a str Enum
        return value
    raise TypeError(
        f"{type(value).__name__} {value!r} cannot be stored: a record holds JSON values only "
        "(str, int, float, bool, None, lists and mappings); convert it first"
    )


def thaw(value: Any) -> Any:
    """A deep mutable copy of `value` (dicts and lists), e.g. to hand to a tool."""
    return _plain(value)


def _plain(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value
