"""Checks of the scripts the suite prints for a user to run."""

from __future__ import annotations

import ast

__all__ = ["private_imports"]


def private_imports(script: str, own: tuple[str, ...] = ("tests",)) -> list[str]:
    """The modules `script` imports that are private (a `_name` part) outside `own`, the
    test's own packages (a reproduction imports the target under test from there)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [
            module
            for module in modules
            if module.split(".")[0] not in own
            and any(part.startswith("_") for part in module.split("."))
        ]
    return found
