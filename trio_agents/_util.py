"""Small helpers the modules share. Pure: no trio import."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import cast

__all__ = ["describe", "fixup_module_metadata"]


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
