"""The `trio-agents` command."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from . import sessions_cli

__all__ = ["main"]


def _load_target(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"--target must look like 'package.module:factory', got {spec!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise SystemExit(f"--target: module {module_name!r} has no attribute {attr!r}") from None


def _conformance(args: argparse.Namespace) -> int:
    # Imported here: the conformance suite needs Hypothesis, the rest of the command not.
    from .testing.conformance import run_conformance

    factory = _load_target(args.target) if args.target else None
    print(
        f"trio-agents conformance: {args.target or 'built-in runtime'}, "
        f"profile {args.profile or 'ci'}"
    )
    reports = run_conformance(
        factory, profile_name=args.profile, max_examples=args.max_examples, seed=args.seed
    )
    for report in reports:
        if report.passed:
            print(
                f"  {report.machine} machine: passed, {report.examples} examples, "
                f"{report.checks} checked steps ({report.seconds:.1f}s)"
            )
        else:
            print(
                f"  {report.machine} machine: FAILED after {report.examples} examples "
                f"({report.seconds:.1f}s)"
            )
            print(f"  {type(report.failure).__name__}: {report.failure}")
    return 0 if all(report.passed for report in reports) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trio-agents")
    commands = parser.add_subparsers(dest="command", required=True)
    conformance = commands.add_parser(
        "conformance", help="run the property-based conformance suite"
    )
    conformance.add_argument("--target", help="module:factory of the implementation to check")
    conformance.add_argument("--profile", choices=["ci", "deep"], default=None)
    conformance.add_argument("--max-examples", type=int, default=None)
    conformance.add_argument("--seed", type=int, default=None)
    sessions_cli.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "sessions":
        return sessions_cli.run(args)
    return _conformance(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
