"""`FileTools`: the model-facing `read`, `edit` and `write` tools, confined to one working
directory.

The tools decide what may be touched; the file-access seam (`_file_access`) reads and
writes. A path is taken from the working directory when relative, then its symbolic links
are resolved, and it must lie inside the working directory (resolved too), the rule the
`bash` tool applies to a `workdir` (D456, D485): a path outside it is refused with an error
result naming both, and nothing is read or written. The access is given the resolved path.

Each result carries `details` for front ends (D520): the file and line it touched
(`locations`) and, for a change, the region it changed (`diff`: `path`, `old_text`, None
for a new file, and `new_text`), which the ACP server shows as the tool call's `diff`
content and locations, live and in a replay alike. The model reads the text only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, cast

import trio

from .._secret_paths import DEFAULT_SECRET_PATHS, expand_home, home_directory
from ._edit import Region, Replaced, changed_region, numbered, replace
from ._file_access import MAX_FILE_BYTES, FileAccess, LocalFiles
from ._seam import Tool, ToolContext, ToolResult

__all__ = ["MAX_DIFF_CHARS", "FileTools", "hidden_by", "inside"]

READ_LIMIT: Final = 2000  # lines a `read` shows when it names no limit
READ_CHARS: Final = 100_000  # what one `read` answers at most; the model pages on
MAX_DIFF_CHARS: Final = 256 * 1024
"""A changed region larger than this (old and new text together) is not kept in the
result's details: it is stored with the record, and an editor gains little from it."""


class FileTools:
    """The `read`, `edit` and `write` tools, confined to the working directory `cwd`.

    Give `file_tools.tools` to the agents that may read and change files there. `cwd` is
    taken as absolute (from the process's working directory when relative; None: the
    process's working directory now); `access` reads and writes the files (`FileAccess`;
    None: this machine's file system, in a worker thread). `hidden` gives the absolute
    paths the tools never read or change, files or directories, asked again at each call
    (a secret created later is hidden too): the ACP server and the chat give what the
    session's shell hides from its commands (the user's credentials, the session store,
    spill files; D516); None: the default sandbox policy's secret paths in the home
    directory. The tools of one instance edit
    and write one call at a time, so two calls of one step that change a file do not lose
    each other's change.

    cwd: the working directory, absolute.
    access: how the files are read and written.
    tools: the `read`, `edit` and `write` tools.

    Raises ValueError for a `cwd` that is empty or holds NUL.
    """

    def __init__(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        access: FileAccess | None = None,
        hidden: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        where = os.getcwd() if cwd is None else os.fspath(cwd)
        if not where or "\0" in where:
            raise ValueError(
                f"FileTools cwd must be a directory path, got {where!r}; give the directory "
                "the tools may read and change"
            )
        self.cwd = os.path.abspath(where)
        self.access: FileAccess = access if access is not None else LocalFiles()
        self.hidden: Callable[[], Iterable[str]] = hidden if hidden is not None else _secrets
        # Edits and writes one at a time: an edit reads, then writes the whole file.
        changing = trio.Lock()
        self.tools: tuple[Tool, ...] = (
            _Read(self, changing),
            _Edit(self, changing),
            _Write(self, changing),
        )


def _error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


def inside(root: str, path: str) -> tuple[str, str] | str:
    """(`root` resolved, `path` joined to it and resolved) if that lies inside it, else why
    not, as the model reads it. Touches the disk (symbolic links): call it off the event
    loop."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, path))
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        return (
            f"path {path!r} is outside the working directory {real_root}: give a path "
            "inside it, or relative to it"
        )
    return real_root, real


def _secrets() -> Iterable[str]:
    """The default sandbox policy's secret paths, `~` taken as this process's HOME."""
    home = home_directory()
    found = (expand_home(raw, home) for raw in DEFAULT_SECRET_PATHS)
    return [path for path in found if path is not None]


def hidden_by(path: str, hidden: Iterable[str]) -> str | None:
    """The hidden path (resolved) that `path` (resolved) is, or lies under; None if none.
    Touches the disk (symbolic links): call it off the event loop."""
    for raw in hidden:
        target = os.path.realpath(raw)
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return target
    return None


def _path_argument(arguments: Mapping[str, Any]) -> str | ToolResult:
    path = arguments.get("path")
    if isinstance(path, str) and path and "\0" not in path:
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            pass  # a lone surrogate: no file name can hold it
        else:
            return path
    return _error(f"invalid path {path!r}: give a file path inside the working directory")


def _whole(arguments: Mapping[str, Any], name: str, default: int) -> int | ToolResult:
    value = arguments.get(name, default)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return _error(f"invalid {name} {value!r}: give a whole number of 1 or more")


def _failure(verb: str, path: str, exc: Exception) -> ToolResult:
    """An access's error as the model reads it."""
    if isinstance(exc, FileNotFoundError):
        return _error(f"cannot {verb} {path}: there is no such file")
    if isinstance(exc, IsADirectoryError):
        return _error(f"cannot {verb} {path}: it is a directory, not a file")
    if isinstance(exc, OSError):
        return _error(f"cannot {verb} {path}: {exc.strerror or exc}")
    if verb == "read" or verb == "edit":
        return _error(f"cannot {verb} {path}: it is not UTF-8 text ({exc})")
    return _error(f"cannot {verb} {path}: the text is not valid Unicode ({exc})")


def _change(path: str, region: Region) -> dict[str, Any]:
    """A change's details: its first changed line and, unless too large, the region it
    changed."""
    details: dict[str, Any] = {"locations": [{"path": path, "line": region.changed}]}
    size = len(region.old_text or "") + len(region.new_text)
    if size <= MAX_DIFF_CHARS:
        details["diff"] = {"path": path, "old_text": region.old_text, "new_text": region.new_text}
    return details


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


class _FileTool:
    name = ""
    description = ""
    parameters: Mapping[str, Any] = {}

    def __init__(self, owner: FileTools, changing: trio.Lock) -> None:
        self._owner = owner
        self._changing = changing

    async def __call__(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        requested = _path_argument(arguments)
        if isinstance(requested, ToolResult):
            await trio.lowlevel.checkpoint()
            return requested
        owner = self._owner
        place = await trio.to_thread.run_sync(inside, owner.cwd, requested)
        if isinstance(place, str):
            return _error(place)
        path = place[1]
        secret = await trio.to_thread.run_sync(hidden_by, path, tuple(owner.hidden()))
        if secret is not None:
            return _error(
                f"path {requested!r} is hidden from this session's tools ({secret} holds "
                "credentials or session data, which its commands cannot see either)"
            )
        return await self.run(path, arguments)

    async def run(
        self, path: str, arguments: Mapping[str, Any]
    ) -> ToolResult:  # pragma: no cover - overridden
        raise NotImplementedError


class _Read(_FileTool):
    name = "read"
    description = (
        "Read a text file, its lines numbered (the numbers are not part of the file). A "
        f"relative path is taken from the working directory. Shows {READ_LIMIT} lines unless "
        "told otherwise: page on with offset (the first line, from 1) and limit."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file to read."},
            "offset": {"type": "integer", "minimum": 1, "description": "The first line, from 1."},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    async def run(self, path: str, arguments: Mapping[str, Any]) -> ToolResult:
        offset = _whole(arguments, "offset", 1)
        limit = _whole(arguments, "limit", READ_LIMIT)
        if isinstance(offset, ToolResult) or isinstance(limit, ToolResult):
            await trio.lowlevel.checkpoint()
            return offset if isinstance(offset, ToolResult) else cast("ToolResult", limit)
        try:
            text = await self._owner.access.read_text(path)
        except (OSError, ValueError) as exc:
            return _failure("read", path, exc)
        body, last, total = numbered(text, offset=offset, limit=limit, max_chars=READ_CHARS)
        details = {"locations": [{"path": path, "line": offset}]}
        if total == 0:
            return ToolResult(f"{path} is empty", details=details)
        if offset > total:
            return _error(f"offset {offset} is past the end of {path}: it has {_lines(total)}")
        if offset > 1 or last < total:
            body += f"\n[lines {offset}-{last} of {total}"
            body += f"; read on with offset {last + 1}]" if last < total else "]"
        return ToolResult(body, details=details)


class _Edit(_FileTool):
    name = "edit"
    description = (
        "Change a text file by replacing old_string, which must occur exactly once (or set "
        "replace_all), with new_string. Give old_string exactly as the file has it, without "
        "the line numbers read shows. A relative path is taken from the working directory."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file to change."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence rather than exactly one.",
            },
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    async def run(self, path: str, arguments: Mapping[str, Any]) -> ToolResult:
        old, new = arguments.get("old_string"), arguments.get("new_string")
        every = arguments.get("replace_all", False)
        if not isinstance(old, str):
            problem = f"invalid old_string {old!r}: give the exact text to replace"
        elif not isinstance(new, str):
            problem = f"invalid new_string {new!r}: give the text to put in its place"
        elif not isinstance(every, bool):
            problem = f"invalid replace_all {every!r}: give true or false"
        else:
            return await self._edit(path, old, new, every=every)
        await trio.lowlevel.checkpoint()
        return _error(problem)

    async def _edit(self, path: str, old: str, new: str, *, every: bool) -> ToolResult:
        owner = self._owner
        async with self._changing:
            try:
                text = await owner.access.read_text(path)
            except (OSError, ValueError) as exc:
                return _failure("edit", path, exc)
            outcome = replace(text, old, new, replace_all=every)
            if not isinstance(outcome, Replaced):
                return _error(f"cannot edit {path}: {outcome}")
            try:
                await owner.access.write_text(path, outcome.text)
            except (OSError, ValueError) as exc:
                return _failure("write", path, exc)
        region = changed_region(text, outcome.text)
        times = "1 occurrence" if outcome.count == 1 else f"{outcome.count} occurrences"
        return ToolResult(
            f"edited {path}: replaced {times}, the first at line {outcome.line}",
            details=_change(path, region),
        )


class _Write(_FileTool):
    name = "write"
    description = (
        "Write a text file whole: create it, or replace what it holds. Prefer edit to "
        "change part of a file. A relative path is taken from the working directory."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file to write."},
            "content": {"type": "string", "description": "The file's whole new text."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    async def run(self, path: str, arguments: Mapping[str, Any]) -> ToolResult:
        content = arguments.get("content")
        if not isinstance(content, str):
            await trio.lowlevel.checkpoint()
            return _error(f"invalid content {content!r}: give the file's whole text")
        if len(content.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
            await trio.lowlevel.checkpoint()
            return _error(f"content is larger than the {MAX_FILE_BYTES} bytes a file may have")
        owner = self._owner
        async with self._changing:
            before: str | None = None
            known = True
            try:
                before = await owner.access.read_text(path)
            except FileNotFoundError:
                pass  # a new file
            except (OSError, ValueError):
                known = False  # binary, too large, unreadable: replaced all the same
            try:
                await owner.access.write_text(path, content)
            except (OSError, ValueError) as exc:
                return _failure("write", path, exc)
        lines = _lines(content.count("\n") + (0 if content.endswith("\n") or not content else 1))
        if not known:
            return ToolResult(
                f"wrote {path} ({lines}), replacing what it held",
                details={"locations": [{"path": path, "line": 1}]},
            )
        what = "a new file" if before is None else "replacing what it held"
        return ToolResult(
            f"wrote {path} ({lines}, {what})",
            details=_change(path, changed_region(before, content)),
        )
