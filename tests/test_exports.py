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
import typing
from collections.abc import Iterator

import pytest

import trio_agents

PACKAGE = pathlib.Path(trio_agents.__file__).parent
TESTS = pathlib.Path(__file__).parent

# Lowest first. A module's layer is the first entry whose pattern matches its dotted name
# (without the `trio_agents.` prefix); `*` ends a pattern.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "pure cores and helpers",
        (
            "_errors", "_util", "_nursery", "_batches", "_options", "_model", "_tool", "_records",
            "_transcript", "_repair", "_record_shape", "_store_errors", "_session", "_events",
            "_status", "_inbox", "_store_claims", "_store_pg_schema", "_approval", "_mode_policy",
            "_readable", "_version",
            "_mcp_config",
            "_model_sse", "_shell_output", "_shell_group", "_shell_env", "_shell_types",
            "_spill", "_dumpable",
            "_sandbox_policy", "_tool_docstring", "_tool_schema", "_turn_events", "_turn_result",
            "_system_prompt", "_agent_parts",
            "_tracing", "acp._jsonrpc", "acp._mapping", "acp._modes", "acp._permissions",
            "acp._params", "acp._prompt", "acp._listing", "acp._frames",
            "_cli._chat_render", "testing._reference", "testing._history",
            "testing._durable_checks",
            "testing._properties", "testing._durable_properties",
            "testing._lifecycle_properties", "testing._observer", "testing._agent_properties",
            "testing._features", "testing._approval_checks", "testing._acp._wire",
            "testing._acp._procs", "testing._acp._responses",
            "testing._acp._properties", "testing._acp._permission_rules",
            "testing._mcp_properties",
        ),
    ),
    (
        "stores, shell and models",
        (
            "_store", "_stored_rows", "_store_thread", "_store_sqlite*", "_store_postgres",
            "_sandbox", "_shell_process", "_shell_sandbox", "_shell_jobs", "_shell",
            "_model_openai",
            "_model_offline",
            "_mcp", "_mcp_*", "_function_tool",
        ),
    ),
    ("agent", ("_turn", "_turn_stream", "_approval_gate", "_agent_step", "_agent", "_standalone")),
    ("fiber", ("_fiber",)),
    ("registry", ("_registry",)),
    ("runtime", ("_runtime",)),
    ("plugins", ("_configured", "_shell_tools")),
    ("the trio_agents namespace", ("",)),
    ("acp", ("acp", "acp.*")),
    ("testing", ("testing", "testing.*")),
    ("cli", ("_cli", "_cli.*")),
]  # fmt: skip

NAMESPACES = ("trio_agents", "trio_agents.acp", "trio_agents.testing")

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
        "FunctionTool", "function_tool",
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
        "SessionExistsError", "SessionLiveElsewhereError", "SessionLiveError",
        "ShellClosedError", "SpillDirectoryError", "StoreBrokenError", "StoreClosedError",
        "StoreConnectionError",
        "StoreFileError", "StoreLockedError", "StoreNotFoundError",
        "UnknownStoreVersionError",
    },
    "trio_agents.acp": {"AcpServer", "serve_stdio"},
    "trio_agents.testing": {
        "HOLD", "PROPERTIES", "ContractViolation", "Draws", "DurableMachine", "Property",
        "AgentFactory", "AgentMachine", "AgentReference", "AgentSurface", "EchoTool",
        "Features", "GateTool", "LifecycleMachine", "RandomSeeder", "RuntimeFactory",
        "RuntimeSurface",
        "ScriptedModel", "ScriptedStep", "ShellFactory", "ShellMachine", "TrioHost",
        "WallClock", "check_agent_conformance", "check_durable_conformance",
        "check_lifecycle_conformance",
        "check_shell_conformance", "echo_reply", "history_problems", "reply", "tool_step",
        "McpMachine", "McpOpener", "check_mcp_conformance",
        "AgentObserver", "ObservedAgent", "ObservedFactory", "observed",
        "AsyncioModel", "AsyncioPeer", "AsyncioTool", "PeerAgent", "open_asyncio_peer",
    },
}  # fmt: skip


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(name: str) -> int:
    for index, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
                return index
    raise AssertionError(f"trio_agents.{name} has no layer: add it to LAYERS in {__file__}")


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
    """(imported module within the package, line, inside a function) for every run-time
    import of the package's own modules. `from . import _x` is an import of the module `_x`;
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
            targets = [a.name.removeprefix("trio_agents").removeprefix(".") for a in node.names]
            targets = [t for t, a in zip(targets, node.names, strict=True) if _ours(a.name)]
        else:
            if node.level == 0:
                if not _ours(node.module or ""):
                    continue
                stem = (node.module or "").removeprefix("trio_agents").removeprefix(".")
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
    return module == "trio_agents" or module.startswith("trio_agents.")


def _packages_of(target: str) -> list[str]:
    """The packages importing `target` runs first, outermost first (the root is run by
    every module, so it is no edge)."""
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def graph() -> dict[str, set[str]]:
    return {
        name: {target for target, _, _ in imports(name, path) if target != name}
        for name, path in modules().items()
    }


def test_every_module_outside_the_namespaces_is_private_by_name() -> None:
    public = {ns.removeprefix("trio_agents").removeprefix(".") for ns in NAMESPACES}
    offenders = [
        f"trio_agents.{name}"
        for name in modules()
        if name not in public and not any(part.startswith("_") for part in name.split("."))
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
        and obj.__module__.startswith("trio_agents")
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
        case ast.Import(names=[ast.alias(name="importlib", asname=None)]):
            return True  # the lazy loader
        case ast.Assign(targets=[ast.Name(id="__all__" | "_LAZY")]):
            return True
        case ast.If(test=ast.Name(id="TYPE_CHECKING")):
            return all(_re_exports_only(inner) for inner in node.body)
        case ast.FunctionDef(name="__getattr__"):  # PEP 562: the lazily loaded names
            return True
        case ast.Expr(value=ast.Call(func=ast.Name(id="_fixup_module_metadata"))):
            return True
        case _:
            return False


def test_namespace_init_files_only_re_export() -> None:
    strays = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node).splitlines()[0]}"
        for name, path in modules().items()
        if path.name == "__init__.py" and not name.startswith("_cli")
        for node in ast.parse(path.read_text()).body
        if not _re_exports_only(node)
    ]
    assert strays == [], "namespace __init__ files only re-export (`from ._x import X as X`)"


def test_imports_never_point_up() -> None:
    upward = [
        f"trio_agents.{name} ({LAYERS[layer_of(name)][0]}) imports trio_agents.{target} "
        f"({LAYERS[layer_of(target)][0]})"
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


def test_nothing_in_the_library_imports_the_cli() -> None:
    importers = sorted(
        name
        for name, targets in graph().items()
        if not name.startswith("_cli")
        and any(t == "_cli" or t.startswith("_cli.") for t in targets)
    )
    assert importers == []


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
                    silent.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
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
