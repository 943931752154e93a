"""Named properties: how a machine says which rule of the contract an implementation broke.

Every check a conformance machine makes belongs to a `Property`: the rule id it checks
(`A6`, `L1`, ...), a short name, the machine that checks it, and what the contract says, in
the contract's words. A failed check raises `ContractViolation`, whose message names the
rule, says what the contract says and what happened instead:

    A6 (cancel-order): a listener of CancelRequested saw pending=()
      the contract: an effective cancel first emits CancelRequested, then clears the queue
      and the steering, then cancels the running turn

A pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections import Counter
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import NoReturn

__all__ = ["ContractViolation", "Property", "catalogue_problems", "tallying", "violation"]

_RULE_ID = re.compile(r"[A-Z][0-9]+")
_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


class ContractViolation(AssertionError):
    """A machine found the implementation breaking a rule of the contract. An
    `AssertionError`, so Hypothesis shrinks it like any failed check.

    property: the `Property` that failed.
    happened: what the machine saw instead, in the contract's words.
    """

    def __init__(self, property: Property, happened: str) -> None:
        self.property = property
        self.happened = happened
        super().__init__(
            f"{property.rule} ({property.name}): {happened}\n  the contract: {property.says}"
        )

    @property
    def rule(self) -> str:
        """The id of the broken rule (`A6`, `L1`, ...)."""
        return self.property.rule

    def __reduce__(self) -> tuple[object, ...]:
        return (violation, (self.property, self.happened))


# One subclass per property: Hypothesis tells bugs apart by the exception's type and where it
# was raised, and every violation is raised in `Property._raise`. With a type of its own, the
# violation of one property is one bug: shrinking never slips to another property's failure.
_CLASSES: dict[tuple[str, str], type[ContractViolation]] = {}


def violation(prop: Property, happened: str) -> ContractViolation:
    """The `ContractViolation` of `prop`: an instance of the subclass kept for it."""
    key = (prop.rule, prop.name)
    cls = _CLASSES.get(key)
    if cls is None:
        cls = _CLASSES[key] = type(
            "ContractViolation",
            (ContractViolation,),
            {"__module__": ContractViolation.__module__, "__slots__": ()},
        )
    return cls(prop, happened)


# How often each property was checked, by name, while `tallying` is open: a run's verdict
# tells a property that held from one it never reached. A context variable, not a machine's
# attribute: checks run in helpers and trio tasks that never see the machine, and the trio
# tasks copy the context, so they share the tally.
_TALLY: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar(
    "trio_agents_conformance_tally", default=None
)


@contextlib.contextmanager
def tallying() -> Generator[Counter[str]]:
    """Count each `Property.check`, `held` and `fail` by property name until the block
    ends; yields the counter."""
    tally: Counter[str] = Counter()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


@dataclass(frozen=True)
class Property:
    """One named check of one rule.

    rule: the id of the rule in `docs/contract.md` it checks (`A6`).
    name: a short kebab-case name, unique across the machines (`cancel-order`).
    machine: the machine that checks it (`agent`, `lifecycle`, `durable`, `shell`).
    says: what the contract says, in its words, as a violation quotes it.
    """

    rule: str
    name: str
    machine: str
    says: str

    def __post_init__(self) -> None:
        if not _RULE_ID.fullmatch(self.rule):
            raise ValueError(f"rule id {self.rule!r} is not a letter and a number, like 'A6'")
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"property name {self.name!r} is not kebab-case, like 'cancel-order'")

    def check(self, holds: bool, happened: str | Callable[[], str]) -> None:
        """Raise `ContractViolation` unless `holds`. `happened` says what the machine saw;
        pass a callable when the message is costly to build. Never blocks."""
        tally = _TALLY.get()
        if tally is not None:
            tally[self.name] += 1
        if not holds:
            self._raise(happened() if callable(happened) else happened)

    def held(self) -> None:
        """Count a check of this property that held, where the check is written as
        `if broken: prop.fail(...)`. Never blocks."""
        tally = _TALLY.get()
        if tally is not None:
            tally[self.name] += 1

    def fail(self, happened: str) -> NoReturn:
        """Raise `ContractViolation` for what happened."""
        tally = _TALLY.get()
        if tally is not None:
            tally[self.name] += 1
        self._raise(happened)

    def _raise(self, happened: str) -> NoReturn:
        # The one place a violation is raised (see `violation`).
        raise violation(self, happened)


def catalogue_problems(properties: Iterable[Property], rule_ids: Iterable[str]) -> list[str]:
    """What is wrong with a catalogue of properties against the contract's rule ids: a rule
    no property checks, a property of no rule, a name used twice."""
    problems: list[str] = []
    rules = set(rule_ids)
    seen: dict[str, Property] = {}
    checked: set[str] = set()
    for prop in properties:
        checked.add(prop.rule)
        if prop.name in seen and seen[prop.name] != prop:
            problems.append(f"property name {prop.name!r} is used twice")
        seen[prop.name] = prop
        if prop.rule not in rules:
            problems.append(f"property {prop.name!r} checks {prop.rule}, which the contract lacks")
    problems += [f"rule {rule} has no property" for rule in sorted(rules - checked)]
    return problems
