"""What the agent, lifecycle and shell machines share: one `TrioHost` per example, the service
under test running in it until teardown, check counting and the history fingerprints.

A machine subclasses `ConformanceMachine`, declares its steps with this module's `rule` (not
Hypothesis's) and implements `_verify` (the checks after every step), `_history` and
`_check_closing` (the checks after its service has closed). `machine_for` makes the
fresh subclass one run checks a target with.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Generator, Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar, cast

import trio
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition
from hypothesis.stateful import rule as hypothesis_rule

from trio_agents.testing import TrioHost

from ._properties import ContractViolation

__all__ = [
    "PROGRAM_NOTE",
    "ConformanceMachine",
    "Draws",
    "checked_program",
    "machine_for",
    "rule",
]

M = TypeVar("M", bound="ConformanceMachine")
P = ParamSpec("P")
T = TypeVar("T")


def rule(
    **strategies: st.SearchStrategy[Any],
) -> Callable[[Callable[Concatenate[M, P], None]], Callable[Concatenate[M, P], None]]:
    """Hypothesis's `@rule` for a step of a `ConformanceMachine`: from the step's start the
    machine counts as inconsistent until its next check passes, so teardown's own checks
    never mask the failure of a step (also when a printed reproduction calls the step).
    The step is drawn only while the machine's `rule_drawn(its name)` holds."""

    def accept(step: Callable[Concatenate[M, P], None]) -> Callable[Concatenate[M, P], None]:
        @functools.wraps(step)
        def inconsistent_until_checked(machine: M, /, *args: P.args, **kwargs: P.kwargs) -> None:
            if machine.spoiled:
                return  # a waived property broke: the rest of the example checks nothing
            machine.step_begins()
            machine.program.append(_spelled(step.__name__, args, kwargs))
            with machine.noting_the_program():
                step(machine, *args, **kwargs)

        # Hypothesis builds the rule's proxy from the signature, without following wraps.
        inconsistent_until_checked.__signature__ = inspect.signature(step)  # type: ignore[attr-defined]
        # Its overloads cannot tell that `**strategies` holds neither `target` nor `targets`.
        declare = cast("Callable[..., Callable[[Callable[..., None]], Any]]", hypothesis_rule)
        declared: Callable[Concatenate[M, P], None] = declare(**strategies)(
            inconsistent_until_checked
        )
        name = step.__name__
        drawn: Callable[[Callable[Concatenate[M, P], None]], Callable[Concatenate[M, P], None]]
        drawn = precondition(lambda machine: machine.rule_drawn(name))
        return drawn(declared)

    return accept


PROGRAM_NOTE = "the program that showed it, step by step:"


def _spelled(name: str, args: tuple[object, ...], kwargs: dict[str, object]) -> str:
    """A step as a reader would write the call (a data object as `data(...)`)."""
    shown = [_shown(value) for value in args]
    shown += [f"{key}={_shown(value)}" for key, value in kwargs.items()]
    return f"state.{name}({', '.join(shown)})"


def _shown(value: object) -> str:
    return "data(...)" if type(value).__name__ == "DataObject" else repr(value)


class ConformanceMachine(RuleBasedStateMachine):
    """One example: a `TrioHost`, the service under test started in it by `_start_service`,
    and `check` after every step. A machine sets `factory` (its target) and gives itself
    `stats` and `histories`, which its own subclasses share unless given their own.

    host: the TrioHost the example's trio run lives in.
    """

    stats: ClassVar[dict[str, int]]
    """Counts examples and checked steps."""
    histories: ClassVar[set[int]]
    """Fingerprints of the distinct histories the examples produced."""
    violations: ClassVar[list[ContractViolation]] = []
    """The first violation a step raised in this run, kept for the report when Hypothesis
    cannot replay it (`machine_for` gives each run its own list)."""
    latest: ClassVar[list[tuple[float, ContractViolation]]] = []
    """When the first violation was raised, and the last one of its property: the smallest
    program shrinking has found so far, for a run that cuts shrinking short."""
    waived: ClassVar[frozenset[str]] = frozenset()
    """Names of properties this run does not enforce (found broken in an earlier pass of
    the same run, or left out by the user): a violation of one ends the example's checks,
    counted in `stats` as "again NAME", and the run goes on to the other properties."""

    def rule_drawn(self, name: str) -> bool:
        """Whether the rule `name` may be drawn now (all of them, unless a machine says
        otherwise: a rule whose every property is waived checks nothing).
        Seam: a machine overrides it."""
        return True

    def __init__(self, host: TrioHost) -> None:
        super().__init__()
        type(self).stats["examples"] += 1
        self.host = host
        self._stop: trio.Event | None = None
        self._stopped = trio.Event()
        # True only while the last `check` passed: teardown's own checks must never mask
        # the failure that ended the example.
        self._consistent = False
        # The steps so far, as calls: a violation carries them in a note, so one that does
        # not replay can still be shown with the program that showed it.
        self.program: list[str] = []
        # A waived property broke: nothing the example does from then on is checked.
        self.spoiled = False

    @contextlib.contextmanager
    def noting_the_program(self) -> Generator[None]:
        """Add the program so far to a `ContractViolation` raised in the block (once). A
        violation of a waived property is counted and swallowed, and spoils the example."""
        try:
            yield
        except ContractViolation as violation:
            if violation.property.name in type(self).waived:
                self.spoil(violation.property.name)
                return
            self.note_violation(violation)
            kind = type(self)
            if not kind.violations:
                kind.violations.append(violation)
            if kind.violations[0].property == violation.property:
                found = kind.latest[0][0] if kind.latest else time.monotonic()
                kind.latest[:] = [(found, violation)]
            raise

    def note_violation(self, violation: ContractViolation) -> None:
        """Add the program so far, and the machine's evidence, to `violation` (once)."""
        notes = getattr(violation, "__notes__", [])
        if not any(note.startswith(PROGRAM_NOTE) for note in notes):
            steps = "\n".join(f"  {step}" for step in self.program) or "  (no step yet)"
            violation.add_note(f"{PROGRAM_NOTE}\n{steps}")
            for note in self._evidence():
                violation.add_note(note)

    def spoil(self, name: str) -> None:
        """Waived property `name` broke again: count it, and check nothing more in this
        example (what follows a broken step is no evidence about the other rules)."""
        stats = type(self).stats
        stats[f"again {name}"] = stats.get(f"again {name}", 0) + 1
        self.spoiled = True
        self._consistent = False

    def _evidence(self) -> list[str]:
        """Notes a violation carries for a report besides its program (the ACP machine: the
        wire transcript, the agent's stderr)."""
        return []

    def step_begins(self) -> None:
        """A rule is about to act (every `rule` calls this first): until the next check
        passes, teardown must not run its own checks, which could mask the step's failure.
        Never blocks."""
        self._consistent = False

    # -- the service under test ------------------------------------------------------------

    def _start_service(self, opened: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """Run `opened()` in the host until `_stop` is set; returns what it yields."""
        value: T = self.host.call(self.host.nursery.start, self._serve, opened)
        return value

    async def _serve(
        self,
        opened: Callable[[], AbstractAsyncContextManager[T]],
        task_status: trio.TaskStatus[T] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        stop = self._stop = trio.Event()
        stopped = self._stopped = trio.Event()
        async with opened() as value:
            task_status.started(value)
            await stop.wait()
        stopped.set()

    def _stop_service(self) -> None:
        """Tell the service to close and run every task until all are blocked."""
        assert self._stop is not None
        self.host.run_sync(self._stop.set)
        self.host.settle()

    def teardown(self) -> None:
        """Record the example's history, close the service and run the closing checks
        (unless a step already failed: that failure must not be masked), then end the trio
        run."""
        history = self._history()
        if history is not None:
            type(self).histories.add(hash(history))
        try:
            if self._consistent and self._stop is not None and not self.host.closed:
                self.program.append("state.teardown()")
                with self.noting_the_program():
                    self._check_closing()
        finally:
            self.host.close()
            self._after_close()

    # -- what a machine checks ---------------------------------------------------------------

    @invariant()
    def check(self) -> None:
        """Everything the machine's model determines, after every step."""
        self._consistent = False
        if self.spoiled or not self._ready():
            return
        type(self).stats["checks"] += 1
        with self.noting_the_program():
            self._verify()
        self._consistent = True

    def _ready(self) -> bool:
        """Whether there is anything to check yet."""
        return True

    def _verify(self) -> None:
        """The checks after every step (raise AssertionError on a violation)."""
        raise NotImplementedError

    def _history(self) -> Hashable | None:
        """What tells this example's history from another's (None: nothing happened)."""
        raise NotImplementedError

    def _check_closing(self) -> None:
        """Stop the service (`_stop_service`) and check what closing must leave behind.
        Runs only when the last check passed."""
        raise NotImplementedError

    def _after_close(self) -> None:
        """Clean-up after the trio run has ended, also after a failure."""


def machine_for(base: type[M], factory: Callable[..., Any] | None) -> type[M]:
    """A fresh subclass of `base` for one run: its own counters, and `factory` (when given)
    as its target."""
    namespace: dict[str, Any] = {
        "stats": {"examples": 0, "checks": 0},
        "histories": set[int](),
        "violations": list[ContractViolation](),
        "latest": list[tuple[float, ContractViolation]](),
    }
    name = base.__name__
    if factory is not None:
        namespace["factory"] = staticmethod(factory)
        name = f"{name}[{getattr(factory, '__name__', 'factory')}]"
    return cast("type[M]", type(name, (base,), namespace))


class Draws:
    """Replays the values a rule drew from `st.data()` (printed as `Draw 1 (job): 'bash-1'`
    lines in a shrunk program): a printed reproduction passes `data=Draws('bash-1')` where
    Hypothesis passed its data object, and each `draw` returns the next recorded value.

    values: the recorded values, in the order they were drawn.
    """

    def __init__(self, *values: object) -> None:
        self.values = list(values)

    def __repr__(self) -> str:
        return f"Draws({', '.join(map(repr, self.values))})"

    def draw(self, strategy: object, label: object = None) -> Any:
        """The next recorded value (`strategy` and `label` are what the rule passed)."""
        if not self.values:
            raise RuntimeError(
                f"the rule drew more values than the reproduction recorded (drawing {label!r}"
                f" from {strategy!r}); print the reproduction again from the same run"
            )
        return self.values.pop(0)


def checked_program(steps: Sequence[str], machine: type[ConformanceMachine]) -> list[str]:
    """A printed program's `steps` (`state.rule(...)` lines) with the machine's invariant,
    `state.check()`, where Hypothesis runs it without printing it: as the machine starts and
    after every step, once every `@initialize` rule has run. A replay without it verifies
    nothing, and skips the closing checks as after a step that was never checked."""
    pending = {
        name
        for name, member in inspect.getmembers(machine)
        # Hypothesis's own mark of an @initialize rule (it has no public way to list them).
        if hasattr(member, "hypothesis_stateful_initialize_rule")
    }
    program = [] if pending else ["state.check()"]
    for step in steps:
        if step in ("state.teardown()", "state.check()"):
            continue
        program.append(step)
        pending.discard(step.removeprefix("state.").split("(", 1)[0])
        if not pending:
            program.append("state.check()")
    return program
