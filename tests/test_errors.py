"""The errors module: every class is raised on its real path, is a TrioAgentsError and the
trio or stdlib exception it means; the tree drawn in its docstring is exactly what it
defines; and no other module defines an exception class of its own."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pathlib
import pkgutil
import re
import sqlite3
import sys
import types
from collections.abc import Mapping
from typing import Any

import pytest
import trio

import trio_agents
from trio_agents import (
    AgentConfig,
    AgentOptions,
    AlreadyLoadedError,
    AlreadyRunningError,
    BashTools,
    ChatStreamError,
    ConfiguredAgents,
    DuplicateSessionError,
    FlushTimeoutError,
    JobNotFoundError,
    LabelNotFoundError,
    MemoryStore,
    NotAStoreError,
    ReadOnlyStoreError,
    Session,
    SessionExistsError,
    SessionLiveElsewhereError,
    SessionLiveError,
    ShellClosedError,
    ShellExecutor,
    ShellRequest,
    SqliteStore,
    StoreBrokenError,
    StoreClosedError,
    StoreNotFoundError,
    ToolContext,
    TrioAgentsError,
    UnknownStoreVersionError,
    open_agent,
    open_runtime,
)
from trio_agents._model._sse import SSEParser
from trio_agents.testing import ScriptedModel

errors_module = importlib.import_module("trio_agents._errors")
ERRORS_PATH = pathlib.Path(str(errors_module.__file__))
# Exception classes that stay in their own modules; the errors docstring says why.
KEPT_OUTSIDE = {
    "trio_agents.acp._jsonrpc.JsonRpcError",
    "trio_agents.acp._jsonrpc.ClientRequestError",
}


def class_names(module: types.ModuleType) -> set[str]:
    """The classes `module`'s source defines at its top level. Read from the source: a
    public class's `__module__` names the namespace that exports it (D54)."""
    tree = ast.parse(pathlib.Path(str(module.__file__)).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def defined_classes() -> dict[str, type[BaseException]]:
    own = class_names(errors_module)
    return {
        name: value
        for name, value in vars(errors_module).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and name in own
    }


def base_name(cls: type) -> str:
    """How the docstring names a base: `trio.X` for trio's, `io.X`, bare for builtins."""
    if getattr(trio, cls.__name__, None) is cls:
        return f"trio.{cls.__name__}"
    if cls.__module__ in ("builtins", errors_module.__name__, "trio_agents"):
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


def drawn_tree() -> dict[str, tuple[str | None, set[str]]]:
    """Parse the docstring's drawing: class -> (its parent in the drawing, the bracketed
    trio/stdlib bases)."""
    doc = errors_module.__doc__
    assert doc is not None
    lines = doc.splitlines()
    start = lines.index("    TrioAgentsError")
    row = re.compile(r"^(?P<lead>[ |+-]*)(?P<name>[A-Z]\w*)(?: \.+ \[(?P<bases>[^\]]*)\])?$")
    tree: dict[str, tuple[str | None, set[str]]] = {}
    stack: list[tuple[int, str]] = []
    for line in lines[start:]:
        if not line.strip():
            break
        match = row.match(line)
        assert match, f"a line of the drawing does not parse: {line!r}"
        depth, name = len(match["lead"]), match["name"]
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else None
        bases = {b.strip() for b in (match["bases"] or "").split(",") if b.strip()}
        assert name not in tree, f"{name} is drawn twice"
        tree[name] = (parent, bases)
        stack.append((depth, name))
    return tree


# -- the module itself ------------------------------------------------------------------------


def test_the_docstring_tree_is_exactly_the_classes_defined_with_their_bases() -> None:
    tree = drawn_tree()
    classes = defined_classes()
    assert set(tree) == set(classes)
    for name, (parent, bases) in tree.items():
        cls = classes[name]
        direct = [base_name(b) for b in cls.__bases__]
        if parent is None:
            assert direct == ["Exception"], name
            continue
        assert direct[0] == parent, f"{name} is drawn under {parent}, but derives from {direct}"
        assert set(direct[1:]) == bases, f"{name}: drawn {sorted(bases)}, bases {direct[1:]}"


def test_every_error_is_a_trio_agents_error_exported_from_the_package() -> None:
    classes = defined_classes()
    assert sorted(errors_module.__all__) == sorted(classes)
    for name, cls in classes.items():
        assert issubclass(cls, TrioAgentsError), name
        assert getattr(trio_agents, name) is cls, f"{name} is not exported from trio_agents"
        assert name in trio_agents.__all__


def test_the_errors_module_imports_only_trio_and_the_stdlib() -> None:
    tree = ast.parse(ERRORS_PATH.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the errors module imports nothing of the package"
            assert node.module is not None
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"trio"}


def test_no_other_module_defines_an_exception_class() -> None:
    found: set[str] = set()
    for info in pkgutil.walk_packages(trio_agents.__path__, "trio_agents."):
        module = importlib.import_module(info.name)
        own = class_names(module)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and name in own:
                found.add(f"{info.name}.{value.__qualname__}")
    assert found == {f"{errors_module.__name__}.{name}" for name in defined_classes()} | (
        KEPT_OUTSIDE
    )
    doc = errors_module.__doc__ or ""
    for qualified in KEPT_OUTSIDE:
        assert qualified.removeprefix("trio_agents.") in doc, f"{qualified} is not explained"


def test_a_lookup_error_prints_its_sentence_not_a_quoted_key() -> None:
    with pytest.raises(LabelNotFoundError) as info:
        ConfiguredAgents().session_id("nope")
    assert str(info.value) == "no agent is labelled 'nope'; the labels are: none"


# -- each class on its path -------------------------------------------------------------------


async def test_starting_a_job_on_an_executor_that_is_not_running() -> None:
    shell = ShellExecutor()
    spec = shell.resolve(ShellRequest("true"))
    with pytest.raises(ShellClosedError, match="not running") as info:
        await shell.start(spec)
    async with shell.running():
        pass
    with pytest.raises(ShellClosedError, match="not running"):
        await shell.start(spec)
    assert isinstance(info.value, trio.ClosedResourceError)
    assert isinstance(info.value, RuntimeError)  # what it was before it had a class


async def test_the_bash_tool_answers_a_closing_executor_with_an_error_result() -> None:
    async with open_runtime(MemoryStore()) as rt:
        bash = BashTools()
        await rt.load(bash)
        handle = await rt.agents.create(model=ScriptedModel())
        await rt.shell.close_jobs()  # the executor now refuses new jobs
        tool = next(t for t in bash.tools if t.name == "bash")
        arguments: Mapping[str, Any] = {
            "command": "true",
            "description": "does nothing",
            "run_in_background": True,
        }
        result = await tool(arguments, ToolContext(handle.agent.id, "c1", 1, 1))
    assert not isinstance(result, str)
    assert result.is_error
    assert result.content.startswith("cannot start a job now: the shell executor is not")


async def test_running_twice() -> None:
    shell = ShellExecutor()
    async with shell.running():
        with pytest.raises(AlreadyRunningError, match="already running"):
            async with shell.running():
                pass  # pragma: no cover - never entered
    async with open_agent(ScriptedModel()) as agent:
        with pytest.raises(AlreadyRunningError, match="already running its loop") as info:
            await agent.run()
    assert isinstance(info.value, RuntimeError)
    async with open_runtime(MemoryStore()) as rt:
        with pytest.raises(AlreadyRunningError, match="already served"):
            await rt.serve()
        handle = await rt.agents.create(model=ScriptedModel())
        with pytest.raises(AlreadyRunningError, match="lifecycle task"):
            await handle.fiber.serve()


@pytest.mark.realtime
async def test_a_store_running_twice(tmp_path: pathlib.Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    async with store.running():
        with pytest.raises(AlreadyRunningError, match="already running") as info:
            async with store.running():
                pass  # pragma: no cover - never entered
    assert isinstance(info.value, RuntimeError)


async def test_loading_a_plugin_twice() -> None:
    bash = BashTools()
    async with open_runtime(MemoryStore()) as rt, open_runtime(MemoryStore()) as other:
        await rt.load(bash)
        with pytest.raises(AlreadyLoadedError, match="use reload") as info:
            await rt.load(bash)
        with pytest.raises(AlreadyLoadedError, match="already loaded in a runtime"):
            await other.load(bash)
        plugin = ConfiguredAgents(AgentConfig("a", ScriptedModel()))
        await rt.load(plugin)
        with pytest.raises(AlreadyLoadedError, match="already applied"):
            await other.load(plugin)
    assert isinstance(info.value, ValueError)


async def test_creating_a_stored_session_again() -> None:
    store = MemoryStore()
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="s")
        handle.agent.send("hi")
        await handle.agent.wait_idle()
        await handle.aclose()
        with pytest.raises(SessionExistsError, match="already exists") as info:
            await rt.agents.create(model=ScriptedModel(), session_id="s")
    assert isinstance(info.value, DuplicateSessionError)
    assert isinstance(info.value, FileExistsError)


async def test_a_session_that_is_live() -> None:
    async with open_runtime(MemoryStore()) as rt:
        await rt.agents.create(model=ScriptedModel(), session_id="s")
        with pytest.raises(SessionLiveError, match="is live") as info:
            await rt.agents.create(model=ScriptedModel(), session_id="s")
        with pytest.raises(SessionLiveError, match="already live in this store"):
            rt.sessions.enter(Session("s"))
    assert isinstance(info.value, DuplicateSessionError)
    assert isinstance(info.value, trio.BusyResourceError)


@pytest.mark.realtime
async def test_a_session_live_through_another_store_object(tmp_path: pathlib.Path) -> None:
    # Each store holds its claim on its own open file, as another process would: the
    # kernel's flock tells them apart even inside one process.
    path = tmp_path / "s.sqlite3"
    first, second = SqliteStore(path), SqliteStore(path)
    async with first.running(), second.running():
        detach = first.enter(Session("s"))
        with pytest.raises(SessionLiveElsewhereError, match="another process") as info:
            second.enter(Session("s"))
        detach()
        second.enter(Session("s"))()
    assert isinstance(info.value, SessionLiveError)
    assert isinstance(info.value, DuplicateSessionError)


async def test_an_unknown_job_and_an_unknown_label() -> None:
    with pytest.raises(JobNotFoundError, match="no job 'bash-9'; known jobs: none") as job:
        ShellExecutor().result("bash-9")
    with pytest.raises(LabelNotFoundError, match="no agent is labelled 'x'") as label:
        ConfiguredAgents(AgentConfig("a", ScriptedModel())).agent("x")
    for error in (job.value, label.value):
        assert isinstance(error, KeyError)


class NeverFlushes(MemoryStore):
    async def flush(self, session: Session) -> None:
        await trio.sleep_forever()


async def test_a_flush_that_outlasts_close_grace() -> None:
    async with open_runtime(NeverFlushes()) as rt:
        handle = await rt.agents.create(
            model=ScriptedModel(), options=AgentOptions(close_grace=2.0)
        )
        with pytest.RaisesGroup(
            pytest.RaisesExc(FlushTimeoutError, match=r"not flushed within close_grace=2\.0s")
        ) as info:
            await handle.aclose()
    (error,) = info.value.exceptions
    assert isinstance(error, TimeoutError)


def test_the_sse_parser_refuses_an_endless_line() -> None:
    with pytest.raises(ChatStreamError, match="grew past 8 bytes") as info:
        SSEParser(max_event_bytes=8).feed(b"data: " + b"x" * 20)
    assert isinstance(info.value, ValueError)


# -- store files ------------------------------------------------------------------------------


async def test_a_store_that_is_not_running() -> None:
    store = SqliteStore("/nonexistent/never-opened.sqlite3")
    with pytest.raises(StoreClosedError, match="not running") as info:
        store.enter(Session("s"))
    with pytest.raises(StoreClosedError, match="not running"):
        await store.list_sessions()
    assert isinstance(info.value, trio.ClosedResourceError)


@pytest.mark.realtime
async def test_a_read_only_store_that_does_not_exist(tmp_path: pathlib.Path) -> None:
    with pytest.raises(StoreNotFoundError, match="no session store at") as info:
        async with SqliteStore(tmp_path / "missing.sqlite3", readonly=True).running():
            pass  # pragma: no cover - never entered
    assert isinstance(info.value, FileNotFoundError)
    assert not (tmp_path / "missing.sqlite3").exists()


@pytest.mark.realtime
async def test_a_file_that_is_not_a_store(tmp_path: pathlib.Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"this is no database, only some text " * 100)
    with pytest.raises(NotAStoreError, match="not an SQLite database") as info:
        async with SqliteStore(garbage).running():
            pass  # pragma: no cover - never entered
    assert isinstance(info.value, ValueError)
    foreign = tmp_path / "foreign.sqlite3"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    conn.close()
    with pytest.raises(NotAStoreError, match=r"not a trio-agents session store.*'accounts'"):
        async with SqliteStore(foreign).running():
            pass  # pragma: no cover - never entered


@pytest.mark.realtime
async def test_a_store_of_an_unknown_format_version(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    async with SqliteStore(path).running():
        pass
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version=99")
    conn.close()
    for readonly in (False, True):
        with pytest.raises(UnknownStoreVersionError, match="of format 99") as info:
            async with SqliteStore(path, readonly=readonly).running():
                pass  # pragma: no cover - never entered
        assert isinstance(info.value, ValueError)


@pytest.mark.realtime
async def test_entering_a_session_into_a_read_only_store(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    async with SqliteStore(path).running():
        pass
    store = SqliteStore(path, readonly=True)
    async with store.running():
        with pytest.raises(ReadOnlyStoreError, match="read-only") as info:
            store.enter(Session("s"))
    assert isinstance(info.value, io.UnsupportedOperation)


@pytest.mark.realtime
async def test_a_store_whose_writer_failed(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path)
    broken: list[StoreBrokenError] = []

    async def write() -> None:
        async with store.running():
            # Another writer of the file took the session's row: our first batch fails.
            with sqlite3.connect(path) as conn:
                conn.execute("INSERT INTO sessions VALUES ('s', '{}', 0)")
            conn.close()
            session = Session("s")
            store.enter(session)
            session.append("user/message", {"id": "m1", "content": "hi"})
            try:
                await store.flush(session)
            except StoreBrokenError as exc:
                broken.append(exc)
                raise

    # The body sees the failure first (the writer does not cancel it); its exception is
    # what leaves the block.
    with pytest.raises(StoreBrokenError):
        await write()
    (error,) = broken
    assert isinstance(error, trio.BrokenResourceError)
    assert isinstance(error.__cause__, sqlite3.IntegrityError)
