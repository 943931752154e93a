"""Small helpers the modules share. Pure: no trio import."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Any, cast

__all__ = ["check_bool", "check_number", "check_strings", "describe", "fixup_module_metadata"]


def check_number(where: str, value: Any, *, integer: bool = False) -> Any:
    """`value`, if it is a positive finite number (an int when `integer`); else TypeError
    or ValueError naming `where` (`ShellExecutor timeout`). bool is not a number here."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an integer" if integer else "a number"
        raise TypeError(f"{where} must be {kind}, got {value!r}")
    if not (0 < value < math.inf):
        raise ValueError(f"{where} must be positive and finite, got {value!r}")
    return value


def check_bool(where: str, value: Any) -> bool:
    """`value`, if it is True or False; else TypeError naming `where`. A truthy string
    ("no") read as a flag would mean its opposite."""
    if not isinstance(value, bool):
        raise TypeError(f"{where} must be True or False, got {value!r}")
    return value


def check_strings(where: str, value: Any) -> tuple[str, ...]:
    """`value` (any iterable of str) as a tuple; TypeError naming `where` for a lone str,
    which would be read as its characters (`"/tmp"` as `/`, `t`, `m`, `p`), or any item
    that is not a str."""
    if isinstance(value, str | bytes):
        raise TypeError(f"{where} must be a sequence of strings, not one string: ({value!r},)")
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"{where} must be a sequence of strings, got {value!r}") from None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{where} must hold strings, got {item!r} in {value!r}")
    return items


def describe(exc: BaseException) -> str:
    """`Type: message` (or just `Type`), every leaf of an exception group joined by `; `:
    one line a person can read, for a turn's `error` reason or a protocol error."""
    if isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        return "; ".join(describe(leaf) for leaf in group.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fixup_module_metadata(namespace: str, objects: Iterable[object]) -> None:
    """Make the classes and functions a public namespace re-exports show that namespace in
    `__module__` (so reprs, tracebacks and docs say `trio_agents.Agent`, the name users
    import, not the private module it lives in). Objects from elsewhere are left alone."""
    for obj in objects:
        module = getattr(obj, "__module__", None)
        if not (isinstance(obj, type) or callable(obj)) or not isinstance(module, str):
            continue
        if module.startswith(namespace + "._") or module == namespace:
            if isinstance(obj, type):
                _resolve_annotations(obj)
            try:
                obj.__module__ = namespace
            except (AttributeError, TypeError):  # a builtin or a slot-less callable
                continue


def _resolve_annotations(cls: type) -> None:
    """Evaluate the class's string annotations (`from __future__ import annotations`) in
    the module that defines it, while `__module__` still names that module: afterwards
    `typing.get_type_hints` looks names up in the namespace, where they are not. A class
    whose annotations cannot be evaluated yet (a name imported only for type checking)
    keeps that string (the namespace may have the name: public types are there)."""
    own = vars(cls).get("__annotations__")  # the dict itself: it is rewritten in place
    if not own:
        return
    module = sys.modules.get(cls.__module__)
    scope = {**vars(module), cls.__name__: cls} if module is not None else {}
    for name, annotation in list(own.items()):
        if isinstance(annotation, str):
            try:
                own[name] = eval(annotation, scope)  # what typing.get_type_hints does
            except Exception:  # a name imported only for type checking: leave its string
                continue
