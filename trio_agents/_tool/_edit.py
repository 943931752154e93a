"""What the file tools do to text: an exact replacement, the region a change touched, and a
file's lines as the model reads them. Pure; no trio import, no file system.

An edit is an exact replacement of `old_string` by `new_string`, refused when `old_string`
is absent, or occurs more than once without `replace_all`: a model that names a place
ambiguously must say more rather than have the first match changed for it. A file whose
lines end in CRLF is matched with the model's LF text turned to CRLF when the text as given
is absent, since a model writes LF whatever the file holds.

`changed_region` is what an editor is shown of a change (ACP's `diff` content): the lines
that differ, with a few lines of context each side, old and new, and the line they start
at. Not the whole file: the region is stored with the call's result, and a one-line edit of
a large file should not store the file twice.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONTEXT_LINES",
    "MAX_LINE_CHARS",
    "Region",
    "Replaced",
    "changed_region",
    "numbered",
    "replace",
]

CONTEXT_LINES = 3
MAX_LINE_CHARS = 2000  # a longer line is cut in what `read` shows (minified files)


@dataclass(frozen=True, slots=True)
class Replaced:
    """An edit's outcome: the new text, how many occurrences were replaced, and the line
    (1-based) of the first."""

    text: str
    count: int
    line: int


@dataclass(frozen=True, slots=True)
class Region:
    """The part of a file a change touched: from `line` (1-based, in both texts), the old
    lines (None: the file is new) and the new ones, context included; `changed` is the
    first line that differs."""

    line: int
    old_text: str | None
    new_text: str
    changed: int


def replace(text: str, old: str, new: str, *, replace_all: bool = False) -> Replaced | str:
    """`text` with `old` replaced by `new` (every occurrence with `replace_all`, else the
    only one), or why not, as one line the model can act on: `old` empty, equal to `new`,
    absent, or (without `replace_all`) found more than once."""
    if not old:
        return "old_string is empty: give the exact text to replace (write creates a file)"
    if old == new:
        return "old_string and new_string are the same: there is nothing to change"
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        return (
            "old_string was not found: read the file and give its text exactly, "
            "whitespace and line ends included"
        )
    if count > 1 and not replace_all:
        return (
            f"old_string occurs {count} times: give more of the surrounding text so that it "
            "occurs once, or set replace_all to replace every occurrence"
        )
    first = text.index(old)
    replaced = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return Replaced(replaced, count, text.count("\n", 0, first) + 1)


def changed_region(before: str | None, after: str, *, context: int = CONTEXT_LINES) -> Region:
    """The lines that differ between `before` (None: a new file) and `after`, with up to
    `context` unchanged lines each side. Equal texts give an empty region at line 1."""
    if before is None:
        return Region(1, None, after, 1)
    old = _lines(before)
    new = _lines(after)
    limit = min(len(old), len(new))
    head = 0
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    if head == len(old) == len(new):
        return Region(1, "", "", 1)
    start = max(0, head - context)
    keep = max(0, tail - context)  # unchanged lines at the end left out
    return Region(
        start + 1,
        "".join(old[start : len(old) - keep]),
        "".join(new[start : len(new) - keep]),
        head + 1,
    )


def numbered(
    text: str, *, offset: int = 1, limit: int | None = None, max_chars: int | None = None
) -> tuple[str, int, int]:
    """Lines `offset` (1-based) to `offset + limit - 1` of `text`, each after its number
    and a tab, as `cat -n` shows them (a line longer than MAX_LINE_CHARS cut, saying so),
    stopping before the line that would take the text past `max_chars` (never before the
    first); with the number of the last line shown and how many lines the text has."""
    lines = _lines(text)
    total = len(lines)
    end = total if limit is None else min(total, offset - 1 + limit)
    shown: list[str] = []
    size = 0
    last = offset - 1
    for number in range(offset, end + 1):
        line = lines[number - 1].removesuffix("\n").removesuffix("\r")
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [line cut at {MAX_LINE_CHARS} characters]"
        entry = f"{number:>6}\t{line}"
        size += len(entry) + 1
        if max_chars is not None and shown and size > max_chars:
            break
        shown.append(entry)
        last = number
    return "\n".join(shown), last, total


def _lines(text: str) -> list[str]:
    """`text`'s lines, each with its `\\n`: split at line feeds only (`str.splitlines` also
    splits at form feeds and U+2028, which would number lines otherwise than an editor)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
