"""The approval modes of a session, and the policy each one is: which tool calls ask first,
which run, which are rejected without asking. One policy for the editor's sessions
(`session/set_mode`) and the terminal chat (`--auto`, `/mode`) (D374). Pure; no trio import.

The policy is an object its owner switches in place: the agent consults it before every
call, so a switch applies from the next call on.
"""

from __future__ import annotations

from typing import Final

from ._approval import ApprovalRequest, Verdict

__all__ = ["DEFAULT_MODE", "MODES", "ModePolicy"]

# The tools that change nothing: reading a job's output, reading a file inside the working
# directory (D522). Every other tool asks in `ask` and is rejected in `read-only`.
READS: Final = frozenset({"bash_output", "read"})
STOPS: Final = "bash_kill"  # the tool that stops a job

MODES: Final[dict[str, tuple[str, str]]] = {
    "ask": (
        "Ask",
        "Ask before running a command, changing a file or calling an MCP tool; reading a "
        "file or a job's output, or stopping a job, does not ask.",
    ),
    "auto": ("Auto", "Run every command, file change and MCP tool without asking."),
    "read-only": (
        "Read-only",
        "Run no command or MCP tool, change no file and stop no job: they are rejected "
        "without asking.",
    ),
}
"""The session modes, each with its name and description, as `session/new` lists them."""

DEFAULT_MODE: Final = "ask"


class ModePolicy:
    """The approval policy of one session, switched by its owner: `ask` asks before
    every call but reading a file (`read`), reading (`bash_output`) or stopping
    (`bash_kill`) a job, so before each `bash`, `edit`, `write` and MCP tool call; `auto`
    asks before none; `read-only` rejects every call but the reads without asking. "Always"
    answers are remembered for the session.

    Raises ValueError for a mode not in MODES.
    """

    def __init__(self, mode: str = DEFAULT_MODE) -> None:
        self._mode = _checked(mode)

    @property
    def mode(self) -> str:
        """The current mode's id."""
        return self._mode

    def switch(self, mode: str) -> None:
        """Use `mode` from the next call on. Raises ValueError for a mode not in MODES."""
        self._mode = _checked(mode)

    @property
    def remembers(self) -> bool:
        """True: `allow_always` and `reject_always` hold for the rest of the session."""
        return True

    def verdict(self, request: ApprovalRequest) -> Verdict:
        """The mode's verdict on one call."""
        if self._mode == "auto":
            return "allow"
        # Fail closed: a tool this policy does not know (an MCP server's may do anything)
        # is treated as a command.
        if self._mode == "read-only":
            return "allow" if request.tool in READS else "reject"
        return "allow" if request.tool in READS or request.tool == STOPS else "ask"

    def rejection_note(self, request: ApprovalRequest) -> str:
        """Why a call was rejected without asking, as the model is told."""
        return (
            f"the session is in {self._mode} mode, where {request.tool!r} does not run; "
            "the user can switch to the ask or auto mode"
        )


def _checked(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; the modes are {', '.join(MODES)}")
    return mode
