"""Run the ACP machine against one agent command and report as the other machines do: the
examples, checked steps, distinct histories, seed, and the shrunk program of a failure."""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings as Settings

from .._conformance import (
    NOT_REPLAYED,
    MachineReport,
    command_budget,
    describe_failure,
    first_failure,
    report_progress,
)
from .._machine import PROGRAM_NOTE, checked_program
from .._properties import ContractViolation, tallying
from .._verdicts import Finding, Verdict, decide
from ._client import STDERR_NOTE, TRANSCRIPT_NOTE, AcpTarget
from ._machine import AcpMachine, acp_machine
from ._properties import (
    ANSWERED_DURABLE,
    CLIENT_TEXT_USED,
    CONFIG_REFUSED_UNCHANGED,
    CONFIG_SWITCHED,
    INJECTED_NEVER_LOST,
    LOAD_REPLAYS,
    LOADS_UNPROMPTED,
    PROPERTIES,
    QUEUED_RUNS_NEXT,
    SESSIONS_LISTED,
    STEER_REACHES_TURN,
    V2_NEGOTIATED,
    V2_PROPERTIES,
)
from ._protocol_v2 import v1_rules_drawn, v2_rule_drawn

__all__ = [
    "SHRINK_BUDGET",
    "AcpRun",
    "ShrinkingCut",
    "acp_settings",
    "cut_shrinking_after",
    "finding_of",
    "inapplicable",
    "preflight",
    "reproduction",
    "run_acp_conformance",
]


def acp_settings(base: Settings) -> Settings:
    """Every example starts an agent process: a fifteenth of the examples of `base` (20 for
    the `ci` profile), two thirds of its steps (a step costs far less than an example, D477)."""
    return Settings(
        base,
        max_examples=max(5, base.max_examples // 15),
        stateful_step_count=max(5, base.stateful_step_count * 2 // 3),
    )


def preflight(
    target: AcpTarget, waived: Iterable[str] = ()
) -> tuple[type[AcpMachine], BaseException | None]:
    """One example of one step: the agent starts, answers `initialize` and `session/new`,
    and exits at the end of its input. A failure here is reported as is (no search could
    shrink it, and each example of a search would wait for the same timeout). Properties
    named in `waived` are not enforced."""
    machine = acp_machine(target, waived)
    try:
        state = machine()
    except Exception as exc:
        return machine, exc
    try:
        state.check()
        state.new_session()  # an agent that needs configuring says so here, once
        state.check()
        state.probe_v2()  # whether it speaks v2: the search's rules depend on it
        state.check()
    except Exception as exc:
        state.teardown()
        return machine, exc
    try:
        state.check()
        state.teardown()
    except Exception as exc:
        return machine, exc
    return machine, None


class ShrinkingCut(BaseException):
    """Raised before an example once shrinking has run past the run's budget: not an
    Exception, so Hypothesis ends the run at once, and the run reports the smallest program
    found so far."""


@dataclass(frozen=True)
class AcpRun:
    """What one ACP run found: the machine's report (its `failure`: the first finding), what
    the agent advertised (`agentInfo`, `loadSession`, `listSessions`), how often each kind
    of cancel landed where it was aimed (an agent without a shell tool never runs one, so
    its mid-tool cancels land elsewhere), how many permission requests each kind of answer
    met (an agent that never asks: none), the verdict of each property, and the findings
    in the order they were found."""

    report: MachineReport
    advertised: Mapping[str, Any]
    landed: Mapping[str, int]
    asked: Mapping[str, int] = field(default_factory=dict[str, int])
    verdicts: tuple[Verdict, ...] = ()
    findings: tuple[Finding, ...] = ()
    latencies: Mapping[str, tuple[float, ...]] = field(default_factory=dict[str, tuple[float, ...]])
    """Seconds from each session/cancel that landed to what it aborted being seen gone:
    "stream" (the model request), "tool" (the shell command's processes)."""
    one_session: bool = False
    """The agent refused a second session/new in one process: rules that need two sessions
    of a process were not drawn."""

    @property
    def crash(self) -> Finding | None:
        """The failure that ended the run and is no property's (the agent could not be
        started or configured, or the machine crashed), if any."""
        return next((f for f in self.findings if f.property is None), None)

    @property
    def failed(self) -> tuple[Verdict, ...]:
        """The verdicts that failed."""
        return tuple(v for v in self.verdicts if v.outcome == "failed")


SHRINK_BUDGET = 120.0
"""Seconds a run may spend shrinking one failure before it reports the smallest program
found so far."""


def run_acp_conformance(
    target: AcpTarget,
    *,
    profile_name: str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    shrink: bool = True,
    progress: Callable[[str, int, float], object] | None = None,
    interrupted: Callable[[], bool] | None = None,
    skip: Collection[str] = (),
    shrink_budget: float = SHRINK_BUDGET,
    keep_going: bool = True,
) -> AcpRun:
    """Run the ACP machine against `target`, past each failure: a property found broken is
    recorded and no longer enforced, and the run starts a new pass (new agents, the next
    seed) until a pass finds nothing new, or, unless `keep_going`, after the first finding.
    Properties named in `skip` are never enforced.
    Once `interrupted()` is true, the run stops with KeyboardInterrupt before its next
    example (the command line's first Ctrl-C)."""
    chosen_seed = seed if seed is not None else random.randrange(2**32)
    started = time.monotonic()
    budget = command_budget(acp_settings, profile_name, max_examples, shrink)
    waived: set[str] = set(skip)
    findings: list[Finding] = []
    failures: list[BaseException] = []
    stats: Counter[str] = Counter()
    histories: set[int] = set()
    latencies: dict[str, list[float]] = {}
    advertised: Mapping[str, Any] = {}
    with tallying() as tally:
        ended = False
        while True:  # the preflight, again after each property it finds broken
            probe, failure = preflight(target, waived)
            advertised = probe.advertised or advertised
            stats.update(probe.stats)
            if failure is None:
                break
            failures.append(failure)
            findings.append(finding_of(target, failure, waived, "not shrunk"))
            if not (keep_going and _goes_on(failure, waived)):
                ended = True
                break
            waived.add(failure.property.name)  # type: ignore[attr-defined]
        for index in itertools.count():
            if ended:
                break
            machine = acp_machine(target, waived)
            machine.v2_offered = probe.v2_offered
            if not _any_rule(machine):
                break  # nothing left to draw: every property a rule serves is waived
            if progress is not None or interrupted is not None:
                report_progress(machine, "acp", progress, 5.0, interrupted)
            cut_shrinking_after(machine, shrink_budget)
            shrunk = "shrunk" if shrink else "not shrunk"
            try:
                failure = first_failure(machine, budget, _pass_seed(chosen_seed, index))
            except ShrinkingCut:
                failure = machine.latest[-1][1]
                shrunk = f"shrinking cut short after {shrink_budget:g} s"
            stats.update(machine.stats)
            histories |= machine.histories
            for kind, seconds in machine.latencies.items():
                latencies.setdefault(kind, []).extend(seconds)
            advertised = machine.advertised or advertised
            if failure is None:
                break
            failures.append(failure)
            findings.append(finding_of(target, failure, waived, shrunk))
            if not (keep_going and _goes_on(failure, waived)):
                break
            waived.add(failure.property.name)  # type: ignore[attr-defined]
            # Nothing is left to judge once every property is waived.
            ended = waived >= {p.name for p in PROPERTIES}
    return _ended(
        latencies,
        target,
        chosen_seed,
        started,
        stats,
        histories,
        advertised,
        tally,
        findings,
        failures,
        waived,
        skip,
    )


def _any_rule(machine: type[AcpMachine]) -> bool:
    """Whether `machine` may draw any rule: one of v1's, or v2's on an agent that speaks
    it."""
    waived = machine.waived
    return v1_rules_drawn(waived) or (machine.v2_offered is not False and v2_rule_drawn(waived))


def _pass_seed(seed: int, index: int) -> int:
    # The first pass runs the seed itself: a run that finds nothing is the run it always was.
    return seed if index == 0 else (seed + 7919 * index) % 2**32


def _goes_on(failure: BaseException, waived: Collection[str]) -> bool:
    """Whether a run can go on past `failure`: a violation of a property it still enforced.
    A crash, a setup error, or a waived property's violation raised where no waiver reaches
    (the agent's start) ends it."""
    return isinstance(failure, ContractViolation) and failure.property.name not in waived


def cut_shrinking_after(machine: type[AcpMachine], seconds: float) -> None:
    """Make `machine` raise `ShrinkingCut` before an example once the first failure of the
    run's pass was found more than `seconds` ago."""
    original = machine.__init__

    def __init__(self: AcpMachine) -> None:
        found = type(self).violations
        if found and type(self).latest and time.monotonic() - type(self).latest[0][0] > seconds:
            raise ShrinkingCut
        original(self)

    machine.__init__ = __init__  # type: ignore[method-assign]


def _ended(
    latencies: Mapping[str, list[float]],
    target: AcpTarget,
    seed: int,
    started: float,
    stats: Counter[str],
    histories: set[int],
    advertised: Mapping[str, Any],
    tally: Counter[str],
    findings: list[Finding],
    failures: list[BaseException],
    waived: set[str],
    skip: Collection[str],
) -> AcpRun:
    first = failures[0] if failures else None
    report = MachineReport(
        "acp",
        stats["examples"],
        stats["checks"],
        len(histories),
        time.monotonic() - started,
        seed,
        first,
        findings[0].script if findings else None,
    )
    again = {k.removeprefix("again "): v for k, v in stats.items() if k.startswith("again ")}
    verdicts = decide(
        PROPERTIES,
        checks=tally,
        findings=findings,
        again=again,
        inapplicable=inapplicable(advertised, stats),
        skipped=skip,
    )
    landed = {k.removeprefix("landed "): v for k, v in stats.items() if k.startswith("landed ")}
    asked = {k.removeprefix("asked "): v for k, v in stats.items() if k.startswith("asked ")}
    return AcpRun(
        report,
        advertised,
        landed,
        asked,
        verdicts,
        tuple(findings),
        {kind: tuple(seconds) for kind, seconds in latencies.items()},
        bool(stats.get("one session a process")),
    )


def inapplicable(advertised: Mapping[str, Any], stats: Mapping[str, int]) -> dict[str, str]:
    """The properties the agent does not offer what they are about, by name: why."""
    out: dict[str, str] = {}
    if not advertised.get("loadSession"):
        for prop in (LOAD_REPLAYS, LOADS_UNPROMPTED, ANSWERED_DURABLE):
            out[prop.name] = "loadSession not advertised"
    if not advertised.get("listSessions"):
        out[SESSIONS_LISTED.name] = "sessionCapabilities.list not advertised"
    if not stats.get("offered settings"):
        for prop in (CONFIG_SWITCHED, CONFIG_REFUSED_UNCHANGED):
            out[prop.name] = "no session offered configOptions or modes"
    if not advertised.get("steering"):
        for prop in (STEER_REACHES_TURN, QUEUED_RUNS_NEXT, INJECTED_NEVER_LOST):
            out[prop.name] = "agentCapabilities._meta.unstable_session_inject not advertised"
    if advertised.get("protocol 2") is False:
        for prop in V2_PROPERTIES:
            if prop is not V2_NEGOTIATED:  # answering 1 is what it checked
                out[prop.name] = "the agent answered protocolVersion 1 to a client asking for 2"
    if not stats.get("read through client"):
        out[CLIENT_TEXT_USED.name] = "the agent never read a file through fs/read_text_file"
    return out


def finding_of(
    target: AcpTarget, failure: BaseException, waived: Collection[str], shrunk: str
) -> Finding:
    """What a report shows of `failure`: its message, program, script, transcript and the
    agent's stderr (the last two from the notes the machine added)."""
    notes: list[str] = list(getattr(failure, "__notes__", []))
    prop = failure.property if isinstance(failure, ContractViolation) else None

    def note(prefix: str) -> list[str]:
        for each in notes:
            if each.startswith(prefix):
                return each.splitlines()[1:]
        return []

    steps = tuple(
        s for s in (line.strip() for line in note(PROGRAM_NOTE)) if s.startswith("state.")
    )
    return Finding(
        prop,
        describe_failure(failure),
        steps,
        reproduction(target, failure, waived),
        tuple(note(TRANSCRIPT_NOTE)),
        "\n".join(note(STDERR_NOTE)),
        shrunk,
        NOT_REPLAYED not in notes,
    )


def reproduction(
    target: AcpTarget, failure: BaseException, waived: Collection[str] = ()
) -> str | None:
    """A Python script replaying the shrunk program against the same command (with the
    properties found broken before it not enforced, as in the run), or None when there is
    no program to replay."""
    notes: list[str] = list(getattr(failure, "__notes__", []))
    steps: list[str] = []
    recording = False
    for line in notes:
        if line.startswith("state = "):
            recording = True
            continue
        if recording and line.startswith("state."):
            steps.append(line)
        elif recording:
            break
    noted = False
    if not steps:  # Hypothesis printed none (shrinking cut short): the machine's own note
        for note in notes:
            if note.startswith(PROGRAM_NOTE):
                noted = True
                steps = [line.strip() for line in note.splitlines()[1:]]
    body = [step for step in steps if step.startswith("state.") and step != "state.teardown()"]
    if not body and noted:
        body = ["state.check()"]  # it broke as it started: starting it shows it
    if not body:
        return None
    program = checked_program(body, AcpMachine)
    machine = f"acp_machine({target!r})"
    if waived:
        machine = f"acp_machine({target!r}, waived={sorted(waived)!r})"
    lines = [
        "# Replays the shrunk failing program of the ACP machine against the same command.",
        "from agent_conformance import AcpTarget, acp_machine",
        "",
        f"state = {machine}()",
        "try:",
        *(f"    {step}" for step in program),
        "finally:",
        "    state.teardown()",
    ]
    return "\n".join(lines) + "\n"
