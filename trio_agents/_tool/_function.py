"""Tools from typed functions: `function_tool` reads a function's signature and docstring once,
and the `FunctionTool` it makes checks each call's arguments before the function runs
(contract, "Tools from functions")."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, overload

import trio

from ._schema import label, read_signature
from ._seam import ToolContext, ToolResult

__all__ = ["FunctionTool", "function_tool"]

# What OpenAI-compatible endpoints accept as a function's name.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class FunctionTool:
    """A Tool made from a typed function; `function_tool` makes one.

    name: the function's name, or the `name` given.
    description: the `description` given, or the docstring's text before its sections.
    parameters: the JSON schema of the arguments, from the signature (a ToolContext
        parameter is not in it).
    function: the function, to call it directly.

    Raises TypeError (one line naming the function and the parameter) for a function whose
    signature cannot become a schema, and ValueError for a name endpoints refuse.
    """

    __slots__ = ("_is_async", "_signature", "description", "function", "name", "parameters")

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        where = f"function_tool: {label(function)}"
        if not callable(function) or inspect.isclass(function):
            raise TypeError(f"{where} is not a function; decorate a def or an async def")
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            raise TypeError(f"{where} is a generator; a tool returns one result, so return it")
        tool = name if name is not None else getattr(function, "__name__", "")
        if not isinstance(tool, str) or not _NAME.fullmatch(tool):
            raise ValueError(
                f"{where}: tool name {tool!r} is not 1-64 letters, digits, '_' or '-'; pass name="
            )
        self._signature = read_signature(function, tool)
        self._is_async = _is_async(function)
        self.function = function
        self.name = tool
        self.description = self._signature.description if description is None else description
        self.parameters: Mapping[str, Any] = self._signature.parameters

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"

    async def __call__(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> ToolResult | str:
        """Validate `arguments`, then call the function with them (and `context` for its
        ToolContext parameter). Invalid arguments answer an error result and the function
        is not called. An async function runs in this task; a sync one in a worker thread
        that a cancel waits for (design D283). Always a checkpoint."""
        bound = self._signature.bind(arguments, context)
        if isinstance(bound, str):
            await trio.lowlevel.checkpoint()
            return ToolResult(bound, is_error=True)
        if self._is_async:
            await trio.lowlevel.checkpoint_if_cancelled()
            value = await self.function(*bound.args, **bound.kwargs)
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            call = functools.partial(self.function, *bound.args, **bound.kwargs)
            value = await trio.to_thread.run_sync(call, abandon_on_cancel=False)
        return _as_result(value)


@overload
def function_tool(
    function: Callable[..., Any], /, *, name: str | None = None, description: str | None = None
) -> FunctionTool: ...


@overload
def function_tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a typed function (async, or sync to run in a worker thread) a Tool.

    Use it bare (`@function_tool`), with options (`@function_tool(name=..., description=...)`)
    or as a call (`function_tool(f)`). The schema comes from the signature: a parameter
    with a default is optional; `Annotated[T, "text"]` or the docstring's `Args:` section
    describes it. A parameter annotated ToolContext receives the call's context.
    """
    if function is None:
        return functools.partial(FunctionTool, name=name, description=description)
    return FunctionTool(function, name=name, description=description)


def _is_async(function: Callable[..., Any]) -> bool:
    call = getattr(function, "__call__", None)  # noqa: B004 - a callable object's own method
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def _as_result(value: object) -> ToolResult | str:
    """A str or ToolResult as it is; anything else as JSON, which a model reads best."""
    if isinstance(value, ToolResult | str):
        return value
    import pydantic_core  # lazily: pydantic's import costs ~0.1 s (D280)

    return pydantic_core.to_json(value, fallback=repr).decode()
