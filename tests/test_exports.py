"""The layout, pinned: what each public namespace exports, that everything else is private by
name, and that imports run one way (issue 13; docs/design.md, "Layout").

The import graph is built from the source, not from `sys.modules`: an edge is an import that
runs (module level or inside a function), not one under `if TYPE_CHECKING:`, which may point
anywhere. Each module belongs to a layer; an import may only point to its own layer or a lower
one, and the graph may have no cycle.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re
import subprocess
import sys
import typing
from collections.abc import Iterator

import pytest

import agent_conformance
import trio_agents

from .support.layout import LAYERS, NAMESPACES, ROOMS, RUNTIME, RUNTIME_NAMESPACES, SUITE, layer_of

ROOTS = {
    RUNTIME: pathlib.Path(trio_agents.__file__).parent,
    SUITE: pathlib.Path(agent_conformance.__file__).parent,
}
TESTS = pathlib.Path(__file__).parent

EXPORTS = {
    "trio_agents": {
        "Agent", "AgentClosed", "AgentClosedError", "AgentConfig", "AgentCreated",
        "Approval", "ApprovalPolicy", "ApprovalRequest", "Approver", "Decision",
        "DecisionOutcome", "Policy", "Verdict", "ToolStarted", "AgentTracer",
        "TracingUnavailableError",
        "AgentHandle", "AgentOptions", "AgentRegistry", "AgentStatus", "BashTools",
        "CancelCause", "CancelRequested", "Closer", "Committer", "ConfiguredAgents",
        "CorruptSessionError",
        "DuplicateSessionError", "Event", "EventBus", "Fiber", "FiberClosedError", "Finish",
        "FunctionTool", "function_tool", "FileTools", "FileAccess",
        "JobOutput", "Listener", "MemoryStore", "Message", "MessageId", "Model", "ModelChunk",
        "ModelEndpointError", "ModelRequest", "OfflineModel", "OpenAICompatibleModel",
        "PersistenceError", "Plugin", "PostgresStore", "Record", "RunResult", "Runtime",
        "SandboxPolicy",
        "Session",
        "SessionClosed", "SessionCreated", "SessionInfo", "SessionNotFoundError",
        "SessionStore", "ShellExecutor", "ShellRequest", "ShellSpec", "SqliteStore",
        "StatusChanged", "StepEnded", "StepStarted", "StoredSession", "TextDelta",
        "TextStreamed", "Tool", "ToolCall", "ToolContext", "ToolResult", "ToolSpec",
        "TrioAgentsError", "TurnEnded", "TurnEndReason", "TurnStarted", "Usage",
        "default_store_path", "make_non_dumpable", "open_agent", "open_runtime",
        # following a turn in code (rules V1-V4)
        "TurnStream", "TurnEvent", "TurnText", "TurnToolCall", "TurnToolResult", "TurnStepEnd",
        "TurnEnd", "TurnDropped", "TurnResult", "ToolCallResult", "turn_result",
        "TurnNotFoundError",
        # the default system prompt of chat and acp
        "SystemPrompt", "coding_system_prompt",

        "McpServer", "McpServers", "McpTools", "mcp_servers_from_config", "open_mcp_tools",
        # the errors, one class per reason (D58)
        "AlreadyLoadedError", "AlreadyRunningError", "ChatStreamError", "FlushTimeoutError",
        "JobNotFoundError", "LabelNotFoundError", "McpConfigError", "McpServerError",
        "NotAStoreError", "ObserverMisuse",
        "ReadOnlyStoreError", "SandboxUnavailableError",
        "SessionClaimLostError", "SessionExistsError", "SessionLiveElsewhereError",
        "SessionLiveError",
        "ShellClosedError", "SpillDirectoryError", "StoreBrokenError", "StoreClosedError",
        "StoreConnectionError",
        "StoreFileError", "StoreLockedError", "StoreNotFoundError",
        "UnknownStoreVersionError",
    },
    "trio_agents.acp": {"AcpServer", "serve_stdio"},
    "trio_agents.testing": {
        "HOLD", "EchoTool", "GateTool", "ScriptedModel", "ScriptedStep", "TrioHost",
        "WallClock", "echo_reply", "reply", "tool_step",
    },
    "agent_conformance": {
        "PROPERTIES", "ContractViolation", "Draws", "DurableMachine", "Property",
        "AgentFactory", "AgentMachine", "AgentReference", "AgentSurface",
        "Features", "LifecycleMachine", "RandomSeeder", "RuntimeFactory", "RuntimeSurface",
        "ShellFactory", "ShellMachine", "check_agent_conformance", "check_durable_conformance",
        "check_lifecycle_conformance", "check_shell_conformance", "history_problems",
        "McpMachine", "McpOpener", "check_mcp_conformance",
        "FunctionMachine", "FunctionToolFactory", "check_function_conformance",
        "ModelMachine", "ModelFactory", "check_model_conformance",
        "AgentObserver", "ObservedAgent", "ObservedFactory", "observed",
        "AsyncioModel", "AsyncioPeer", "AsyncioTool", "PeerAgent", "open_asyncio_peer",
        "main", "AcpTarget", "acp_machine", "MachineReport",
    },
}  # fmt: skip


def module_name(path: pathlib.Path) -> str:
    for top, root in ROOTS.items():
        if path.is_relative_to(root):
            parts = [top, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts)
    raise AssertionError(f"{path} is in neither package")


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for root in ROOTS.values() for p in sorted(root.rglob("*.py"))}


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            return True
    return False


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return True
    return False


def imports(name: str, path: pathlib.Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module within either package, line, inside a function) for every run-time
    import of the two packages' own modules. `from . import _x` is an import of the module `_x`;
    importing `a.b._c` also runs the packages `a` and `a.b`, so those are edges too (unless
    the importer is inside them, where they have already run)."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    known = modules()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or _under_type_checking(node, parents):
            continue
        local = _in_function(node, parents)
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if _ours(a.name)]
        else:
            if node.level == 0:
                if not _ours(node.module or ""):
                    continue
                stem = node.module or ""
            else:
                base = package[: len(package) - (node.level - 1)]
                stem = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                sub = f"{stem}.{alias.name}".lstrip(".")
                targets.append(sub if sub in known else stem)
        for target in targets:
            for parent in _packages_of(target):
                if parent in known and not (name == parent or name.startswith(parent + ".")):
                    yield parent, node.lineno, local
            if target in known:
                yield target, node.lineno, local


def _ours(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in (RUNTIME, SUITE))


def _packages_of(target: str) -> list[str]:
    """The packages importing `target` runs first, outermost first (a root is an edge
    only from outside it: every module of a package has run it)."""
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def graph() -> dict[str, set[str]]:
    return {
        name: {target for target, _, _ in imports(name, path) if target != name}
        for name, path in modules().items()
    }


def test_every_module_outside_the_namespaces_is_private_by_name() -> None:
    offenders = [
        name
        for name in modules()
        if name not in NAMESPACES and not any(part.startswith("_") for part in name.split(".")[1:])
    ]
    assert offenders == [], f"public by name but not a namespace: {offenders}"


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_each_namespace_exports_exactly_its_pinned_names(namespace: str) -> None:
    module = importlib.import_module(namespace)
    assert sorted(module.__all__) == sorted(EXPORTS[namespace])
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_public_classes_and_functions_show_their_namespace(namespace: str) -> None:
    module = importlib.import_module(namespace)
    wrong = {
        name: obj.__module__
        for name in module.__all__
        if (isinstance(obj := getattr(module, name), type) or callable(obj))
        and isinstance(getattr(obj, "__module__", None), str)
        and obj.__module__.startswith((RUNTIME, SUITE))
        and obj.__module__ != namespace
    }
    assert wrong == {}


def _re_exports_only(node: ast.stmt) -> bool:
    """Whether a statement of a namespace `__init__` is one a re-exporting file may hold."""
    match node:
        case ast.Expr(value=ast.Constant(value=str())):  # the docstring
            return True
        case ast.ImportFrom(module="__future__") | ast.ImportFrom(module="typing"):
            return True
        case ast.ImportFrom(level=level) if level > 0:
            # `X as X`, or a private helper of the namespace itself (`_fixup_module_metadata`)
            return all(a.asname == a.name or (a.asname or "").startswith("_") for a in node.names)
        case ast.Import(names=[ast.alias(name="importlib" | "warnings", asname=None)]):
            return True  # the lazy loader; the moved names' warning (trio_agents.testing)
        case ast.Assign(targets=[ast.Name(id="__all__" | "_LAZY" | "_MOVED" | "__version__")]):
            return True
        case ast.If(test=ast.Name(id="TYPE_CHECKING")):
            return all(_re_exports_only(inner) for inner in node.body)
        case ast.FunctionDef(name="__getattr__"):  # PEP 562: the lazily loaded names
            return True
        case ast.Expr(
            value=ast.Call(func=ast.Name(id="_fixup_module_metadata" | "_show_namespace"))
        ):
            return True
        case _:
            return False


def test_namespace_init_files_only_re_export() -> None:
    strays = [
        f"{name}:{node.lineno}: {ast.unparse(node).splitlines()[0]}"
        for name, path in modules().items()
        if path.name == "__init__.py" and "_cli" not in name.split(".")
        for node in ast.parse(path.read_text()).body
        if not _re_exports_only(node)
    ]
    assert strays == [], "namespace __init__ files only re-export (`from ._x import X as X`)"


def test_imports_never_point_up() -> None:
    upward = [
        f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for name, targets in graph().items()
        for target in targets
        if layer_of(target) > layer_of(name)
    ]
    assert upward == []


def test_the_import_graph_has_no_cycle() -> None:
    edges = graph()
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(edges.get(name, ())):
            if state.get(target) == "open":
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def _in_cli(name: str) -> bool:
    return "_cli" in name.split(".")


def test_nothing_in_the_library_imports_a_command() -> None:
    importers = sorted(
        name
        for name, targets in graph().items()
        if not _in_cli(name) and any(_in_cli(t) for t in targets)
    )
    assert importers == []


def _every_import(path: pathlib.Path, name: str) -> Iterator[tuple[str, int]]:
    """(absolute module, line) of every import statement, type-checking ones included."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield node.module or "", node.lineno
            else:
                base = package[: len(package) - (node.level - 1)]
                yield ".".join([*base, *([node.module] if node.module else [])]), node.lineno


def test_the_suite_imports_only_the_runtimes_public_namespaces() -> None:
    """agent_conformance is a product of its own: what it needs of the runtime is public
    (a documented seam), so an author of another runtime sees the same surface it uses."""
    reaching = [
        f"{name}:{line} imports {module}"
        for name, path in modules().items()
        if name.split(".")[0] == SUITE
        for module, line in _every_import(path, name)
        if module.split(".")[0] == RUNTIME and module not in RUNTIME_NAMESPACES
    ]
    assert reaching == []


def test_no_string_of_the_suite_names_a_private_module_of_the_runtime() -> None:
    """An import by name (`importlib`, `python -m`, a patch target) reaches as far as an
    import statement does."""
    private = re.compile(rf"\b{RUNTIME}[./]_\w+")
    found = [
        f"{name}:{node.lineno}: {node.value!r}"
        for name, path in modules().items()
        if name.split(".")[0] == SUITE
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and private.search(node.value)
    ]
    assert found == []


def test_the_runtime_reaches_the_suite_only_from_its_command() -> None:
    """`trio-agents conformance` calls the suite's command; the library itself never
    imports the suite (trio_agents.testing's moved names load it by name, lazily)."""
    reaching = [
        f"{name}:{line} imports {module}"
        for name, path in modules().items()
        if name.split(".")[0] == RUNTIME and not _in_cli(name)
        for module, line in _every_import(path, name)
        if module.split(".")[0] == SUITE
    ]
    assert reaching == []


def test_each_room_names_itself_and_imports_nothing() -> None:
    """A sub-package of the runtime is a room: its `__init__` is a docstring, no more."""
    rooms = {
        name: path
        for name, path in modules().items()
        if path.name == "__init__.py"
        and name.count(".") == 1
        and name.split(".")[1][0] == "_"
        and not _in_cli(name)
    }
    assert set(rooms) >= {
        f"{RUNTIME}.{room}" for room in ("_agent", "_store", "_shell", "_mcp", "_model", "_tool")
    }
    for name, path in rooms.items():
        tree = ast.parse(path.read_text())
        assert len(tree.body) == 1, f"{name} holds more than its docstring"
        assert ast.get_docstring(tree), f"{name} has no docstring naming its room"


def test_function_local_imports_say_why() -> None:
    """Only for lazy loading, each with its reason in a comment on or just above it."""
    silent: list[str] = []
    for path in modules().values():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Import | ast.ImportFrom)
                and _in_function(node, parents)
                and not _under_type_checking(node, parents)
            ):
                around = lines[max(0, node.lineno - 3) : node.lineno]
                reasons = [
                    comment
                    for line in around
                    if "#" in line
                    for comment in [line.split("#", 1)[1].strip()]
                    if not comment.startswith(("type:", "noqa", "pyright:", "fmt:"))
                ]
                if not reasons:
                    silent.append(f"{module_name(path)}:{node.lineno}")
    assert silent == []


def _hints_problem(obj: object, skipped: type) -> str | None:
    if not isinstance(obj, type) or issubclass(obj, skipped):
        return None
    try:
        typing.get_type_hints(obj)  # pyright: ignore[reportUnknownArgumentType]
    except Exception as exc:
        return repr(exc)
    return None


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_annotations_of_public_classes_resolve(namespace: str) -> None:
    """`typing.get_type_hints` works on every exported class although its `__module__` is
    the namespace (D54). The machines are left out: Hypothesis's own RuleBasedStateMachine
    has annotations `get_type_hints` cannot resolve."""
    from hypothesis.stateful import RuleBasedStateMachine  # only for this check

    module = importlib.import_module(namespace)
    broken: dict[str, str] = {}
    for name in module.__all__:
        problem = _hints_problem(getattr(module, name), RuleBasedStateMachine)
        if problem is not None:
            broken[name] = problem
    assert broken == {}


def test_no_test_module_imports_another() -> None:
    found: list[str] = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [module.rsplit(".", 1)[-1], *(a.name for a in node.names)]
                if any(n.startswith("test_") for n in names):
                    found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(
                a.name.rsplit(".", 1)[-1].startswith("test_") for a in node.names
            ):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert found == []


def test_private_usage_is_only_trios_own_internals_with_a_reason() -> None:
    """Neither package reaches into another module's private names (a seam is public and
    documented instead); only trio's internals, where trio has no public handle, each with
    its reason in a comment or docstring just above."""
    problems: list[str] = []
    for name, path in modules().items():
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if "reportPrivateUsage" not in line:
                continue
            above = "\n".join(lines[max(0, number - 6) : number - 1])
            if "trio._" not in line.split("#", 1)[0]:
                problems.append(f"{name}:{number}: not trio's own internals")
            elif "#" not in above and '"""' not in above:
                problems.append(f"{name}:{number}: no reason just above")
    assert problems == []


# Names agent_conformance has that trio_agents.testing never exported (added with it or
# after the move) have no alias there.
NEVER_IN_TESTING = {
    "main",
    "AcpTarget",
    "acp_machine",
    "MachineReport",
    "FunctionMachine",
    "FunctionToolFactory",
    "check_function_conformance",
    "ModelMachine",
    "ModelFactory",
    "check_model_conformance",
}
MOVED = sorted(EXPORTS["agent_conformance"] - NEVER_IN_TESTING)


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_name_still_imports_from_testing_with_a_warning_saying_where(name: str) -> None:
    """For one release (D385): the suite's names `trio_agents.testing` used to export."""
    import trio_agents.testing

    with pytest.warns(DeprecationWarning, match=rf"agent_conformance\.{name}\b") as caught:
        value = getattr(trio_agents.testing, name)
    assert value is getattr(agent_conformance, name)
    assert f"from agent_conformance import {name}" in str(caught[0].message)
    assert caught[0].filename == __file__  # the warning points at the importer's line


def test_the_shim_covers_every_name_testing_exported_before() -> None:
    import trio_agents.testing

    before = set(MOVED) | set(trio_agents.testing.__all__)
    assert len(before) == 43  # trio_agents.testing.__all__ as of 0.1.0
    assert set(trio_agents.testing._MOVED) == set(MOVED)  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(AttributeError, match="no attribute 'Nonesuch'"):
        trio_agents.testing.Nonesuch  # noqa: B018


def test_the_mcp_machines_server_path_holds_both_packages() -> None:
    """The reference MCP server runs with a scrubbed environment whose PYTHONPATH is the
    directory the suite is imported from; a checkout that is not installed needs both
    packages there (the move to agent_conformance changed the depth once)."""
    from agent_conformance._mcp_launch import checkout

    root = pathlib.Path(checkout())
    assert (root / SUITE / "_mcp_server.py").is_file()
    assert (root / RUNTIME / "__init__.py").is_file()


def test_an_acp_reproduction_printed_before_the_move_still_runs_its_imports() -> None:
    """Saved reproductions keep running for one release (D385): the ACP one imported the
    suite's private modules under trio_agents.testing."""
    with pytest.warns(DeprecationWarning, match=r"agent_conformance\.AcpTarget"):
        from trio_agents.testing._acp._client import Target  # pyright: ignore
    with pytest.warns(DeprecationWarning, match=r"agent_conformance\.acp_machine"):
        from trio_agents.testing._acp._machine import acp_machine  # pyright: ignore
    assert Target is agent_conformance.AcpTarget
    assert acp_machine is agent_conformance.acp_machine


def test_the_reference_mcp_server_still_starts_by_its_old_module_name(
    tmp_path: pathlib.Path,
) -> None:
    """MCP configurations that start `python -m trio_agents.testing._mcp_server`."""
    done = subprocess.run(
        [sys.executable, "-m", "trio_agents.testing._mcp_server", "--record", str(tmp_path / "r")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].startswith("deprecated: python -m trio_agents.testing")


def _room(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == RUNTIME and len(parts) > 2 and parts[1] in ROOMS else None


def test_the_rooms_import_one_way() -> None:
    """Not only modules: a room imports only from the rooms before it in ROOMS."""
    backward = sorted(
        f"{name} ({_room(name)}) imports {target} ({_room(target)})"
        for name, targets in graph().items()
        for target in targets
        if (a := _room(name)) and (b := _room(target)) and ROOMS.index(b) > ROOMS.index(a)
    )
    assert backward == []
