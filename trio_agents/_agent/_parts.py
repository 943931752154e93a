"""The checks an agent's parts pass before anything is made of them. Pure; no trio import.

An agent is made of what its caller hands `create`, `resume` or `open_agent`: a model, tools,
options, an approval and the header's `meta`. A wrong one used to be accepted and fail late,
deep inside: a dict for `options` failed the first turn and then the close, a str for
`tools` made no tools, a `datetime` in `meta` failed the store's commit for every session
sharing it (D383). Each is checked here, at the call, with one line naming the argument and
what to give instead. The checks look at shape, not class: any object with the methods a
part needs will do, as the protocols say.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .._frozen import freeze
from ._options import AgentOptions

__all__ = ["check_meta", "check_parts", "check_tool"]


def check_parts(*, model: Any, tools: Any, options: Any, approval: Any) -> None:
    """Raise TypeError, naming the argument, unless each part has the shape it needs."""
    if not callable(getattr(model, "stream", None)):
        raise TypeError(
            f"model must be a Model, an object with a `stream(request)` method, got {model!r}"
        )
    if isinstance(tools, str | bytes | Mapping) or not hasattr(tools, "__iter__"):
        raise TypeError(f"tools must be a sequence of tools, got {tools!r}; write [tool, ...]")
    if isinstance(tools, Iterator):
        # Taken again at every step (a live sequence may change): an iterator would be
        # used up by the first.
        raise TypeError(f"tools must be a sequence, not an iterator: {tools!r}; give a list")
    for tool in tools:
        check_tool(tool)
    if options is not None and not isinstance(options, AgentOptions):
        raise TypeError(
            f"options must be an AgentOptions, got {options!r}; write AgentOptions(...)"
        )
    if approval is not None and not all(
        callable(getattr(approval, method, None)) for method in ("restore", "settled", "remember")
    ):
        raise TypeError(f"approval must be an Approval (or None), got {approval!r}")


def check_tool(tool: Any) -> None:
    """Raise TypeError unless `tool` has what the Tool protocol asks: text `name` and
    `description`, a mapping `parameters`, and is callable."""
    name = getattr(tool, "name", None)
    if not isinstance(name, str):
        raise TypeError(
            f"a tool must have a str `name`, got {tool!r}; make tools with function_tool(fn) "
            "or a class with name, description, parameters and __call__"
        )
    if not isinstance(getattr(tool, "description", None), str):
        raise TypeError(f"tool {name!r} must have a str `description`")
    if not isinstance(getattr(tool, "parameters", None), Mapping):
        raise TypeError(f"tool {name!r} must have `parameters`, a JSON schema as a mapping")
    if not callable(tool):
        raise TypeError(f"tool {name!r} must be callable: `async def __call__(arguments, context)`")


def check_meta(meta: Any) -> None:
    """Raise TypeError unless `meta` is None or a mapping of values a header can store."""
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        raise TypeError(f"meta must be a mapping (the session header's fields), got {meta!r}")
    try:
        freeze(meta)
    except TypeError as exc:
        raise TypeError(f"meta: {exc}") from None
