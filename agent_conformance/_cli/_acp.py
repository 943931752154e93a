"""`agent-conformance --acp [--env NAME=TEMPLATE] [--config-file PATH=TEMPLATE] --
CMD [ARGS...]`: the ACP machine against any ACP agent command."""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

from ._failure import print_failure
from ._lanes import OUTPUT, installed, progress, say

__all__ = ["add_arguments", "run"]

PLACEHOLDERS = "{base_url}, {api_key}, {model}, {dir}, {workdir}"


DEFAULT_TIMEOUT = 20.0
DEFAULT_GRACE = 5.0


def misplaced(args: argparse.Namespace) -> str | None:
    """The error for flags that the mode `args` asks for would ignore, or None: a flag of
    the ACP mode without `--acp`, or a Python target with it."""
    if args.acp:
        targets = (
            "--target",
            "--runtime-target",
            "--shell-target",
            "--mcp-target",
            "--function-target",
            "--model-target",
        )
        given = [flag for flag in targets if getattr(args, flag[2:].replace("-", "_"))]
        if given:
            names = (
                "names a Python implementation"
                if len(given) == 1
                else "name Python implementations"
            )
            return (
                f"{', '.join(given)} {names}, which --acp does not check; leave "
                f"{'it' if len(given) == 1 else 'them'} out, or run without --acp"
            )
        return None
    ours: dict[str, object] = {
        "--env": args.env,
        "--config-file": args.config_file,
        "--timeout": args.timeout is not None,
        "--grace": args.grace is not None,
    }
    command = [part for part in args.agent_command if part != "--"]
    if command:
        ours[f"the agent command {shlex.join(command)!r}"] = True
    given = [flag for flag, value in ours.items() if value]
    if len(given) == 1:
        return f"{given[0]} applies only with --acp; add --acp, or leave it out"
    if given:
        return f"{', '.join(given)} apply only with --acp; add --acp, or leave them out"
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ACP mode's flags on the `conformance` parser."""
    parser.add_argument(
        "--acp",
        action="store_true",
        help="check the ACP agent started by the command after `--` (ACP over its stdio)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=TEMPLATE",
        help=f"with --acp: set NAME in the agent's environment; placeholders {PLACEHOLDERS} "
        "(default: OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL point at the suite's "
        "endpoint)",
    )
    parser.add_argument(
        "--config-file",
        action="append",
        default=[],
        metavar="PATH=TEMPLATE",
        help="with --acp: write TEMPLATE (placeholders filled) to PATH before each start; a "
        "relative PATH is inside the example's directory {dir}; TEMPLATE @FILE reads a file",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,  # 20: None tells a flag given without --acp from one not given
        help="with --acp: seconds any answer may take (default 20)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=None,  # 5
        help="with --acp: seconds the agent may take to exit at end of input (default 5)",
    )
    parser.add_argument(
        "--no-shrink",
        action="store_true",
        help="report the first failing program as found, without shrinking it (a failure "
        "of a machine on real processes can take minutes to shrink)",
    )
    parser.add_argument(
        "agent_command",
        nargs="*",
        metavar="-- CMD [ARGS...]",
        help="with --acp: the agent's command",
    )


def _pairs(values: Sequence[str], flag: str, prog: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for value in values:
        name, sep, template = value.partition("=")
        if not sep or not name:
            raise SystemExit(f"{prog}: {flag} {value!r}: write it as NAME=TEMPLATE")
        if flag == "--config-file" and template.startswith("@"):
            try:
                with open(template[1:]) as source:
                    template = source.read()
            except OSError as exc:
                raise SystemExit(
                    f"{prog}: {flag} {value!r}: cannot read {template[1:]!r}: {exc.strerror}"
                ) from None
        pairs.append((name, template))
    return tuple(pairs)


def run(args: argparse.Namespace) -> int:
    """Run the ACP mode and print its report; the exit status."""
    command: list[str] = list(args.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print(
            f"{args.prog} --acp: name the agent's command after `--`, e.g. "
            f"{args.prog} --acp -- trio-agents acp --model openai",
            file=sys.stderr,
        )
        return 2
    found = shutil.which(command[0])
    if found is None:
        print(
            f"{args.prog} --acp: {command[0]!r} is not a command here (not on PATH "
            "and not a path to an executable)",
            file=sys.stderr,
        )
        return 2
    # The agent runs in the example's work directory: a relative command must still resolve.
    command[0] = os.path.abspath(found) if os.sep in command[0] else found
    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    grace = DEFAULT_GRACE if args.grace is None else args.grace
    for flag, value in (("--timeout", timeout), ("--grace", grace)):
        if not value > 0:
            print(f"{args.prog}: {flag} must be > 0 seconds, got {value}", file=sys.stderr)
            return 2
    try:
        # Imported here: the suite needs Hypothesis and the ACP schema, the rest of the
        # command neither.
        from .._acp._client import AcpTarget
        from .._acp._run import run_acp_conformance
    except ImportError as exc:  # acp.schema: the agent-client-protocol package
        print(
            f"{args.prog} --acp needs the ACP schema package ({exc.name} is missing): "
            "pip install 'trio-agents[acp-conformance]'",
            file=sys.stderr,
        )
        return 2
    target = AcpTarget(
        tuple(command),
        env=_pairs(args.env, "--env", args.prog),
        files=_pairs(args.config_file, "--config-file", args.prog),
        timeout=timeout,
        grace=grace,
    )
    shown = shlex.join(command)
    # Chosen here, not by the run, so an interrupted run can still say how to replay it.
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    stop: list[bool] = []

    def on_sigint(signum: int, frame: object) -> None:
        # The first Ctrl-C stops the run before its next example (the agent processes of
        # the example under way are closed as usual); a second one is an ordinary interrupt.
        stop.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_sigint)
    # Printed once Ctrl-C is handled: from this line on, it stops the run cleanly.
    print(f"{args.prog} --acp: {shown}, profile {args.profile or 'ci'}", flush=True)
    try:
        run_ = run_acp_conformance(
            target,
            profile_name=args.profile,
            max_examples=args.max_examples,
            seed=seed,
            shrink=not args.no_shrink,
            progress=progress,
            interrupted=lambda: bool(stop),
        )
    except KeyboardInterrupt:
        print(
            f"{args.prog} --acp: interrupted; replay this run with --seed {seed}",
            file=sys.stderr,
        )
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    return _print_acp_run(run_, f"{args.prog} --acp ... --seed {{seed}} -- {shown}")


def _print_acp_run(run_: Any, replay: str) -> int:
    """Print what an ACP run found, as `--acp` does; 0 if it passed, else 1. `replay`: the
    command that replays it, with `{seed}` for the run's seed."""
    from .._acp._client import AgentSetupError  # the ACP schema, only when run

    report = run_.report
    counts = (
        f"{report.examples} examples, {report.checks} checked steps, "
        f"{report.histories} distinct histories, seed {report.seed} ({report.seconds:.1f}s)"
    )
    info = run_.advertised.get("agentInfo")
    if isinstance(info, dict):
        agent = cast("dict[str, Any]", info)
        print(f"  the agent says it is {agent.get('name')} {agent.get('version')}")
    loads = (
        "session/load checked"
        if run_.advertised.get("loadSession")
        else "session/load not advertised: not checked"
    ) + (
        ", session/list checked"
        if run_.advertised.get("listSessions")
        else ", session/list not advertised: not checked"
    )
    if run_.landed:
        where = ", ".join(f"{point} {n}" for point, n in sorted(run_.landed.items()))
        print(f"  cancels that landed where aimed: {where}")
    if run_.asked:
        answers = ", ".join(f"{answer} {n}" for answer, n in sorted(run_.asked.items()))
        print(f"  permission requests answered: {answers}")
    else:
        print("  permission requests answered: none (the agent never asked)")
    if report.passed:
        print(f"  acp machine: passed, {counts}; {loads}")
        return 0
    if isinstance(report.failure, AgentSetupError):
        print(f"  acp machine: NOT CHECKED: {report.failure}")
        return 1
    print(f"  acp machine: FAILED, {counts}; {loads}")
    print_failure(report, replay.replace("{seed}", str(report.seed)))
    return 1


def run_builtin(
    prog: str,
    profile: str | None,
    max_examples: int | None,
    seed: int,
    interrupted: Callable[[], bool] | None = None,
) -> Any:
    """The main job's ACP machine: the built-in runtime's ACP server (`trio-agents acp
    --model openai`, this Python) checked as any ACP agent is (D409). Its report, printed;
    None, after one line saying why, when the ACP schema is not installed."""
    try:
        # Imported here: the ACP schema, which only this machine needs and a plain install
        # leaves out.
        from .._acp._client import AcpTarget  # the ACP schema, only when run
        from .._acp._run import run_acp_conformance  # the ACP schema, only when run
    except ImportError as exc:  # acp.schema: the agent-client-protocol package
        say(
            f"  acp machine: not run: it needs the ACP schema package ({exc.name} is "
            "missing): pip install 'trio-agents[acp-conformance]'"
        )
        return None
    found = installed("trio-agents")
    if found is None:
        say("  acp machine: not run: no trio-agents command here to start")
        return None
    command = (found, "acp", "--model", "openai")
    target = AcpTarget(command, timeout=DEFAULT_TIMEOUT, grace=DEFAULT_GRACE)
    run_ = run_acp_conformance(
        target,
        profile_name=profile,
        max_examples=max_examples,
        seed=seed,
        progress=progress,
        interrupted=interrupted,
    )
    with OUTPUT:  # one block, between the other lanes' (D417)
        _print_acp_run(run_, f"{prog} --machine acp --seed {{seed}}")
    from .._acp._properties import (  # the ACP schema, only when run
        LOAD_REPLAYS,
        PROPERTIES,
        SESSIONS_LISTED,
    )

    advertised = run_.advertised
    unchecked: set[str] = set()
    if not advertised.get("loadSession"):
        unchecked.add(LOAD_REPLAYS.name)
    if not advertised.get("listSessions"):
        unchecked.add(SESSIONS_LISTED.name)
    checked = tuple(p for p in PROPERTIES if p.name not in unchecked)
    return dataclasses.replace(run_.report, checked=checked)
