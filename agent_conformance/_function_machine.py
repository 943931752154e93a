"""The function machine: random programs over tools made from typed functions by the
`function_tool` under test (default: the built-in one), each function written as users
write them and called as models call them.

    rules: define a function and make it a tool / apply it to a function it must refuse /
           call a tool with valid arguments / with invalid ones / cancel a call of a plain
           `def` while it runs

Each check is a named property of a rule of the contract (`_function_properties`):

- F4: the schema has one property per parameter, of its type (JSON values of the type
  validate, others do not, nested dataclasses refuse other keys), required unless it has a
  default, the default and the description there; the name and description as given; a
  signature without a schema is refused at once, in one line naming the function and the
  parameter;
- F5: valid arguments reach the function converted (`"3"` for an int is 3), a left-out one
  as its default; invalid ones answer one error line naming the argument, and the function
  is not called;
- F6: the context reaches a ToolContext parameter; a str, a ToolResult, JSON, None and an
  exception become the results the rule names;
- F7: a cancelled call of a plain `def` stays open until the function returns, and its
  value is the call's result.

The functions are compiled from source (`_function_specs.source`), so their signatures,
type hints and docstrings are real ones. Calls run in one trio run per example, on the
real clock: a sync function runs in a real worker thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Hashable
from typing import Annotated, Any, ClassVar, Literal

import trio
import trio.testing
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import ToolContext, ToolResult, function_tool
from trio_agents.testing import TrioHost, WallClock

from ._function_checks import Json, check_refusal, check_schema, outcome_of
from ._function_properties import (
    ARGUMENTS_CONVERTED,
    INVALID_ARGUMENTS_REFUSED,
    RESULT_AS_RETURNED,
    SCHEMA_FROM_SIGNATURE,
    SYNC_CALL_NOT_ABANDONED,
)
from ._function_properties import PROPERTIES as PROPERTIES
from ._function_specs import (
    KINDS,
    NO_DEFAULT,
    Color,
    Described,
    FunctionSpec,
    Param,
    Point,
    canonical,
    lax,
    received,
    source,
    wrong,
)
from ._machine import ConformanceMachine, rule
from ._targets import FunctionToolFactory

__all__ = ["PROPERTIES", "FunctionMachine", "function_settings"]

RECORDER = "_conformance_called"
HOLD_WITHIN = 10.0  # real seconds for a held function's thread to start, and to end
FUNCTION_NAMES = ("add", "lookup", "fetch_page", "run2")
PARAM_NAMES = ("a", "path", "count", "color", "where", "tags", "flag", "limit")
DEFAULTS: dict[str, Any] = {
    "int": 3,
    "str": "x",
    "float": 0.5,
    "bool": False,
    "enum": Color.GREEN,
    "optional": None,
    "any": None,
}
SUMMARIES = ("Add two numbers.", "Look a thing up. It may take a while.", "Fetch a page.")
Fault = Literal["wrong-type", "missing", "unknown", "not-an-object"]
Refused = Literal[
    "star-args", "star-kwargs", "no-hint", "two-contexts", "doc-names-missing", "generator"
]
REFUSALS: tuple[Refused, ...] = (
    "star-args",
    "star-kwargs",
    "no-hint",
    "two-contexts",
    "doc-names-missing",
    "generator",
)


def function_settings(base: Settings) -> Settings:
    """Calls of functions in one process cost milliseconds: the examples of `base`, in
    programs of at most 20 steps (three tools, their calls and a cancel or two)."""
    return Settings(base, stateful_step_count=min(base.stateful_step_count, 20))


def _params(data: st.DataObject) -> tuple[Param, ...]:
    names = data.draw(
        st.lists(st.sampled_from(PARAM_NAMES), unique=True, max_size=4), label="parameters"
    )
    params: list[Param] = []
    for name in names:
        kind = data.draw(st.sampled_from(KINDS), label=f"{name}'s type")
        default = NO_DEFAULT
        if kind in DEFAULTS and data.draw(st.booleans(), label=f"{name} has a default"):
            default = DEFAULTS[kind]
        # "google" stands for the docstring: the function's style says which one.
        described: Described = data.draw(
            st.sampled_from(("none", "annotated", "google")), label=f"{name} described by"
        )
        params.append(
            Param(
                name,
                kind,
                default,
                described,
                f"what {name} is for.",
                data.draw(st.booleans(), label=f"{name} keyword-only"),
            )
        )
    return tuple(params)


class FunctionMachine(ConformanceMachine):
    """Tools made by `factory` (the `function_tool` under test) from functions drawn as
    users write them, called as models call them, and a call of a sync one cancelled.

    factory: the maker under test (default: `function_tool`).
    stats: counts examples and checked steps; give a subclass its own dict to count one run.
    histories: fingerprints of the distinct rule traces produced.
    """

    factory: ClassVar[FunctionToolFactory] = staticmethod(function_tool)
    stats: ClassVar[dict[str, int]] = {"examples": 0, "checks": 0}
    histories: ClassVar[set[int]] = set()

    def __init__(self) -> None:
        super().__init__(TrioHost(WallClock(), call_timeout=60.0, stall_timeout=60.0))
        self.tools: list[tuple[FunctionSpec, Any]] = []
        self.seen: list[tuple[str, dict[str, Any], object]] = []
        self.answers: list[object] = []
        self.trace: list[str] = []
        self._held: tuple[threading.Event, threading.Event] | None = None
        self._calls = 0

    # -- the functions' body ----------------------------------------------------------------

    def _called(self, name: str, arguments: dict[str, Any], context: object) -> object:
        """What every drawn function does: note its arguments, wait while held, and return
        (or raise) the answer the rule chose. Runs in the function's thread for a sync one."""
        self.seen.append((name, arguments, context))
        held = self._held
        if held is not None:
            started, release = held
            started.set()
            release.wait(HOLD_WITHIN)
        answer = self.answers.pop(0) if self.answers else "done"
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _compile(self, spec: FunctionSpec, text: str) -> Any:
        namespace: dict[str, Any] = {
            "__name__": "conformance_functions",
            "Annotated": Annotated,
            "Any": Any,
            "Color": Color,
            "Point": Point,
            "ToolContext": ToolContext,
            RECORDER: self._called,
        }
        exec(compile(text, f"<function {spec.name}>", "exec"), namespace)
        return namespace[spec.name]

    # -- rules -------------------------------------------------------------------------------

    @precondition(lambda self: len(self.tools) < 3)
    @rule(data=st.data())
    def define(self, data: st.DataObject) -> None:
        """Write a function and make it a tool: the schema, name and description (F4)."""
        params = _params(data)
        context = None
        if data.draw(st.booleans(), label="takes a ToolContext"):
            at = data.draw(st.integers(0, len(params)), label="context at")
            context = (at, data.draw(st.booleans(), label="context keyword-only"))
        spec = FunctionSpec(
            name=data.draw(st.sampled_from(FUNCTION_NAMES), label="name"),
            params=params,
            is_async=data.draw(st.booleans(), label="async"),
            summary=data.draw(st.none() | st.sampled_from(SUMMARIES), label="summary"),
            override=data.draw(st.none() | st.just("renamed-tool"), label="name="),
            # An empty `description=` is given too: it is the description, not "none given".
            description=data.draw(
                st.none() | st.sampled_from(("Said by the caller.", "")), label="description="
            ),
            context=context,
            returns=data.draw(
                st.sampled_from(("str", "tool-result", "json", "none", "raise")), label="returns"
            ),
            style=data.draw(st.sampled_from(("google", "sphinx")), label="docstring style"),
        )
        text = source(spec, RECORDER)
        function = self._compile(spec, text)
        kwargs = {"name": spec.override} if spec.override is not None else {}
        if spec.description is not None:
            kwargs["description"] = spec.description
        try:
            tool = type(self).factory(function, **kwargs)
        except Exception as exc:  # a function that can become a tool, refused: the finding
            SCHEMA_FROM_SIGNATURE.fail(
                f"applied to\n{text}it raised {type(exc).__name__}: {exc}; every parameter "
                "of it has a JSON type and its docstring describes only parameters it has"
            )
        check_schema(spec, tool, text)
        self.tools.append((spec, tool))
        self.trace.append(f"define {spec.tool_name}")

    @rule(refused=st.sampled_from(REFUSALS))
    def define_refused(self, refused: Refused) -> None:
        """Apply the target to a function whose signature cannot become a schema (F4)."""
        text, param = _refused_source(refused)
        function = self._compile(FunctionSpec("broken", ()), text)
        try:
            type(self).factory(function)
        except Exception as exc:  # the error is what is judged
            check_refusal(text, param, exc)
        else:
            check_refusal(text, param, None)
        self.trace.append(f"refused {refused}")

    @precondition(lambda self: bool(self.tools))
    @rule(data=st.data())
    def call(self, data: st.DataObject) -> None:
        """Call a tool with valid arguments: converted, defaulted (F5); its context and its
        answer as the rule says (F6)."""
        # Indices and names, not the objects: a printed reproduction replays the draws.
        spec, tool = self.tools[data.draw(st.sampled_from(range(len(self.tools))), label="tool")]
        arguments: dict[str, Any] = {}
        wanted: dict[str, Any] = {}
        for param in spec.params:
            if not param.required and data.draw(st.booleans(), label=f"leave out {param.name}"):
                wanted[param.name] = param.default
                continue
            value = canonical(param.kind, data.draw(st.integers(0, 3), label=param.name))
            sent = lax(param.kind, value) if data.draw(st.booleans(), label="lax") else value
            arguments[param.name] = sent
            wanted[param.name] = received(param.kind, value)
        answer, expected = self._answer(spec)
        self.answers = [answer]
        context = self._context()
        before = len(self.seen)
        outcome = self.host.call(_invoke, tool, arguments, context)
        told = f"{spec.tool_name}({json.dumps(arguments)})"
        got = self.seen[before:]
        ARGUMENTS_CONVERTED.check(
            len(got) == 1,
            lambda: f"{told} with valid arguments called the function {len(got)} time(s)",
        )
        _, passed, passed_context = got[0]
        ARGUMENTS_CONVERTED.check(
            passed == wanted and all(type(passed[k]) is type(v) for k, v in wanted.items()),
            lambda: f"{told}: the function received {passed!r}, not {wanted!r}",
        )
        if spec.context is not None:
            RESULT_AS_RETURNED.check(
                passed_context is context,
                lambda: (
                    f"{told}: its ToolContext parameter got {passed_context!r}, not {context!r}"
                ),
            )
        RESULT_AS_RETURNED.check(
            outcome == expected,
            lambda: (
                f"{told}: the function returned {answer!r}; the call answered {outcome!r}, "
                f"not {expected!r}"
            ),
        )
        self.trace.append(f"call {spec.tool_name}")

    @precondition(lambda self: bool(self.tools))
    @rule(
        data=st.data(), fault=st.sampled_from(("wrong-type", "missing", "unknown", "not-an-object"))
    )
    def call_invalid(self, data: st.DataObject, fault: Fault) -> None:
        """Call a tool with invalid arguments: one error line naming the argument, and the
        function not called (F5)."""
        spec, tool = self.tools[data.draw(st.sampled_from(range(len(self.tools))), label="tool")]
        arguments: Any = {p.name: canonical(p.kind, 0) for p in spec.params}
        typed = {p.name: p for p in spec.params if wrong(p.kind) is not None}
        required = [p.name for p in spec.params if p.required]
        named: str | None = None
        if fault == "wrong-type" and typed:
            named = data.draw(st.sampled_from(sorted(typed)), label="wrong")
            arguments[named] = wrong(typed[named].kind)
        elif fault == "missing" and required:
            named = data.draw(st.sampled_from(required), label="missing")
            del arguments[named]
        elif fault == "not-an-object":
            arguments = [arguments]
        else:
            arguments["surplus"], named = 1, "surplus"
        before = len(self.seen)
        outcome = self.host.call(_invoke, tool, arguments, self._context())
        told = f"{spec.tool_name}({json.dumps(arguments)}) ({fault})"
        INVALID_ARGUMENTS_REFUSED.check(
            len(self.seen) == before,
            lambda: f"{told} ran the function with {self.seen[-1][1]!r}",
        )
        content, is_error = outcome
        lead = f"invalid arguments for {spec.tool_name} (it was not run): "
        INVALID_ARGUMENTS_REFUSED.check(
            is_error
            and isinstance(content, str)
            and "\n" not in content
            and content.startswith(lead)
            and (named is None or named in content[len(lead) :]),
            lambda: (
                f"{told} answered {outcome!r}; it must be an error, one line "
                f"{lead!r} then the problems" + (f", naming {named!r}" if named else "")
            ),
        )
        self.trace.append(f"call {spec.tool_name} {fault}")

    @precondition(lambda self: any(not spec.is_async for spec, _ in self.tools))
    @rule(data=st.data())
    def cancel_sync_call(self, data: st.DataObject) -> None:
        """Cancel a call of a plain `def` while it runs: the call stays open until the
        function returns, and its value is the result (F7)."""
        sync = [i for i, (spec, _) in enumerate(self.tools) if not spec.is_async]
        spec, tool = self.tools[data.draw(st.sampled_from(sync), label="tool")]
        arguments = {p.name: canonical(p.kind, 1) for p in spec.params if p.required}
        answer, expected = self._answer(spec)
        self.answers = [answer]
        open_while_held, outcome = self.host.call(self._cancel_held, tool, arguments)
        told = f"a call of the plain def {spec.tool_name} cancelled while its function ran"
        SYNC_CALL_NOT_ABANDONED.check(
            open_while_held,
            lambda: f"{told} ended ({outcome!r}) before the function returned",
        )
        SYNC_CALL_NOT_ABANDONED.check(
            outcome == expected,
            lambda: (
                f"{told}: the function returned {answer!r}; the call gave {outcome!r}, "
                f"not {expected!r}"
            ),
        )
        self.trace.append(f"cancel {spec.tool_name}")

    # -- helpers -----------------------------------------------------------------------------

    def _context(self) -> ToolContext:
        self._calls += 1
        return ToolContext("fn-agent", f"call-{self._calls}", 1, self._calls)

    def _answer(self, spec: FunctionSpec) -> tuple[object, tuple[object, bool]]:
        """What the function returns for this call, and the (content, is_error) F6 makes
        of it."""
        n = self._calls + 1
        match spec.returns:
            case "str":
                return f"done {n}", (f"done {n}", False)
            case "tool-result":
                return ToolResult(f"said {n}", is_error=n % 2 == 0), (f"said {n}", n % 2 == 0)
            case "json":
                value = {"n": n, "items": [1, "two", None]}
                return value, (Json(value), False)
            case "none":
                return None, (Json(None), False)
            case _:
                return ValueError(f"boom {n}"), (f"ValueError: boom {n}", True)

    async def _cancel_held(self, tool: Any, arguments: dict[str, Any]) -> tuple[bool, object]:
        started, release = threading.Event(), threading.Event()
        self._held = (started, release)
        outcome: list[object] = []
        done = trio.Event()
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                try:
                    outcome.append(await _invoke(tool, arguments, self._context()))
                except trio.Cancelled:
                    outcome.append("Cancelled")
                    raise
            done.set()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await trio.to_thread.run_sync(started.wait, HOLD_WITHIN)
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                open_while_held = not done.is_set()
                release.set()
        finally:
            release.set()
            self._held = None
        return open_while_held, outcome[0] if outcome else None

    # -- ConformanceMachine --------------------------------------------------------------------

    def _verify(self) -> None:
        """Every check is made by the rule that calls."""

    def _history(self) -> Hashable | None:
        return tuple(self.trace) or None

    def _after_close(self) -> None:
        if self._held is not None:
            self._held[1].set()


async def _invoke(tool: Any, arguments: Any, context: ToolContext) -> tuple[object, bool]:
    """A call's answer as (content, is_error); an exception is the error result an agent
    makes of it, `ExcType: message`, as for any tool (F6)."""
    try:
        return outcome_of(await tool(arguments, context))
    except Exception as exc:  # the agent's conversion, which the tool may leave to it
        return f"{type(exc).__name__}: {exc}", True


def _refused_source(refused: Refused) -> tuple[str, str | None]:
    """A function `broken` that `function_tool` must refuse, and the parameter the error
    must name (None: the function as a whole)."""
    match refused:
        case "star-args":
            return "def broken(a: int, *rest: int) -> str:\n    return ''\n", "rest"
        case "star-kwargs":
            return "def broken(a: int, **options: int) -> str:\n    return ''\n", "options"
        case "no-hint":
            return "def broken(a: int, loose) -> str:\n    return ''\n", "loose"
        case "two-contexts":
            text = "def broken(first: ToolContext, second: ToolContext) -> str:\n    return ''\n"
            return text, "second"
        case "doc-names-missing":
            doc = '    """Do it.\n\n    Args:\n        ghost: not a parameter.\n    """\n'
            return "def broken(a: int) -> str:\n" + doc + "    return ''\n", "ghost"
        case _:
            return "def broken(a: int) -> Any:\n    yield a\n", None
