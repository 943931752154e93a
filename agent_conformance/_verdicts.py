"""A verdict per property: what one run of a machine that keeps going past a failure found
about each property it has (D469).

A run that finds a property broken records the finding, stops enforcing that property and
goes on, so one run tells every broken property apart from the ones that held. Each
property then gets one outcome:

- `passed`: checked, never broken;
- `failed`: broken, with its `Finding` (the program that shows it, the evidence);
- `not reached`: no example got as far as checking it;
- `not applicable`: the target does not offer what it is about (a capability it did not
  advertise);
- `skipped`: left out by the user (`--skip`, `--only`).

A pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ._properties import Property

__all__ = ["OUTCOMES", "Finding", "Outcome", "Verdict", "decide"]

Outcome = Literal["passed", "failed", "not reached", "not applicable", "skipped"]
OUTCOMES: tuple[Outcome, ...] = (
    "passed",
    "failed",
    "not reached",
    "not applicable",
    "skipped",
)


@dataclass(frozen=True)
class Finding:
    """One failure a run found.

    property: the property broken, or None for a failure that is not a violation (the
        target could not be started or configured, or the machine crashed).
    message: what happened, as the console prints it (first line: property, rule, what).
    steps: the program that showed it, one call per step.
    script: the same program as a Python script that replays it, when one can be written.
    transcript: the last frames on the wire before it, both ways (`>` sent, `<` received).
    stderr: the end of the target's standard error.
    shrunk: how the program was minimised: "shrunk", "not shrunk" (the user said so), or
        "shrinking cut short after N s" (the run's shrink budget ran out).
    replayed: False when the failure did not happen again when replayed.
    """

    property: Property | None
    message: str
    steps: tuple[str, ...] = ()
    script: str | None = None
    transcript: tuple[str, ...] = ()
    stderr: str = ""
    shrunk: str = "shrunk"
    replayed: bool = True

    @builtins.property  # the field `property` hides the builtin in the class body
    def headline(self) -> str:
        """The message's first line."""
        return self.message.splitlines()[0] if self.message else ""


@dataclass(frozen=True)
class Verdict:
    """The outcome of one property in one run.

    property: the property.
    outcome: one of `OUTCOMES`.
    checks: how many times it was checked.
    finding: for `failed`, what was found.
    again: for `failed`, how many more times it broke after it was found.
    why: for `not applicable`, `not reached` and `skipped`, the reason, in a few words.
    """

    property: Property
    outcome: Outcome
    checks: int = 0
    finding: Finding | None = None
    again: int = 0
    why: str = field(default="")


def decide(
    properties: Sequence[Property],
    *,
    checks: Mapping[str, int],
    findings: Sequence[Finding],
    again: Mapping[str, int] | None = None,
    inapplicable: Mapping[str, str] | None = None,
    skipped: Collection[str] = (),
) -> tuple[Verdict, ...]:
    """The verdict of each of `properties`, in their order, from what a run counted:
    `checks` and `again` by property name, the `findings`, the properties the target does
    not offer (`inapplicable`: name -> why) and those the user left out (`skipped`)."""
    found = {f.property.name: f for f in findings if f.property is not None}
    again = again or {}
    inapplicable = inapplicable or {}
    verdicts: list[Verdict] = []
    for prop in properties:
        name = prop.name
        count = checks.get(name, 0)
        if name in found:
            verdicts.append(Verdict(prop, "failed", count, found[name], again.get(name, 0)))
        elif name in skipped:
            verdicts.append(Verdict(prop, "skipped", count, why="left out by the user"))
        elif count:  # checked: it applied, whatever the target advertised
            verdicts.append(Verdict(prop, "passed", count))
        elif name in inapplicable:
            verdicts.append(Verdict(prop, "not applicable", 0, why=inapplicable[name]))
        else:
            verdicts.append(Verdict(prop, "not reached", 0, why="no example checked it"))
    return tuple(verdicts)
