"""The layout, in one place: the layers of both packages, lowest first, and the modules that
must stay pure. tests/test_exports.py pins the import graph against it, tests/test_pure_cores.py
the pure modules, and tests/test_static_and_docs.py checks the README's map against it.

A module's layer is the first entry whose pattern matches its dotted name; `*` ends a
pattern. A sub-package's `__init__` only names its room (a docstring, no import), so the
packages themselves sit in the lowest layer.
"""

from __future__ import annotations

import pathlib

RUNTIME = "trio_agents"
SUITE = "agent_conformance"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "pure cores and helpers",
        (
            "trio_agents._agent", "trio_agents._store", "trio_agents._shell", "trio_agents._mcp",
            "trio_agents._model", "trio_agents._tool",
            "trio_agents._errors", "trio_agents._util", "trio_agents._nursery",
            "trio_agents._batches", "trio_agents._version", "trio_agents._tracing",
            "trio_agents._frozen", "trio_agents._secret_paths",
            "trio_agents._agent._options", "trio_agents._store._transcript",
            "trio_agents._store._repair", "trio_agents._agent._events",
            "trio_agents._agent._status", "trio_agents._agent._inbox",
            "trio_agents._agent._approval", "trio_agents._agent._mode_policy",
            "trio_agents._agent._turn_events", "trio_agents._agent._turn_result",
            "trio_agents._agent._system_prompt", "trio_agents._agent._parts",
            "trio_agents._model._seam", "trio_agents._model._sse",
            "trio_agents._tool._seam", "trio_agents._tool._docstring", "trio_agents._tool._schema",
            "trio_agents._tool._edit",
            "trio_agents._store._records", "trio_agents._store._record_shape",
            "trio_agents._store._errors", "trio_agents._store._session",
            "trio_agents._store._claims", "trio_agents._store._pg_schema",
            "trio_agents._store._pg_claims",
            "trio_agents._shell._readable", "trio_agents._shell._output",
            "trio_agents._shell._group", "trio_agents._shell._env", "trio_agents._shell._types",
            "trio_agents._shell._spill", "trio_agents._shell._dumpable",
            "trio_agents._shell._sandbox_policy", "trio_agents._shell._seccomp",
            "trio_agents._shell._userns",
            "trio_agents._mcp._config",
            "trio_agents.acp._jsonrpc", "trio_agents.acp._mapping", "trio_agents.acp._modes",
            "trio_agents.acp._permissions", "trio_agents.acp._params", "trio_agents.acp._prompt",
            "trio_agents.acp._listing", "trio_agents.acp._frames", "trio_agents.acp._outcomes",
            "trio_agents._cli._chat_render",
        ),
    ),
    (
        "stores, shell, models and tools",
        (
            "trio_agents._store.*", "trio_agents._shell._sandbox", "trio_agents._shell._process",
            "trio_agents._shell._executor_sandbox", "trio_agents._shell._jobs",
            "trio_agents._shell._network",
            "trio_agents._shell._executor", "trio_agents._model.*", "trio_agents._mcp._tools",
            "trio_agents._mcp._process", "trio_agents._mcp._tool", "trio_agents._mcp._servers",
            "trio_agents._tool.*",
        ),
    ),
    ("agent", ("trio_agents._agent.*",)),
    ("fiber", ("trio_agents._fiber",)),
    ("registry", ("trio_agents._registry",)),
    ("runtime", ("trio_agents._runtime",)),
    ("plugins", ("trio_agents._configured", "trio_agents._shell._bash_tools")),
    ("the trio_agents namespace", ("trio_agents",)),
    ("acp", ("trio_agents.acp", "trio_agents.acp.*")),
    ("testing", ("trio_agents.testing", "trio_agents.testing.*")),
    (
        "conformance: pure checks",
        (
            "agent_conformance._names", "agent_conformance._vocabulary",
            "agent_conformance._procfs", "agent_conformance._acp._lines",
            "agent_conformance._reference",
            "agent_conformance._history", "agent_conformance._durable_checks",
            "agent_conformance._properties", "agent_conformance._durable_properties",
            "agent_conformance._lifecycle_properties", "agent_conformance._observer",
            "agent_conformance._agent_properties", "agent_conformance._features",
            "agent_conformance._approval_checks", "agent_conformance._mcp_properties",
            "agent_conformance._acp", "agent_conformance._acp._wire",
            "agent_conformance._acp._schema", "agent_conformance._acp._procs",
            "agent_conformance._acp._responses",
            "agent_conformance._acp._properties", "agent_conformance._acp._permission_rules",
            "agent_conformance._function_properties", "agent_conformance._function_specs",
            "agent_conformance._function_checks", "agent_conformance._model_properties",
            "agent_conformance._acp._config_state", "agent_conformance._chat",
            "agent_conformance._chat._properties", "agent_conformance._verdicts",
            "agent_conformance._acp._requirements", "agent_conformance._acp._report",
            "agent_conformance._acp._report_html", "agent_conformance._acp._echo_server",
            "agent_conformance._acp._anthropic", "agent_conformance._acp._framing",
            "agent_conformance._acp._gemini",
        ),
    ),
    ("conformance: machines", ("agent_conformance._*",)),
    ("the agent_conformance namespace", ("agent_conformance",)),
    ("conformance: command", ("agent_conformance._cli*",)),
    ("cli", ("trio_agents._cli", "trio_agents._cli.*")),
]  # fmt: skip

# The runtime's rooms, lowest first: a module of one imports (at run time) only from its own
# room and the ones before it, so the rooms, too, import one way.
ROOMS = ("_tool", "_model", "_store", "_shell", "_mcp", "_agent")

# The runtime's public namespaces: all that the suite may import of the runtime.
NAMESPACES = ("trio_agents", "trio_agents.acp", "trio_agents.testing", "agent_conformance")
RUNTIME_NAMESPACES = ("trio_agents", "trio_agents.acp", "trio_agents.testing")

# Pure: they import neither trio nor Hypothesis (`_errors` subclasses trio's exceptions by
# contract; tests/test_errors.py checks it).
PURE = [
    "trio_agents.acp._mapping", "trio_agents.acp._modes", "trio_agents._agent._mode_policy",
    "trio_agents.acp._permissions", "trio_agents._cli._chat_render",
    "trio_agents._shell._output", "trio_agents._shell._env", "trio_agents._shell._types",
    "trio_agents._shell._spill", "trio_agents._shell._dumpable",
    "trio_agents._shell._sandbox_policy", "trio_agents._agent._events",
    "trio_agents._agent._turn_events", "trio_agents._agent._turn_result",
    "trio_agents._agent._inbox", "trio_agents.acp._jsonrpc", "trio_agents.acp._params",
    "trio_agents.acp._prompt", "trio_agents.acp._listing", "trio_agents.acp._frames",
    "trio_agents.acp._outcomes",
    "trio_agents._model._seam", "trio_agents._agent._options", "trio_agents._store._records",
    "trio_agents._agent._approval", "trio_agents._shell._readable", "trio_agents._mcp._config",
    "trio_agents._store._record_shape", "trio_agents._store._errors",
    "trio_agents._store._claims", "trio_agents._store._pg_schema", "trio_agents._store._pg_claims",
    "trio_agents._store._session", "trio_agents._model._sse", "trio_agents._agent._status",
    "trio_agents._tool._seam", "trio_agents._tool._docstring", "trio_agents._tool._schema",
    "trio_agents._tool._edit", "trio_agents._agent._system_prompt",
    "trio_agents._store._transcript",
    "trio_agents._tracing", "trio_agents._frozen", "trio_agents._secret_paths",
    "agent_conformance._names", "agent_conformance._vocabulary", "agent_conformance._procfs",
    "agent_conformance._acp._lines", "agent_conformance._reference", "agent_conformance._history",
    "agent_conformance._observer", "agent_conformance._features",
    "agent_conformance._approval_checks", "agent_conformance._acp._wire",
    "agent_conformance._acp._schema", "agent_conformance._acp._procs",
    "agent_conformance._acp._responses",
    "agent_conformance._acp._properties", "agent_conformance._acp._permission_rules",
    "agent_conformance._mcp_properties", "agent_conformance._function_properties",
    "agent_conformance._function_specs", "agent_conformance._model_properties",
    "agent_conformance._verdicts", "agent_conformance._acp._requirements",
    "agent_conformance._acp._report", "agent_conformance._acp._report_html",
    "agent_conformance._acp._echo_server", "agent_conformance._acp._anthropic",
    "agent_conformance._acp._framing", "agent_conformance._acp._gemini",
]  # fmt: skip


def layer_of(name: str) -> int:
    """The index in LAYERS of the module `name` (dotted, with its package): the layer of the
    pattern that names it exactly, or else of the longest pattern that matches it."""
    matches = [
        (pattern == name, len(pattern), index)
        for index, (_, patterns) in enumerate(LAYERS)
        for pattern in patterns
        if pattern == name or (pattern.endswith("*") and name.startswith(pattern[:-1]))
    ]
    if not matches:
        raise AssertionError(f"{name} has no layer: add it to LAYERS in {__file__}")
    return max(matches)[2]


def source_files(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of both packages under `root` (the checkout), by dotted name."""
    found: dict[str, pathlib.Path] = {}
    for top in (RUNTIME, SUITE):
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def is_room(name: str, path: pathlib.Path) -> bool:
    """A sub-package that only names its room: its `__init__` is a docstring."""
    return path.name == "__init__.py" and name.count(".") == 1 and "._" in name


def render_map(root: pathlib.Path) -> str:
    """The README's map of the two packages: each layer, lowest first, and under it its
    modules folder by folder (`folder/  name name ...`; `__init__` for a namespace)."""
    by_layer: dict[int, dict[str, list[str]]] = {}
    for name, path in source_files(root).items():
        if is_room(name, path):
            continue
        folder = str(path.parent.relative_to(root)) + "/"
        by_layer.setdefault(layer_of(name), {}).setdefault(folder, []).append(path.stem)
    lines: list[str] = []
    for index, (layer, _) in enumerate(LAYERS):
        lines.append(layer)
        for folder, stems in sorted(by_layer.get(index, {}).items()):
            row = f"    {folder:<28}"
            for stem in sorted(stems):
                if len(row) + len(stem) + 1 > 96:
                    lines.append(row.rstrip())
                    row = " " * 32
                row += f" {stem}"
            lines.append(row.rstrip())
    return "\n".join(lines) + "\n"
