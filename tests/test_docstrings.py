"""Every public name of `trio_agents`, `trio_agents.acp` and `trio_agents.testing` is
documented, and every public async callable says whether it checkpoints.

What is checked:

- every name in each namespace's `__all__` (the lazy names of `trio_agents.testing` are
  resolved through its `__getattr__`);
- every public member of an exported class that the class or one of the library's own base
  classes defines: functions, classmethods, staticmethods, properties, and the dunders a
  caller uses as an interface (`INTERFACE_DUNDERS`: `__call__`, `__aenter__`, ...). An
  override needs a docstring of its own: it is where the class says what it does. Members
  inherited from `object`, `enum`, `Exception`, `typing.Protocol`, Hypothesis and other
  classes outside the library are skipped, as are other dunders (`__init__`, `__repr__` and
  what a dataclass generates): the class docstring documents the constructor;
- a dataclass without a docstring gets its signature as `__doc__`, which does not count;
- every async callable (coroutine function, async generator, `@asynccontextmanager`
  factory) names "checkpoint" in its docstring: the project's rule is that every async
  function always checkpoints, so its docstring says so, or says when it does not.

What cannot carry a docstring at run time is documented in the source, and read from it:

- a type alias (`NewType`, a `Literal` alias such as `CancelCause`, a union such as
  `ModelChunk`) or a constant in `__all__` by an attribute docstring: a string literal right
  after its assignment, which pyright and Sphinx show;
- a data member of an exported class (dataclass fields, enum members, protocol attributes,
  class variables, public `self.x` attributes) by an attribute docstring, or by its name in
  its class's docstring (or its constructor's): in backticks, or as a field list entry
  `name: what it is`.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import pathlib
import re
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

NAMESPACES = ("trio_agents", "trio_agents.acp", "trio_agents.testing")
INTERFACE_DUNDERS = frozenset(
    {
        "__call__",
        "__aenter__",
        "__aexit__",
        "__aiter__",
        "__anext__",
        "__enter__",
        "__exit__",
        "__iter__",
        "__next__",
        "__len__",
        "__contains__",
        "__getitem__",
    }
)


def public(name: str) -> bool:
    return not name.startswith("_") or name in INTERFACE_DUNDERS


def has_doc(doc: object) -> bool:
    return isinstance(doc, str) and doc.strip() != ""


def class_doc(cls: type) -> str:
    """The class's own docstring, "" if it has none (or only a dataclass's generated one)."""
    doc = vars(cls).get("__doc__")
    if not isinstance(doc, str) or not has_doc(doc):
        return ""
    try:
        generated = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
    except (TypeError, ValueError):
        return doc
    return "" if doc == generated else doc


def function_of(raw: object) -> Callable[..., Any] | None:
    """The function behind a class attribute, or None if it is not one."""
    if isinstance(raw, staticmethod | classmethod):
        raw = cast("Any", raw).__func__
    if isinstance(raw, property):
        return raw.fget
    if isinstance(raw, functools.cached_property):
        return raw.func
    if isinstance(raw, types.FunctionType):
        return raw
    return None


def is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        return True
    # An @asynccontextmanager factory: what it wraps is an async generator function.
    wrapped = getattr(func, "__wrapped__", None)
    return wrapped is not None and inspect.isasyncgenfunction(wrapped)


def names_member(doc: str, member: str) -> bool:
    """Whether a class's docstring documents `member`: in backticks, or as a field list
    entry (`member: what it is`)."""
    return f"`{member}`" in doc or re.search(rf"(^|\s){re.escape(member)}: ", doc) is not None


# -- the source side: what only the source can document ------------------------------------


@functools.cache
def module_tree(module_name: str) -> ast.Module:
    path = inspect.getsourcefile(sys.modules[module_name])
    assert path is not None, f"{module_name} has no source file"
    return ast.parse(pathlib.Path(path).read_text())


def attribute_docs(body: list[ast.stmt], *, on_self: bool = False) -> dict[str, bool]:
    """The names assigned in `body` (`x = ...`, `x: T = ...`, `x: T`; with `on_self`, every
    `self.x = ...` in it, nested blocks included), each with whether a string literal follows
    one of its assignments."""
    found: dict[str, bool] = {}

    def note(name: str, documented: bool) -> None:
        found[name] = found.get(name, False) or documented

    for index, stmt in enumerate(body):
        following = body[index + 1] if index + 1 < len(body) else None
        documented = (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and has_doc(following.value.value)
        )
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if not on_self and isinstance(target, ast.Name):
                    note(target.id, documented)
                if on_self:
                    for node in ast.walk(target):  # also `self.a, self.b = ...`
                        if (
                            isinstance(node, ast.Attribute)
                            and isinstance(node.value, ast.Name)
                            and node.value.id == "self"
                        ):
                            note(node.attr, documented)
        elif on_self:
            for block in ("body", "orelse", "finalbody", "handlers"):
                for part in getattr(stmt, block, []):
                    statements = part.body if isinstance(part, ast.ExceptHandler) else [part]
                    for name, doc in attribute_docs(statements, on_self=True).items():
                        note(name, doc)
    return found


def defining_module(module_name: str, name: str) -> str:
    """The module that assigns `name`, following `from .x import name` re-exports."""
    module = sys.modules[module_name]
    for node in ast.walk(module_tree(module_name)):
        if isinstance(node, ast.ImportFrom) and any(
            (alias.asname or alias.name) == name for alias in node.names
        ):
            relative = "." * node.level + (node.module or "")
            target = importlib.util.resolve_name(relative, module.__package__ or "")
            importlib.import_module(target)
            return defining_module(target, name)
    return module_name


def source_modules(cls: type) -> list[str]:
    """The loaded modules that hold `cls` by its name: its public namespace sets its
    `__module__` to the namespace (D54), so the module that defines it is among these."""
    return [
        name
        for name, module in sorted(sys.modules.items())
        if (name == cls.__module__ or name.startswith(cls.__module__.split(".")[0] + "."))
        and getattr(module, "__file__", None)
        and vars(module).get(cls.__name__) is cls
    ]


def data_members(cls: type) -> dict[str, bool]:
    """The public data members `cls` declares in its source (class-level assignments and
    annotations, `self.x` in its methods), each with whether an attribute docstring
    documents it."""
    node = next(
        (
            n
            for source in source_modules(cls)
            for n in module_tree(source).body
            if isinstance(n, ast.ClassDef) and n.name == cls.__name__
        ),
        None,
    )
    assert node is not None, f"{cls.__module__}.{cls.__qualname__} is not in its module's source"
    found = attribute_docs(node.body)
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for name, documented in attribute_docs(stmt.body, on_self=True).items():
                found[name] = found.get(name, False) or documented
    return {name: documented for name, documented in found.items() if public(name)}


# -- the checks ----------------------------------------------------------------------------


def function_problems(label: str, func: Callable[..., Any]) -> Iterator[str]:
    doc = func.__doc__
    if not has_doc(doc):
        yield f"{label}: no docstring"
    elif is_async(func) and "checkpoint" not in str(doc).lower():
        yield f"{label}: async, and its docstring does not say whether it checkpoints"


def class_problems(label: str, cls: type, library: str) -> Iterator[str]:
    if not class_doc(cls):
        yield f"{label}: no docstring"
    seen: set[str] = set()
    for klass in cls.__mro__:
        ours = klass.__module__ == library or klass.__module__.startswith(library + ".")
        data = data_members(klass) if ours else {}
        # Where a class documents its fields: its docstring, or its constructor's.
        init_doc = getattr(vars(klass).get("__init__"), "__doc__", None)
        docs = class_doc(klass) + (init_doc if isinstance(init_doc, str) else "")
        for member in [*vars(klass), *(name for name in data if name not in vars(klass))]:
            if member in seen:
                continue  # overridden: checked where it is overridden
            seen.add(member)
            if not ours or not public(member):
                continue
            where = f"{label}.{member}" + ("" if klass is cls else f" (from {klass.__name__})")
            func = function_of(vars(klass).get(member))
            if member in data:  # assigned, not defined: a field, even if it holds a function
                if not data[member] and not names_member(docs, member):
                    yield f"{where}: no attribute docstring, and its class's docstring omits it"
            elif func is not None:
                yield from function_problems(where, func)
            else:
                yield f"{where}: set at run time, not declared in the source; declare it there"


def problems(namespaces: tuple[str, ...], library: str) -> list[str]:
    """Every undocumented public name of `namespaces`, one line each."""
    found: list[str] = []
    for namespace in namespaces:
        module = importlib.import_module(namespace)
        for name in module.__all__:
            obj = getattr(module, name)  # a lazy name loads through the module's __getattr__
            label = f"{namespace}.{name}"
            if isinstance(obj, type):
                found.extend(class_problems(label, obj, library))
            elif inspect.isroutine(obj):
                found.extend(function_problems(label, obj))
            else:
                # A type alias or a constant: documented where it is assigned.
                source = defining_module(namespace, name)
                if not attribute_docs(module_tree(source).body).get(name, False):
                    found.append(f"{label}: no docstring after its assignment in {source}")
    return sorted(set(found))


def test_every_public_name_has_a_docstring() -> None:
    missing = problems(NAMESPACES, "trio_agents")
    assert not missing, f"{len(missing)} undocumented:\n" + "\n".join(missing)


# -- the checker itself finds what is missing ----------------------------------------------

FAKE_INIT = '''"""A namespace."""
from ._impl import ALIAS, UNDOCUMENTED_ALIAS, Documented, Field, Undocumented, documented

__all__ = [
    "ALIAS", "UNDOCUMENTED_ALIAS", "Documented", "Field", "Undocumented", "documented", "lazy"
]


def __getattr__(name):
    if name == "lazy":
        from ._impl import lazy
        return lazy
    raise AttributeError(name)
'''

FAKE_IMPL = '''"""The implementation."""
import dataclasses
import enum

ALIAS = int | str
"""Documented."""
UNDOCUMENTED_ALIAS = int | None


class Base:
    """A library base class."""

    def inherited(self) -> None:
        pass

    def base_only(self) -> None:
        pass


class Documented(Base):
    """Names `counter` in prose.

    size: documented as a field list entry.
    """

    limit = 3
    """Documented by an attribute docstring."""
    loose = 4

    def __init__(self) -> None:
        self.counter = 0
        self.size = 1
        self.stray = 2

    def inherited(self) -> None:
        """Overridden, with a docstring of its own."""

    async def tells(self) -> None:
        """Always a checkpoint."""

    async def silent(self) -> None:
        """Says nothing about it."""

    @property
    def prop(self) -> int:
        return 1

    def __call__(self) -> None:
        pass

    def __repr__(self) -> str:
        return "not checked"


@dataclasses.dataclass
class Field:
    value: int


class Undocumented(enum.Enum):
    A = 1


def documented() -> None:
    """Documented."""


async def lazy() -> None:
    pass
'''


def test_the_check_reports_every_kind_of_missing_docstring(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fakelib"
    package.mkdir()
    (package / "__init__.py").write_text(FAKE_INIT)
    (package / "_impl.py").write_text(FAKE_IMPL)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    try:
        found = problems(("fakelib",), "fakelib")
    finally:
        for name in ("fakelib", "fakelib._impl"):
            sys.modules.pop(name, None)
    assert found == [
        "fakelib.Documented.__call__: no docstring",
        "fakelib.Documented.base_only (from Base): no docstring",
        "fakelib.Documented.loose: no attribute docstring, and its class's docstring omits it",
        "fakelib.Documented.prop: no docstring",
        "fakelib.Documented.silent: async, and its docstring does not say whether it checkpoints",
        "fakelib.Documented.stray: no attribute docstring, and its class's docstring omits it",
        "fakelib.Field.value: no attribute docstring, and its class's docstring omits it",
        "fakelib.Field: no docstring",
        "fakelib.UNDOCUMENTED_ALIAS: no docstring after its assignment in fakelib._impl",
        "fakelib.Undocumented.A: no attribute docstring, and its class's docstring omits it",
        "fakelib.Undocumented: no docstring",
        "fakelib.lazy: no docstring",
    ]
