"""How `agent-conformance` prints a machine's failure: what broke, the shrunk program
as a script, and the command that replays the run. One wording for every machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._conformance import MachineReport

__all__ = ["print_failure"]


def print_failure(report: MachineReport, replay: str) -> None:
    """Print `report`'s failure, its shrunk reproduction if any, and `replay`, the command
    that replays the run."""
    # Imported here: it imports Hypothesis, which the other commands do without.
    from .._conformance import describe_failure

    for line in describe_failure(report.failure).splitlines():
        print(f"    {line}")
    if report.program is not None:
        print("    shrunk reproduction (run it with python):")
        for line in report.program.splitlines():
            print(f"      {line}")
    print(f"    replay this run: {replay}")
