"""The runtime's private methods that test doubles override are named seams (issue 33).

A class under tests/support that overrides a private method of a runtime class (a class of
`trio_agents`) relies on that method's shape; each such method is pinned in `SEAMS` and says
in its docstring, with "Seam:", what a double may change there. Overriding a public method
needs no entry: it is the public seam. A new override fails here until it is listed and
documented, or reworked to change a part (a session, a model, a bus) instead.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import tests.support

SEAMS = frozenset(
    {
        "trio_agents.Agent._accept",
        "trio_agents.Agent._begin_close",
        "trio_agents.Agent._gate",
        "trio_agents.Agent._run_steps",
        "trio_agents.Agent._run_turn",
        "trio_agents.Agent._settle",
        "trio_agents.Agent._wake_driver",
        "trio_agents.Fiber._unwind",
        "trio_agents._registry.Lifecycle._detach",
        "trio_agents._registry.Lifecycle._request_close",
        "trio_agents._registry.Lifecycle._teardown",
        "trio_agents._registry.Lifecycle._unregister",
        "trio_agents._shell._output.OutputCollector._open_spill",
        "trio_agents._shell._output.OutputCollector._trim",
        "trio_agents.ShellExecutor._collector",
        "trio_agents.ShellExecutor._environment",
        "trio_agents.ShellExecutor._spill_for",
        "trio_agents.SqliteStore._append_sync",
        "trio_agents.SqliteStore._appended",
        "trio_agents.SqliteStore._committed_all",
        "trio_agents.SqliteStore._drain",
        "trio_agents.SqliteStore._write_batch",
        # replaced by assignment in the server's process (tests/support/acp_defects.py)
        "trio_agents.acp.AcpServer._accept",
        "trio_agents.acp.AcpServer._admit",
        "trio_agents.acp.AcpServer._cancel",
        "trio_agents.acp.AcpServer._close_open",
        "trio_agents.acp.AcpServer._dispatch",
        "trio_agents.acp.AcpServer._inject",
        "trio_agents.acp.AcpServer._load_session",
        "trio_agents.acp.AcpServer._new_session",
        "trio_agents.acp.AcpServer._on_event",
        "trio_agents.acp.AcpServer._on_record",
        "trio_agents.acp.AcpServer._request",
        "trio_agents.acp.AcpServer._send_result",
        "trio_agents.acp.AcpServer._settle",
        "trio_agents.acp.AcpServer._tell",
    }
)
"""Every private method of the runtime a test double overrides, as module.Class.method, the
module being the public one that exports the class when there is one."""


def _support_modules() -> list[ModuleType]:
    modules: list[ModuleType] = []
    for info in pkgutil.walk_packages(tests.support.__path__, "tests.support."):
        try:
            modules.append(importlib.import_module(info.name))
        except Exception:
            # A module that fails on import on purpose (a bad declaration) must define no
            # class: then it overrides nothing.
            path = Path(tests.support.__path__[0], *info.name.split(".")[2:]).with_suffix(".py")
            tree = ast.parse(path.read_text())
            classes = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
            assert not classes, f"{info.name} fails to import and defines {classes}"
    return modules


def _is_method(value: object) -> bool:
    return callable(value) or isinstance(value, staticmethod | classmethod | property)


def _where(cls: type) -> str:
    """`cls`'s name as the public namespace spells it, else its module's."""
    import trio_agents

    if getattr(trio_agents, cls.__name__, None) is cls:
        return f"trio_agents.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _overridden() -> dict[str, set[str]]:
    """The private runtime methods classes under tests/support override, each with the
    doubles that do."""
    found: dict[str, set[str]] = {}
    for module in _support_modules():
        for double in vars(module).values():
            if not inspect.isclass(double) or double.__module__ != module.__name__:
                continue
            for name, value in vars(double).items():
                if not name.startswith("_") or name.startswith("__") or not _is_method(value):
                    continue
                for base in double.__mro__[1:]:
                    if name in vars(base):
                        if base.__module__.split(".")[0] == "trio_agents":
                            seam = f"{_where(base)}.{name}"
                            found.setdefault(seam, set()).add(double.__qualname__)
                        break
        for seam, where in _patched(module):
            found.setdefault(seam, set()).add(where)
    return found


def _patched(module: ModuleType) -> list[tuple[str, str]]:
    """(seam, where) for each private method of a runtime class that `module` replaces by
    assignment (`AcpServer._settle = late`, as tests/support/acp_defects.py does in the
    server's process)."""
    found: list[tuple[str, str]] = []
    source = inspect.getsource(module)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.attr.startswith("_")
                and not target.attr.startswith("__")
            ):
                continue
            owner = getattr(module, target.value.id, None)
            if inspect.isclass(owner) and owner.__module__.split(".")[0] == "trio_agents":
                found.append((f"{_where(owner)}.{target.attr}", f"{module.__name__}:{node.lineno}"))
    return found


def _resolve(seam: str) -> object:
    module, cls, name = seam.rsplit(".", 2)
    owner: type = getattr(importlib.import_module(module), cls)
    return inspect.getattr_static(owner, name)


def test_the_overridden_private_methods_are_the_pinned_seams() -> None:
    overridden = _overridden()
    unlisted = {seam: sorted(overridden[seam]) for seam in overridden.keys() - SEAMS}
    assert not unlisted, (
        f"test doubles override private methods that are not seams: {unlisted}; override a "
        "public method or change a part instead, or make it a seam (SEAMS and a docstring)"
    )
    unused = SEAMS - overridden.keys()
    assert not unused, f"seams no double overrides any more; drop them: {sorted(unused)}"


@pytest.mark.parametrize("seam", sorted(SEAMS))
def test_a_seam_says_what_a_double_may_change(seam: str) -> None:
    method = _resolve(seam)
    doc = inspect.getdoc(method) or ""
    assert "Seam:" in doc, f"{seam}'s docstring has no 'Seam:' sentence"
