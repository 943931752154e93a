"""A prompt's content blocks, as the text the model is given. Pure; no trio import.

`blocks(params)` reads the blocks of a `session/prompt` (already checked against the schema
by `_params`) into `Text`, `Link` and `Embedded` parts; `compose` joins them once every link
has been read (`_resources.read_resource`), so the reading, which the client may do for us
later (`fs/read_text_file`), stays out of this module. A resource reaches the model between
markers that name it; one that could not be read is a one-line note saying why, never an
error: the prompt still runs, and the model can tell the user.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ._jsonrpc import JsonRpcError

__all__ = [
    "Block",
    "Embedded",
    "Link",
    "Text",
    "blocks",
    "compose",
    "has_links",
    "resource_note",
    "resource_text",
]


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Link:
    """A `resource_link`: read before the prompt is sent."""

    uri: str
    name: str


@dataclass(frozen=True, slots=True)
class Embedded:
    """A `resource` block: its text came with the prompt (None for a binary blob)."""

    uri: str
    text: str | None


Block = Text | Link | Embedded


def blocks(params: Mapping[str, Any]) -> list[Block]:
    """The prompt's blocks. Raises JsonRpcError (-32602) for an empty prompt and for images
    and audio, which this agent does not advertise."""
    raw = params.get("prompt")
    if not isinstance(raw, list) or not raw:
        raise JsonRpcError.invalid_params("prompt must be a non-empty list of content blocks")
    parts: list[Block] = []
    for index, block in enumerate(cast("list[dict[str, Any]]", raw)):
        kind = block.get("type")
        if kind == "text":
            parts.append(Text(str(block["text"])))
        elif kind == "resource_link":
            parts.append(Link(str(block["uri"]), str(block["name"])))
        elif kind == "resource":
            contents = cast("dict[str, Any]", block["resource"])
            text = contents.get("text")
            parts.append(Embedded(str(contents["uri"]), text if isinstance(text, str) else None))
        else:
            raise JsonRpcError.invalid_params(
                f"prompt[{index}]: content of type {kind!r} is not supported; send text, "
                "resource links or embedded text resources"
            )
    if not any(isinstance(part, Link | Embedded) or part.text.strip() for part in parts):
        raise JsonRpcError.invalid_params("empty prompt")
    return parts


def has_links(parts: Sequence[Block]) -> bool:
    return any(isinstance(part, Link) for part in parts)


def resource_text(uri: str, text: str) -> str:
    """A resource's text as the model sees it, between markers that name it. (A session's
    title shows it as `@name`: `trio_agents._store._base.title_of` reads this format.)"""
    newline = "" if text.endswith("\n") or not text else "\n"
    return f'\n<resource uri="{_attribute(uri)}">\n{text}{newline}</resource>\n'


def resource_note(uri: str, why: str) -> str:
    """In place of a resource that was not read: why, on one line."""
    return f'\n<resource uri="{_attribute(uri)}" unread="{_attribute(why)}"/>\n'


def _attribute(text: str) -> str:
    # Only what would end the attribute or start markup: an apostrophe stays as typed.
    line = " ".join(text.split())
    return (
        line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def compose(parts: Sequence[Block], read: Mapping[str, str]) -> str:
    """The prompt's text: text as it came, each embedded resource's text, and each link as
    `read` maps its uri (a `resource_text` or a `resource_note`)."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, Text):
            out.append(part.text)
        elif isinstance(part, Embedded):
            if part.text is None:
                out.append(resource_note(part.uri, "binary content is not given to the model"))
            else:
                out.append(resource_text(part.uri, part.text))
        else:
            out.append(read[part.uri])
    return "".join(out)
