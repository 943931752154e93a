"""Seeded defects of the function machine's target: makers of tools from typed functions,
each the built-in `function_tool` with one mistake (F4-F7)."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

import trio

from trio_agents import ToolContext, ToolResult
from trio_agents._tool._function import FunctionTool

from ._seeded import Seeded


def as_result(value: object) -> ToolResult | str:
    """What the built-in makes of a function's value (F6)."""
    return value if isinstance(value, ToolResult | str) else json.dumps(value)


class _DefaultsUnlisted(FunctionTool):
    """Leaves the defaults out of the schema (they are the function's business, its author
    thought)."""

    def __init__(self, function: Callable[..., Any], **options: Any) -> None:
        super().__init__(function, **options)
        properties = {
            name: {key: value for key, value in prop.items() if key != "default"}
            for name, prop in self.parameters.get("properties", {}).items()
        }
        self.parameters = {**self.parameters, "properties": properties}


def _generators_collected(function: Callable[..., Any], **options: Any) -> FunctionTool:
    """Takes a generator as a function whose answer is the list of what it yields."""
    if inspect.isgeneratorfunction(function):
        generator = function

        @functools.wraps(generator)
        def collected(*args: Any, **kwargs: Any) -> list[Any]:
            return list(generator(*args, **kwargs))

        function = collected
    return FunctionTool(function, **options)


class _ArgumentsAsSent(FunctionTool):
    """Checks the arguments, then calls the function with them as the model sent them."""

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        bound = self._signature.bind(arguments, context)
        if isinstance(bound, str):
            return await super().__call__(arguments, context)
        converted = inspect.signature(self.function).bind(*bound.args, **bound.kwargs)
        for name in converted.arguments:
            if name in arguments:
                converted.arguments[name] = arguments[name]
        call = functools.partial(self.function, *converted.args, **converted.kwargs)
        if inspect.iscoroutinefunction(self.function):
            value = await call()
        else:
            value = await trio.to_thread.run_sync(call)
        return as_result(value)


class _SurplusDropped(FunctionTool):
    """Drops the arguments the function does not have before checking the rest (models add
    keys, its author thought)."""

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        # The machine also sends arguments that are not an object: left to the real check.
        if isinstance(arguments, dict):
            known = set(self.parameters.get("properties", {}))
            arguments = {k: v for k, v in arguments.items() if k in known}
        return await super().__call__(arguments, context)


class _NoneAsNothing(FunctionTool):
    """Answers a function that returned None with an empty text."""

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        result = await super().__call__(arguments, context)
        return "" if result == "null" else result


class _ThreadAbandoned(FunctionTool):
    """Lets a cancel abandon a sync function's thread: the call ends at once."""

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        if inspect.iscoroutinefunction(self.function):
            return await super().__call__(arguments, context)
        bound = self._signature.bind(arguments, context)
        if isinstance(bound, str):
            return await super().__call__(arguments, context)
        call = functools.partial(self.function, *bound.args, **bound.kwargs)
        value = await trio.to_thread.run_sync(call, abandon_on_cancel=True)
        return as_result(value)


def _context_doc_refused(function: Callable[..., Any], **options: Any) -> FunctionTool:
    """Checks the docstring's parameters against those of the schema: one that documents
    its ToolContext parameter is refused as describing a parameter it does not have."""
    hints = inspect.get_annotations(function, eval_str=True)
    doc = inspect.getdoc(function) or ""
    for name, hint in hints.items():
        if hint is ToolContext and (f"    {name}:" in doc or f":param {name}:" in doc):
            where = f"function_tool: {function.__name__}"
            raise TypeError(f"{where}: its docstring describes {name!r}, not a parameter")
    return FunctionTool(function, **options)


defaults_unlisted = _DefaultsUnlisted
context_doc_refused = _context_doc_refused
generators_collected = _generators_collected
arguments_as_sent = _ArgumentsAsSent
surplus_dropped = _SurplusDropped
none_as_nothing = _NoneAsNothing
thread_abandoned = _ThreadAbandoned

SEEDED: tuple[Seeded, ...] = (
    Seeded("defaults-unlisted", defaults_unlisted, "function", "schema-from-signature"),
    Seeded("context-doc-refused", context_doc_refused, "function", "schema-from-signature"),
    Seeded("generators-collected", generators_collected, "function", "signature-refused-at-once"),
    Seeded("arguments-as-sent", arguments_as_sent, "function", "arguments-converted"),
    Seeded("surplus-dropped", surplus_dropped, "function", "invalid-arguments-refused"),
    Seeded("none-as-nothing", none_as_nothing, "function", "result-as-returned"),
    Seeded("thread-abandoned", thread_abandoned, "function", "sync-call-not-abandoned"),
)
