"""`agent-conformance` against Python targets: load them, run, report.

Every mistake a user can make on the command line (a target that does not import, an
attribute that is not there, an object that is not an agent) is one line naming the flag and
the value, exit 2; Ctrl-C stops the run with the seed and what passed so far, exit 130.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import random
import signal
import sys
from typing import Any

from ._chat import BUILTIN_CHAT, run_builtin_chat
from ._failure import print_failure
from ._lanes import (
    OUTPUT,
    READY,
    LaneReport,
    Lanes,
    child_command,
    lane_line,
    progress,
    run_lanes,
)

__all__ = ["add_arguments", "run"]

DOCS = "docs/conformance.md"
# The machines' names, in the order they run (`_conformance.MACHINES`, which imports
# Hypothesis: too slow to import for `--help`; a test keeps the two equal).
MACHINE_NAMES = ("agent", "lifecycle", "durable", "shell", "mcp", "function", "model")
MACHINE_KINDS = ("agent", "runtime", "runtime", "shell", "mcp", "function", "model")
# With no target, the main job also checks the built-in runtime's ACP server (D409).
BUILTIN_ACP = "acp"
# With no target, the main job also checks the built-in runtime's chat command (D466).
BUILTIN = (BUILTIN_ACP, BUILTIN_CHAT)
# With more than one lane, the order the machines start in: the longest first, so the
# lanes end together (typical times of the ci profile on two cores: 30, 30, 20, 17, 10, 9,
# 8, 2 s).
LONGEST_FIRST = (
    "mcp", "shell", BUILTIN_CHAT, BUILTIN_ACP, "lifecycle", "durable", "agent", "model",
    "function",
)  # fmt: skip
# The typical wall time of each profile's full run of every machine on two cores: what
# `--help` tells a user to expect before they start one.
PROFILE_TIMES = {"ci": "about a minute", "deep": "tens of minutes"}


def add_arguments(conformance: argparse.ArgumentParser) -> None:
    """The Python-target arguments of `agent-conformance`."""
    conformance.add_argument(
        "--target",
        help="module:factory of an agent implementation (the agent machine); the module "
        "is imported from the current directory first, like `python -m`",
    )
    conformance.add_argument(
        "--runtime-target",
        help="module:factory(store) of a runtime implementation (the lifecycle and durable "
        "machines)",
    )
    conformance.add_argument(
        "--shell-target",
        help="module:factory(cwd) of a shell executor implementation (the shell machine)",
    )
    conformance.add_argument(
        "--mcp-target",
        help="module:opener of MCP tools, with open_mcp_tools's signature (the MCP machine)",
    )
    conformance.add_argument(
        "--function-target",
        help="module:maker of tools from typed functions, with function_tool's signature "
        "(the function machine)",
    )
    conformance.add_argument(
        "--model-target",
        help="module:maker of a model adapter for an OpenAI-compatible endpoint, "
        "make(base_url, *, api_key, max_retries) (the model machine)",
    )
    times = "; ".join(f"{name}: {time}" for name, time in PROFILE_TIMES.items())
    conformance.add_argument(
        "--profile",
        choices=["ci", "deep"],
        default=None,
        help=f"the budget (default: ci, or $TRIO_AGENTS_PROFILE); a full run takes {times}",
    )
    conformance.add_argument(
        "--max-examples",
        type=positive_int,
        default=None,
        metavar="N",
        help="programs per machine (default: the profile's, 300 for ci, 5000 for deep)",
    )
    conformance.add_argument(
        "--machine",
        action="append",
        choices=[*MACHINE_NAMES, *BUILTIN],
        default=None,
        metavar="NAME",
        help=f"run only this machine ({', '.join(MACHINE_NAMES)}, and {BUILTIN_ACP} and "
        f"{BUILTIN_CHAT} for the built-in runtime's ACP server and chat command); repeat it "
        "for more (default: every machine with a target, all of them without one)",
    )
    conformance.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="run N machines at a time, each in a process of its own (default: 2 where there "
        "are two cores or more, else 1); the seed replays the run whatever N is",
    )
    conformance.add_argument("--lane-of", default=None, help=argparse.SUPPRESS)  # D417
    conformance.add_argument(
        "--seed",
        type=int,
        default=None,
        help="replay a run: the seed a report printed (default: a random seed)",
    )


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, or a usage error that says so."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def load_target(flag: str, spec: str) -> Any:
    """The object `spec` (`module:attr`) names; otherwise a LookupError whose message, naming
    `flag`, is the whole line to print."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise LookupError(f"{flag} must look like 'package.module:factory', got {spec!r}")
    # Like `python -m`, look in the working directory first: targets live in your project.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise LookupError(
                f"{flag} {spec}: no module named {module_name!r} here ({os.getcwd()}); run "
                "from the directory that holds it, or add that directory to PYTHONPATH"
            ) from None
        raise LookupError(f"{flag} {spec}: importing {module_name!r} failed: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise LookupError(f"{flag} {spec}: module {module_name!r} has no {attr!r}") from None


def run(args: argparse.Namespace) -> int:
    """Run the machines on the targets `args` names; the exit status."""
    # Imported here: the conformance suite needs Hypothesis, the rest of the command not.
    from .._conformance import check_machine_choice, run_conformance
    from .._features import features_of, raised_by_features  # (Hypothesis, too)
    from .._target import TargetShapeError  # (Hypothesis, too)

    given = {
        "--target": args.target,
        "--runtime-target": args.runtime_target,
        "--shell-target": args.shell_target,
        "--mcp-target": args.mcp_target,
        "--function-target": args.function_target,
        "--model-target": args.model_target,
    }
    loaded: dict[str, Any] = {}
    try:
        for flag, spec in given.items():
            if spec is not None:
                loaded[flag] = load_target(flag, spec)
        features_of(loaded.get("--target"))  # a declaration that cannot be fails here
    except LookupError as exc:
        print(f"{args.prog}: {exc.args[0]}", file=sys.stderr)
        return 2
    except (TypeError, ValueError) as exc:
        # Also raised while importing the target, by a bad `Features(...)` in its module.
        # Any other error importing a target is a bug of its own, shown with its traceback.
        if not raised_by_features(exc):
            raise
        print(f"{args.prog}: --target {args.target}: {exc}", file=sys.stderr)
        return 2
    chosen: list[str] | None = args.machine
    with_acp = chosen is None or BUILTIN_ACP in chosen
    with_chat = chosen is None or BUILTIN_CHAT in chosen
    others = None if chosen is None else [m for m in chosen if m not in BUILTIN]
    try:
        kinds = {
            "--target": "agent",
            "--runtime-target": "runtime",
            "--shell-target": "shell",
            "--mcp-target": "mcp",
            "--function-target": "function",
            "--model-target": "model",
        }
        given_kinds = [kinds[flag] for flag, spec in given.items() if spec]
        if given_kinds and chosen is not None and BUILTIN_ACP in chosen:
            raise ValueError(
                "the acp machine checks the built-in runtime's ACP server; check another "
                f"ACP agent with {args.prog} --acp -- CMD"
            )
        if given_kinds and chosen is not None and BUILTIN_CHAT in chosen:
            raise ValueError(
                "the chat machine checks the built-in runtime's chat command, not a target"
            )
        with_acp = with_acp and not given_kinds
        with_chat = with_chat and not given_kinds
        check_machine_choice(others or (), given_kinds)
    except ValueError as exc:
        print(f"{args.prog}: --machine: {exc}", file=sys.stderr)
        return 2
    targets = [spec for spec in given.values() if spec] or ["built-in runtime"]
    kind_of = dict(zip(MACHINE_NAMES, MACHINE_KINDS, strict=True))
    names = (
        others
        if others is not None
        else [name for name in MACHINE_NAMES if not given_kinds or kind_of[name] in given_kinds]
    )
    order = [
        *names,
        *([BUILTIN_ACP] if with_acp else []),
        *([BUILTIN_CHAT] if with_chat else []),
    ]
    # Chosen here, not by the run, so an interrupted run can still say how to replay it.
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    lanes = args.jobs if args.jobs is not None else min(2, os.cpu_count() or 1)
    if args.lane_of is None and lanes > 1 and len(order) > 1:
        # The longest machines start first, so the lanes end together (D417).
        order.sort(key=LONGEST_FIRST.index)
        return _in_lanes(args, order, lanes, seed, targets)
    prog = args.lane_of or args.prog
    finished: list[Any] = []
    stop: list[bool] = []

    def on_sigint(signum: int, frame: object) -> None:
        # The first Ctrl-C stops the run before its next example (the trio runs of the
        # examples are left to end cleanly); a second one is an ordinary interrupt.
        stop.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_sigint)
    # Printed once Ctrl-C is handled: from this line on, it stops the run cleanly.
    if args.lane_of is None:
        print(f"{prog}: {', '.join(targets)}, profile {args.profile or 'ci'}", flush=True)
    else:
        print(READY, flush=True)
    try:
        for name in order:
            if name == BUILTIN_ACP:
                from ._acp import run_builtin  # the ACP schema, only when run

                report = run_builtin(
                    prog, args.profile, args.max_examples, seed, lambda: bool(stop)
                )
                if report is not None:
                    finished.append(report)
                continue
            if name == BUILTIN_CHAT:
                report = run_builtin_chat(
                    prog,
                    args.profile,
                    args.max_examples,
                    seed,
                    lambda report: _print_report(report, prog),
                    lambda: bool(stop),
                )
                if report is not None:
                    finished.append(report)
                continue
            run_conformance(
                loaded.get("--target"),
                runtime_factory=loaded.get("--runtime-target"),
                shell_factory=loaded.get("--shell-target"),
                mcp_opener=loaded.get("--mcp-target"),
                function_tool_factory=loaded.get("--function-target"),
                model_factory=loaded.get("--model-target"),
                factory_spec=args.target,
                runtime_spec=args.runtime_target,
                shell_spec=args.shell_target,
                mcp_spec=args.mcp_target,
                function_spec=args.function_target,
                model_spec=args.model_target,
                profile_name=args.profile,
                max_examples=args.max_examples,
                seed=seed,
                progress=progress,
                on_report=lambda report: _keep_and_print(finished, report, prog),
                interrupted=lambda: bool(stop),
                machines=[name],
                shrink=not args.no_shrink,
            )
    except KeyboardInterrupt:
        if args.lane_of is None:
            _print_interrupted(prog, [r for r in finished if r.passed], seed)
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    shape = [r for r in finished if isinstance(r.failure, TargetShapeError)]
    if shape:
        print(f"{prog}: --target {args.target}: {shape[0].failure}", file=sys.stderr)
        return 2
    if args.lane_of is not None:
        for report in finished:
            print(lane_line(report.machine, [p.name for p in report.checked], report.passed))
    else:
        _print_summary(finished)
    return 0 if all(report.passed for report in finished) else 1


def _in_lanes(
    args: argparse.Namespace, order: list[str], lanes: int, seed: int, targets: list[str]
) -> int:
    """Run each machine of `order` in a child process of its own, `lanes` at a time."""
    common: list[str] = ["--seed", str(seed), "--jobs", "1", "--lane-of", args.prog]
    for flag, value in (
        ("--target", args.target),
        ("--runtime-target", args.runtime_target),
        ("--shell-target", args.shell_target),
        ("--mcp-target", args.mcp_target),
        ("--function-target", args.function_target),
        ("--model-target", args.model_target),
        ("--profile", args.profile),
        ("--max-examples", args.max_examples),
    ):
        if value is not None:
            common += [flag, str(value)]
    if args.no_shrink:
        common.append("--no-shrink")
    children = Lanes()
    statuses: list[int] = []
    reports: list[LaneReport] = []

    def machine(name: str) -> None:
        status, said = children.run(child_command(args.prog, "--machine", name, *common))
        statuses.append(status)
        reports.extend(said)

    def on_sigint(signum: int, frame: object) -> None:
        children.interrupt()  # the first stops each machine cleanly, the second at once

    previous = signal.signal(signal.SIGINT, on_sigint)
    print(f"{args.prog}: {', '.join(targets)}, profile {args.profile or 'ci'}", flush=True)
    try:
        run_lanes([functools.partial(machine, name) for name in order], lanes)
    finally:
        signal.signal(signal.SIGINT, previous)
    if 2 in statuses:  # the child said why, on stderr
        return 2
    if children.stopping or 130 in statuses:
        _print_interrupted(args.prog, [r for r in reports if r.passed], seed)
        return 130
    if len(reports) < len(order) or any(status not in (0, 1) for status in statuses):
        print(
            f"{args.prog}: a machine's process ended without a report (exit statuses "
            f"{sorted(set(statuses))}); its output is above",
            file=sys.stderr,
        )
        return 1
    reports.sort(key=lambda report: [*MACHINE_NAMES, *BUILTIN].index(report.machine))
    _print_summary(reports)
    return 0 if all(report.passed for report in reports) else 1


def _print_interrupted(prog: str, passed: list[Any], seed: int) -> None:
    names = ", ".join(report.machine for report in passed) or "none"
    print(
        f"{prog}: interrupted; machines passed so far: {names}; replay this run with --seed {seed}",
        file=sys.stderr,
    )


def _keep_and_print(finished: list[Any], report: Any, prog: str) -> None:
    with OUTPUT:
        finished.append(report)
        _print_report(report, prog)


def _print_report(report: Any, prog: str) -> None:
    from .._conformance import describe_coverage  # Hypothesis, only when run
    from .._target import TargetShapeError  # Hypothesis, only when run

    if isinstance(report.failure, TargetShapeError):
        return  # one line at the end, not a failure report
    counts = (
        f"{report.examples} examples, {report.checks} checked steps, "
        f"{report.histories} distinct histories, seed {report.seed} ({report.seconds:.1f}s)"
    )
    verdict = "passed" if report.passed else "FAILED"
    print(f"  {report.machine} machine: {verdict}, {counts}", flush=True)
    for line in describe_coverage(report):
        print(f"    {line}")
    if not report.passed:
        print_failure(report, f"{prog} ... --seed {report.seed}")


def _print_summary(reports: list[Any]) -> None:
    checked = sum(len(report.checked) for report in reports)
    machines = ", ".join(f"{r.machine} ({len(r.checked)})" for r in reports)
    verdict = "all held" if all(r.passed for r in reports) else "not all held"
    print(
        f"checked {checked} properties on {len(reports)} "
        f"machine{'' if len(reports) == 1 else 's'}: {machines}; {verdict}. "
        f"What each property means, and the rule it checks: {DOCS}"
    )
