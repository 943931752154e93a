"""The `trio-agents` command."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import _acp as acp_cli
from . import _chat as chat_cli
from . import _conformance_acp as acp_conformance_cli
from . import _sessions as sessions_cli
from ._failure import print_failure

__all__ = ["main"]


def _load_target(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"--target must look like 'package.module:factory', got {spec!r}")
    # Like `python -m`, look in the working directory first: targets live in your project.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise SystemExit(f"--target: module {module_name!r} has no attribute {attr!r}") from None


def _progress(machine: str, examples: int, seconds: float) -> None:
    print(f"  ... {machine} machine: {examples} examples so far ({seconds:.0f}s)", flush=True)


def _conformance(args: argparse.Namespace) -> int:
    # Imported here: the conformance suite needs Hypothesis, the rest of the command not.
    from ..testing._conformance import describe_coverage, run_conformance
    from ..testing._features import features_of, raised_by_features

    try:
        factory = _load_target(args.target) if args.target else None
        features_of(factory)  # a declaration that cannot be fails here, before any run
    except (TypeError, ValueError) as exc:
        # Also raised while importing the target, by a bad `Features(...)` in its module.
        # Any other error importing a target is a bug of its own, shown with its traceback.
        if not raised_by_features(exc):
            raise
        print(f"trio-agents conformance: --target {args.target}: {exc}", file=sys.stderr)
        return 2
    runtime_factory = _load_target(args.runtime_target) if args.runtime_target else None
    shell_factory = _load_target(args.shell_target) if args.shell_target else None
    mcp_opener = _load_target(args.mcp_target) if args.mcp_target else None
    given = (args.target, args.runtime_target, args.shell_target, args.mcp_target)
    targets = [t for t in given if t] or ["built-in runtime"]
    print(f"trio-agents conformance: {', '.join(targets)}, profile {args.profile or 'ci'}")
    reports = run_conformance(
        factory,
        runtime_factory=runtime_factory,
        shell_factory=shell_factory,
        mcp_opener=mcp_opener,
        factory_spec=args.target,
        runtime_spec=args.runtime_target,
        shell_spec=args.shell_target,
        mcp_spec=args.mcp_target,
        profile_name=args.profile,
        max_examples=args.max_examples,
        seed=args.seed,
        progress=_progress,
    )
    for report in reports:
        counts = (
            f"{report.examples} examples, {report.checks} checked steps, "
            f"{report.histories} distinct histories, seed {report.seed} ({report.seconds:.1f}s)"
        )
        verdict = "passed" if report.passed else "FAILED"
        print(f"  {report.machine} machine: {verdict}, {counts}")
        for line in describe_coverage(report):
            print(f"    {line}")
        if report.passed:
            continue
        print_failure(report, f"trio-agents conformance ... --seed {report.seed}")
    return 0 if all(report.passed for report in reports) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trio-agents")
    commands = parser.add_subparsers(dest="command", required=True)
    conformance = commands.add_parser(
        "conformance", help="run the property-based conformance suite"
    )
    conformance.add_argument(
        "--target", help="module:factory of an agent implementation (the agent machine)"
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
    conformance.add_argument("--profile", choices=["ci", "deep"], default=None)
    conformance.add_argument("--max-examples", type=int, default=None)
    conformance.add_argument("--seed", type=int, default=None)
    acp_conformance_cli.add_arguments(conformance)
    sessions_cli.add_parser(commands)
    acp_cli.add_parser(commands)
    chat_cli.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "sessions":
        return sessions_cli.run(args)
    if args.command == "acp":
        return acp_cli.run(args)
    if args.command == "chat":
        return chat_cli.run(args)
    if args.acp:
        return acp_conformance_cli.run(args)
    if args.agent_command:
        parser.error(f"unexpected arguments {' '.join(args.agent_command)!r} (without --acp)")
    return _conformance(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
