"""`agent-conformance` against Python targets: load them, run, report.

Every mistake a user can make on the command line (a target that does not import, an
attribute that is not there, an object that is not an agent) is one line naming the flag and
the value, exit 2; Ctrl-C stops the run with the seed and what passed so far, exit 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import signal
import sys
from typing import Any

from ._failure import print_failure

__all__ = ["add_arguments", "run"]

DOCS = "docs/conformance.md"
# The machines' names, in the order they run (`_conformance.MACHINES`, which imports
# Hypothesis: too slow to import for `--help`; a test keeps the two equal).
MACHINE_NAMES = ("agent", "lifecycle", "durable", "shell", "mcp")
# With no target, the main job also checks the built-in runtime's ACP server (D409).
BUILTIN_ACP = "acp"
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
        choices=[*MACHINE_NAMES, BUILTIN_ACP],
        default=None,
        metavar="NAME",
        help=f"run only this machine ({', '.join(MACHINE_NAMES)}, and {BUILTIN_ACP} for the "
        "built-in runtime's ACP server); repeat it for more (default: every machine with a "
        "target, all of them without one)",
    )
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


def _progress(machine: str, examples: int, seconds: float) -> None:
    print(f"  ... {machine} machine: {examples} examples so far ({seconds:.0f}s)", flush=True)


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
    others = None if chosen is None else [m for m in chosen if m != BUILTIN_ACP]
    try:
        kinds = {"--target": "agent", "--runtime-target": "runtime", "--shell-target": "shell"}
        given_kinds = [kinds.get(flag, "mcp") for flag, spec in given.items() if spec]
        if given_kinds and chosen is not None and BUILTIN_ACP in chosen:
            raise ValueError(
                "the acp machine checks the built-in runtime's ACP server; check another "
                f"ACP agent with {args.prog} --acp -- CMD"
            )
        with_acp = with_acp and not given_kinds
        check_machine_choice(others or (), given_kinds)
    except ValueError as exc:
        print(f"{args.prog}: --machine: {exc}", file=sys.stderr)
        return 2
    targets = [spec for spec in given.values() if spec] or ["built-in runtime"]
    finished: list[Any] = []
    stop: list[bool] = []
    # Chosen here, not by the run, so an interrupted run can still say how to replay it.
    seed = args.seed if args.seed is not None else random.randrange(2**32)

    def on_sigint(signum: int, frame: object) -> None:
        # The first Ctrl-C stops the run before its next example (the trio runs of the
        # examples are left to end cleanly); a second one is an ordinary interrupt.
        stop.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_sigint)
    # Printed once Ctrl-C is handled: from this line on, it stops the run cleanly.
    print(f"{args.prog}: {', '.join(targets)}, profile {args.profile or 'ci'}", flush=True)
    try:
        if others != []:  # [] when only the acp machine was chosen
            run_conformance(
                loaded.get("--target"),
                runtime_factory=loaded.get("--runtime-target"),
                shell_factory=loaded.get("--shell-target"),
                mcp_opener=loaded.get("--mcp-target"),
                factory_spec=args.target,
                runtime_spec=args.runtime_target,
                shell_spec=args.shell_target,
                mcp_spec=args.mcp_target,
                profile_name=args.profile,
                max_examples=args.max_examples,
                seed=seed,
                progress=_progress,
                on_report=lambda report: _keep_and_print(finished, report, args.prog),
                interrupted=lambda: bool(stop),
                machines=others,
            )
        if with_acp and not stop:
            from ._acp import run_builtin  # the ACP schema, only when run

            report = run_builtin(
                args.prog, args.profile, args.max_examples, seed, lambda: bool(stop)
            )
            if report is not None:
                finished.append(report)
    except KeyboardInterrupt:
        passed = ", ".join(r.machine for r in finished if r.passed) or "none"
        print(
            f"{args.prog}: interrupted; machines passed so far: {passed}; "
            f"replay this run with --seed {seed}",
            file=sys.stderr,
        )
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    shape = [r for r in finished if isinstance(r.failure, TargetShapeError)]
    if shape:
        print(f"{args.prog}: --target {args.target}: {shape[0].failure}", file=sys.stderr)
        return 2
    _print_summary(finished)
    return 0 if all(report.passed for report in finished) else 1


def _keep_and_print(finished: list[Any], report: Any, prog: str) -> None:
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
