"""How `agent-conformance` prints a machine's failure: what broke, the shrunk program
as a script, and the command that replays the run. One wording for every machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._conformance import MachineReport

__all__ = ["print_failure", "print_found"]


def print_failure(report: MachineReport, replay: str) -> None:
    """Print `report`'s failure, its shrunk reproduction if any, and `replay`, the command
    that replays the run."""
    # Imported here: it imports Hypothesis, which the other commands do without.
    from .._conformance import describe_failure

    print_found(describe_failure(report.failure), report.program, replay)


def print_found(message: str, program: str | None, replay: str, aside: str = "") -> None:
    """Print what a run found: `message` (what broke), `aside` (a line about how the program
    was found, if any), the shrunk `program` as a script, and `replay`."""
    for line in message.splitlines():
        print(f"    {line}")
    if aside:
        print(f"    ({aside})")
    if program is not None:
        print("    shrunk reproduction (run it with python):")
        for line in program.splitlines():
            print(f"      {line}")
    print(f"    replay this run: {replay}")
