"""Public names that show the namespace users import them from. Pure; no trio import."""

from __future__ import annotations

import sys
from collections.abc import Iterable

__all__ = ["show_namespace"]


def show_namespace(namespace: str, objects: Iterable[object]) -> None:
    """Set `__module__` of the classes and functions `namespace` re-exports from its private
    modules to `namespace`, so reprs, tracebacks and printed reproductions name what users
    import. String annotations are evaluated first, where their names still resolve."""
    for obj in objects:
        module = getattr(obj, "__module__", None)
        if not (isinstance(obj, type) or callable(obj)) or not isinstance(module, str):
            continue
        if not module.startswith(namespace + "._"):
            continue
        if isinstance(obj, type):
            own: dict[str, object] = vars(obj).get("__annotations__") or {}  # in place
            scope = {**vars(sys.modules[module]), obj.__name__: obj}
            for name, annotation in list(own.items()):
                if isinstance(annotation, str):
                    try:
                        own[name] = eval(annotation, scope)  # what get_type_hints does
                    except Exception:  # a name imported only for type checking
                        continue
        try:
            obj.__module__ = namespace
        except (AttributeError, TypeError):  # a builtin or a slot-less callable
            continue
