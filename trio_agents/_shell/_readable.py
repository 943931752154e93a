"""A command's output as plain text a reader can follow. Pure; no trio import.

Programs write for terminals: colours and cursor moves (ANSI CSI sequences), window titles
and hyperlinks (OSC sequences), progress bars redrawn with a carriage return, bold made with
backspaces. An editor that shows a tool call's output is not a terminal, so the raw bytes
come out as noise (`[31mred[0m`). `readable` renders what a terminal would have shown in
the simple cases and drops the rest:

- escape sequences (CSI, OSC, DCS, SOS, PM, APC, and the two-character ones, in their
  7-bit and 8-bit forms) are removed; an OSC 8 hyperlink keeps its visible text;
- a carriage return redraws its line: what follows it replaces what was before
  (`10%\\r100%` is `100%`), and `\\r\\n` is a line end;
- a backspace moves back one character, and what follows overwrites it (`a\\ba` is `a`,
  as for the bold of a manual page);
- any other control character except newline and tab is shown, not obeyed: `^G` for a C0
  control or DEL, `\\x9b` for a C1 control.
"""

from __future__ import annotations

import re

__all__ = ["readable"]

# ESC [ or CSI (0x9b), parameters, intermediates, one final byte.
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
# OSC, DCS, SOS, PM, APC: up to the string terminator (ST, or BEL), or, for a program cut
# off mid-sequence, up to the next escape, line end or the end of the text.
_STRING = (
    r"(?:\x1b[\]P X^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*"
    r"(?:\x07|\x1b\\|\x9c|(?=[\x1b\n])|\Z)"
)
# The other escapes: ESC, intermediates, one final byte (`ESC ( B`, `ESC 7`, `ESC =`).
_SHORT = r"\x1b[\x20-\x2f]*[\x30-\x7e]"
_ESCAPES = re.compile(f"{_CSI}|{_STRING}|{_SHORT}")
# What needs more than copying: a control character other than newline and tab. Searched
# with a regular expression, so text without one costs a scan in C, not a loop in Python.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def readable(text: str) -> str:
    """`text` as a terminal would have shown it, without escape sequences, carriage-return
    redraws or backspaces, and with every other control character but newline and tab
    made visible (module docstring)."""
    if _CONTROL.search(text) is None:
        return text
    lines = _ESCAPES.sub("", text).split("\n")
    return "\n".join(
        line if _CONTROL.search(line) is None else _render_line(line) for line in lines
    )


def _render_line(line: str) -> str:
    """One line (no newline in it) as it was last drawn: the text after its last carriage
    return (a redraw replaces the line: progress bars erase what they redraw, with an
    escape this module has removed), with backspaces moving back over what follows them
    and other controls made visible."""
    drawn = [segment for segment in line.split("\r") if segment]
    last = drawn[-1] if drawn else ""
    if _CONTROL.search(last) is None:
        return last
    cells: list[str] = []
    column = 0
    for char in last:
        if char == "\b":
            column = max(0, column - 1)
            continue
        for shown in _visible(char):
            if column < len(cells):
                cells[column] = shown
            else:
                cells.append(shown)
            column += 1
    return "".join(cells)


def _visible(char: str) -> str:
    code = ord(char)
    if char == "\t" or 32 <= code < 127 or code >= 160:
        return char
    if code < 32 or code == 127:
        return "^" + chr(code ^ 0x40)
    return f"\\x{code:02x}"
