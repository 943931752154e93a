"""Run the conformance machines and report what they did. Used by `agent-conformance`.

Every run has a seed (drawn when none is given) and uses no example database, so the seed
alone reproduces it. A failure is reported with the shrunk program Hypothesis found, turned
into a runnable Python script.
"""

from __future__ import annotations

import os
import random
import re
import time
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import hypothesis.errors
from hypothesis import Phase
from hypothesis import settings as Settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from ._agent_machine import AgentFactory, AgentMachine, agent_machine_for, agent_settings
from ._catalogue import PROPERTIES
from ._durable_machine import DurableMachine, durable_settings
from ._features import Features, Reasoned, coverage
from ._function_machine import FunctionMachine, function_settings
from ._lifecycle_machine import LifecycleMachine, RuntimeFactory
from ._machine import PROGRAM_NOTE, ConformanceMachine, checked_program, machine_for
from ._mcp_machine import McpMachine, mcp_settings
from ._model_machine import ModelMachine, model_settings
from ._profiles import profile
from ._properties import ContractViolation, Property
from ._seed import forcing_seed
from ._shell_machine import ShellFactory, ShellMachine, shell_settings
from ._targets import FunctionToolFactory, McpOpener, ModelFactory
from ._threads import THREADS_NOTE, threads_note, watching_threads

__all__ = [
    "MACHINES",
    "MachineReport",
    "MachineSpec",
    "check_machine",
    "check_machine_choice",
    "command_budget",
    "describe_coverage",
    "describe_failure",
    "first_failure",
    "found_in",
    "report_progress",
    "reproduction",
    "run_conformance",
]

# `Draw 2 (job): 'bash-1'  # or any other generated value`: what a rule drew from st.data().
# A drawn value Hypothesis pretty-printed over several lines (a long list) is one note:
# DOTALL keeps it whole, and inside the call's brackets it is still valid Python.
_DRAW = re.compile(
    r"Draw \d+(?: \([^)]*\))?: (?P<value>.*?)(?:  # or any other generated value)?$", re.S
)


@dataclass(frozen=True)
class MachineSpec:
    """One machine `run_conformance` runs: its class (a public name of
    `agent_conformance`), which target it checks (`agent`, `runtime`, `shell` or `mcp`),
    and its budget made from the profile's."""

    base: type[ConformanceMachine]
    target: Literal["agent", "runtime", "shell", "mcp", "function", "model"]
    budget: Callable[[Settings], Settings]


def _as_is(settings: Settings) -> Settings:
    return settings


MACHINES: dict[str, MachineSpec] = {
    "agent": MachineSpec(AgentMachine, "agent", agent_settings),
    "lifecycle": MachineSpec(LifecycleMachine, "runtime", _as_is),
    "durable": MachineSpec(DurableMachine, "runtime", durable_settings),
    "shell": MachineSpec(ShellMachine, "shell", shell_settings),
    "mcp": MachineSpec(McpMachine, "mcp", mcp_settings),
    "function": MachineSpec(FunctionMachine, "function", function_settings),
    "model": MachineSpec(ModelMachine, "model", model_settings),
}
"""The machines, by name, in the order they run."""


@dataclass(frozen=True)
class MachineReport:
    """What one machine did: examples, checked steps, distinct histories it produced, the
    seed, and a failure with its shrunk program if any; the properties it checked, those it
    skipped and those it checked only in part, each with the reason (the features the
    target declares it lacks), and the features it ran with (the agent machine)."""

    machine: str
    examples: int
    checks: int
    histories: int
    seconds: float
    seed: int | None
    failure: BaseException | None
    program: str | None
    checked: tuple[Property, ...] = ()
    skipped: Reasoned = ()
    narrowed: Reasoned = ()
    features: Features | None = None
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.failure is None


def run_conformance(
    factory: AgentFactory | None = None,
    *,
    runtime_factory: RuntimeFactory | None = None,
    shell_factory: ShellFactory | None = None,
    mcp_opener: McpOpener | None = None,
    function_tool_factory: FunctionToolFactory | None = None,
    model_factory: ModelFactory | None = None,
    factory_spec: str | None = None,
    runtime_spec: str | None = None,
    shell_spec: str | None = None,
    mcp_spec: str | None = None,
    function_spec: str | None = None,
    model_spec: str | None = None,
    profile_name: str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    progress: Callable[[str, int, float], object] | None = None,
    progress_every: float = 5.0,
    features: Features | None = None,
    on_report: Callable[[MachineReport], object] | None = None,
    interrupted: Callable[[], bool] | None = None,
    machines: Collection[str] | None = None,
    shrink: bool = True,
) -> list[MachineReport]:
    """Run the agent machine against `factory`, the lifecycle and durable machines against
    `runtime_factory`, the shell machine against `shell_factory`, the MCP machine against
    `mcp_opener`, the function machine against `function_tool_factory` and the model machine
    against `model_factory` (each default: the built-in implementation). With none given all of them
    run; otherwise only the machines whose target is given. `*_spec` are the `module:attr`
    names used in reproductions. `progress(machine, examples, seconds)` is called at most
    every `progress_every` seconds while a machine runs. The agent machine checks `factory`
    on `features` (default: its `conformance_features` attribute, else all of them); raises
    TypeError, before running anything, for an attribute that is not a `Features`.
    `on_report(report)` is called as each machine finishes; once `interrupted()` is true the
    run stops with KeyboardInterrupt before its next example (the CLI's Ctrl-C). `machines`
    (names of `MACHINES`) leaves out every other machine; ValueError for a name that is not
    a machine, or one whose target is not given while others are. With `shrink` False a
    failing program is reported as found (`--no-shrink`)."""
    budget = Settings(profile(profile_name), database=None, report_multiple_bugs=False)
    if max_examples is not None:
        budget = Settings(budget, max_examples=max_examples)
    chosen_seed = seed if seed is not None else random.randrange(2**32)
    targets: dict[str, tuple[Callable[..., Any] | None, str | None]] = {
        "agent": (factory, factory_spec),
        "runtime": (runtime_factory, runtime_spec),
        "shell": (shell_factory, shell_spec),
        "mcp": (mcp_opener, mcp_spec),
        "function": (function_tool_factory, function_spec),
        "model": (model_factory, model_spec),
    }
    everything = all(target is None for target, _ in targets.values())
    if machines is not None:
        check_machine_choice(machines, [kind for kind, (t, _) in targets.items() if t is not None])
    agent_machine = agent_machine_for(factory, features)
    reports: list[MachineReport] = []
    for name, spec_of in MACHINES.items():
        target, spec = targets[spec_of.target]
        if not everything and target is None:
            continue
        if machines is not None and name not in machines:
            continue
        settings = spec_of.budget(budget)
        # Every example of the MCP machine starts real servers: when all machines run, it
        # runs its share of the examples asked for (D275), when it is the target, all.
        if max_examples is not None and not (everything and spec_of.target == "mcp"):
            settings = Settings(settings, max_examples=max_examples)
        if not shrink:
            settings = Settings(settings, phases=[p for p in settings.phases if p != Phase.shrink])
        if spec_of.base is AgentMachine:
            machine: type[ConformanceMachine] = agent_machine
        else:
            machine = machine_for(spec_of.base, target)
        report_progress(machine, name, progress, progress_every, interrupted)
        reports.append(_run(name, machine, settings, chosen_seed, spec, features))
        if on_report is not None:
            on_report(reports[-1])
    return reports


def check_machine_choice(machines: Collection[str], given: Collection[str]) -> None:
    """ValueError, whose message is the line to show, unless every name of `machines` is a
    machine that runs when the targets of the kinds `given` are (all of them, with none)."""
    flags = {
        "agent": "--target",
        "runtime": "--runtime-target",
        "shell": "--shell-target",
        "function": "--function-target",
        "model": "--model-target",
    }
    for name in machines:
        if name not in MACHINES:
            raise ValueError(f"no machine named {name!r}; the machines are {', '.join(MACHINES)}")
        kind = MACHINES[name].target
        if given and kind not in given:
            flag = flags.get(kind, "--mcp-target")
            raise ValueError(
                f"the {name} machine checks a {kind} target, and none is given: add {flag}, "
                f"or leave out the {name} machine"
            )


def command_budget(
    fraction: Callable[[Settings], Settings],
    profile_name: str | None,
    max_examples: int | None,
    shrink: bool,
) -> Settings:
    """The budget of a machine that drives a command (the ACP and chat machines):
    `fraction` of the profile's, resized to `max_examples` when given, and without the
    shrink phase unless `shrink`."""
    budget = fraction(Settings(profile(profile_name), database=None, report_multiple_bugs=False))
    if max_examples is not None:
        budget = Settings(budget, max_examples=max_examples)
    if not shrink:
        budget = Settings(budget, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    return budget


def first_failure(
    machine: type[ConformanceMachine], budget: Settings, seed: int
) -> Exception | None:
    """Run `machine` within `budget` from `seed`: the failure it found, None if none. A
    violation Hypothesis could not replay is reported as that violation (D392)."""
    try:
        with forcing_seed(seed):
            run_state_machine_as_test(machine, settings=budget)
    except Exception as exc:
        return found_in(exc, machine.violations)
    return None


def report_progress(
    machine: type[RuleBasedStateMachine],
    name: str,
    progress: Callable[[str, int, float], object] | None,
    every: float,
    interrupted: Callable[[], bool] | None = None,
) -> None:
    """Make `machine` call `progress` as examples start, at most every `every` seconds, and
    stop the run with KeyboardInterrupt before an example once `interrupted()` is true."""
    if progress is None and interrupted is None:
        return
    started = time.monotonic()
    last = [started]
    original = machine.__init__

    def __init__(self: RuleBasedStateMachine) -> None:
        # Before the example's trio run starts: nothing is left half-open.
        if interrupted is not None and interrupted():
            raise KeyboardInterrupt
        original(self)
        now = time.monotonic()
        if progress is not None and now - last[0] >= every:
            last[0] = now
            stats: dict[str, int] = getattr(machine, "stats", {})
            progress(name, stats.get("examples", 0), now - started)

    machine.__init__ = __init__  # type: ignore[method-assign]


def _run(
    name: str,
    machine: type[RuleBasedStateMachine],
    budget: Settings,
    seed: int | None,
    spec: str | None,
    declared: Features | None = None,
) -> MachineReport:
    def run() -> None:
        run_state_machine_as_test(machine, settings=budget)

    started = time.monotonic()
    failure: BaseException | None = None
    threads: list[str] = []
    try:
        # seed None: as the settings say (derandomised: the same every run).
        with forcing_seed(seed), watching_threads() as threads:
            run()
    except Exception as exc:
        failure = found_in(exc, getattr(machine, "violations", ()))
    if failure is not None and threads:
        failure.add_note(threads_note(threads))
    elapsed = time.monotonic() - started
    stats: dict[str, int] = getattr(machine, "stats", {})
    histories: set[int] = getattr(machine, "histories", set())
    program = reproduction(name, failure, spec, declared) if failure is not None else None
    own = [p for p in PROPERTIES if p.machine == name]
    features: Features | None = None
    if issubclass(machine, AgentMachine):
        features = machine.features or Features()
        # An agent without `pending` (a factory without `approval`) is checked without it,
        # as if it declared none.
        absent = [
            name for name in ("pending", "approval", "stream") if stats.get(f"without {name}")
        ]
        checked, skipped, narrowed = coverage(own, features, absent=absent)
    else:
        checked, skipped, narrowed = tuple(own), (), ()
    return MachineReport(
        name,
        stats.get("examples", 0),
        stats.get("checks", 0),
        len(histories),
        elapsed,
        seed,
        failure,
        program,
        checked,
        skipped,
        narrowed,
        features,
        (*_notes(stats), *([threads_note(threads).splitlines()[0]] if threads else [])),
    )


def _notes(stats: Mapping[str, int]) -> tuple[str, ...]:
    """What a report says about how the target ran (the shell machine: sandboxed or not)."""
    notes: list[str] = []
    sandboxed, unsandboxed = stats.get("sandboxed", 0), stats.get("unsandboxed", 0)
    if sandboxed and unsandboxed:
        notes.append(
            "commands ran in the bubblewrap sandbox, and without one in the examples that "
            "drew the target's configuration that has none"
        )
    elif sandboxed:
        notes.append("commands ran in the bubblewrap sandbox")
    elif unsandboxed:
        notes.append("commands ran WITHOUT a sandbox (bubblewrap is not available here)")
    return tuple(notes)


def reproduction(
    machine: str, failure: BaseException, spec: str | None, features: Features | None = None
) -> str | None:
    """A runnable script that replays the shrunk failing program, or None if Hypothesis
    attached none (the failure was not a rule violation). `features`, given explicitly to
    the run, are written into it (declared ones come with the target)."""
    notes: list[str] = list(getattr(failure, "__notes__", []))
    steps: list[str] = []
    draws: list[str] = []
    recording = False
    for line in notes:
        if line.startswith("state = "):
            recording = True
            continue
        if not recording:
            continue
        drawn = _DRAW.match(line)
        if drawn is not None:
            draws.append(drawn.group("value"))
            continue
        if not line.startswith("state."):
            break
        if "data=data(...)" in line:
            line = line.replace("data=data(...)", f"data=Draws({', '.join(draws)})")
        draws = []
        steps.append(line)
    if not steps:
        return None
    base = MACHINES[machine].base.__name__
    lines = [
        f"# Replays the shrunk failing program of the {machine} machine; run it with python,",
        "# from any directory: the target is imported from the directory you run it in, else",
        "# from the one the conformance command ran in.",
        "import os",
        "import sys",
        "",
        f"sys.path[:0] = [os.getcwd(), {os.getcwd()!r}]",
        "",
        f"from agent_conformance import {base}  # noqa: E402",
    ]
    if any("RandomSeeder(" in step for step in steps):
        lines.append("from agent_conformance import RandomSeeder  # noqa: E402")
    if any("Draws(" in step for step in steps):
        lines.append("from agent_conformance import Draws  # noqa: E402")
    declares = [f"    features = {features!r}"] if features is not None else []
    if declares:
        lines.append("from agent_conformance import Features  # noqa: E402")
    if spec is not None:
        target_module, _, attr = spec.partition(":")
        lines += [
            f"from {target_module} import {attr} as target  # noqa: E402",
            "",
            "",
            f"class Machine({base}):",
            "    factory = staticmethod(target)",
            *declares,
            "",
            "",
            "state = Machine()",
        ]
    elif declares:
        lines += ["", "", f"class Machine({base}):", *declares, "", "", "state = Machine()"]
    else:
        lines += ["", f"state = {base}()"]
    # teardown() closes the trio run even when a step raised, as the machine would.
    body = checked_program(steps, MACHINES[machine].base)
    lines += ["try:", *(f"    {step}" for step in body), "finally:", "    state.teardown()"]
    return "\n".join(lines) + "\n"


NOT_REPLAYED = (
    "it did not replay: Hypothesis ran the same program again and it passed (what failed "
    "depends on timing, threads or state outside the program); the program below is the one "
    "that showed it"
)


def found_in(failure: Exception, seen: Sequence[ContractViolation] = ()) -> Exception:
    """What a run found, as a report shows it. A failure Hypothesis could not replay comes
    wrapped in its `FlakyFailure` group; the finding is the violation (else the first
    exception that is not Hypothesis's own) inside, noted as not replayed. When the replay
    went further than the failing run (`FlakyStrategyDefinition`: it passed the failing step
    and drew more), the finding is the first violation `seen` in the run, if any."""
    if isinstance(failure, hypothesis.errors.FlakyStrategyDefinition) and seen:
        seen[0].add_note(NOT_REPLAYED)
        return seen[0]
    if not isinstance(failure, hypothesis.errors.FlakyFailure):
        return failure
    leaves = [leaf for leaf in _leaves(failure) if isinstance(leaf, Exception)]
    violations = [leaf for leaf in leaves if isinstance(leaf, ContractViolation)]
    ours = hypothesis.errors.HypothesisException
    theirs = [leaf for leaf in leaves if not isinstance(leaf, ours)]
    found: Exception = (violations or theirs or [failure])[0]
    if found is not failure:
        found.add_note(NOT_REPLAYED)
    return found


def _leaves(group: BaseException) -> Iterator[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        inner: tuple[BaseException, ...] = cast("Any", group).exceptions
        for each in inner:
            yield from _leaves(each)
    else:
        yield group


def describe_failure(failure: BaseException | None) -> str:
    """What a report prints for a failure. Its first line names what broke: a violation of
    the contract as its own message (the property, the rule, what happened, then what the
    contract says); anything else as a crash, inside the implementation or the machine, with
    its exception, then the traceback. A failure that did not replay says so, with the
    program that showed it."""
    if failure is None:
        return ""
    notes: list[str] = list(getattr(failure, "__notes__", []))
    unreplayed = NOT_REPLAYED in notes
    if isinstance(failure, ContractViolation):
        text = str(failure)
    elif isinstance(failure, AssertionError):  # a check of a machine of the user's own
        text = f"AssertionError: {failure}"
    else:
        shown = traceback.TracebackException.from_exception(failure)
        # The notes hold the program, which the report prints as a script of its own.
        shown.__notes__ = None
        crash = "".join(shown.format()).rstrip()
        first = "".join(shown.format_exception_only()).strip().splitlines()[0]
        text = f"the implementation crashed (not a violation of a rule): {first}\n{crash}"
    if unreplayed:
        program = [note for note in notes if note.startswith(PROGRAM_NOTE)]
        text += "\n" + "\n".join([NOT_REPLAYED, *program[:1]])
    text += "".join(f"\n{note}" for note in notes if note.startswith(THREADS_NOTE))
    return text


def describe_coverage(report: MachineReport) -> list[str]:
    """What a report prints about what it checked: the features and designs it ran with
    (the agent machine), the properties checked, and each one skipped or checked in part,
    with the reason."""
    lines: list[str] = []
    features = report.features
    if features is not None and (features.missing or features.designs):
        missing = ", ".join(f"no {name}" for name in features.missing) or "every feature"
        designs = "".join(f", {k}={v!r}" for k, v in features.designs.items())
        lines.append(f"declared: {missing}{designs}")
    lines += list(report.notes)
    total = len(report.checked) + len(report.skipped)
    if not report.skipped and not report.narrowed:
        lines.append(f"checked: all {total} properties")
        return lines
    names = ", ".join(_label(p) for p in report.checked)
    lines.append(f"checked: {len(report.checked)} of {total} properties: {names}")
    lines += [f"{_label(p)}: skipped, {why}" for p, why in report.skipped]
    lines += [f"{_label(p)}: checked in part, {why}" for p, why in report.narrowed]
    return lines


def _label(prop: Property) -> str:
    return f"{prop.name} ({prop.rule})"


def check_machine(
    name: str,
    machine: type[RuleBasedStateMachine],
    settings: Settings | None,
    seed: int | None,
    features: Features | None = None,
) -> MachineReport:
    """What the `check_*_conformance` functions do: run machine `name` on `settings` (default:
    the profile's) made into that machine's budget, without a per-example deadline (an
    example waits on trio runs and real processes, far past Hypothesis's default 200 ms).
    Returns the report; raises the shrunk failure, with a note of the seed that replays
    it."""
    base = profile() if settings is None else settings
    budget = MACHINES[name].budget(Settings(base, deadline=None))
    if seed is None and not budget.derandomize:
        seed = random.randrange(2**32)
    report = _run(name, machine, budget, seed, None, features)
    if report.failure is not None:
        if seed is not None:
            report.failure.add_note(f"replay it with seed={seed}")
        raise report.failure
    return report
