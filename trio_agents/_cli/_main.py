"""The `trio-agents` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._version import VERSION
from . import _acp as acp_cli
from . import _chat as chat_cli
from . import _conformance as conformance_cli
from . import _conformance_acp as acp_conformance_cli
from . import _sessions as sessions_cli

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trio-agents")
    parser.add_argument("--version", action="version", version=f"trio-agents {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    conformance = commands.add_parser(
        "conformance", help="run the property-based conformance suite"
    )
    conformance_cli.add_arguments(conformance)
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
    wrong = acp_conformance_cli.misplaced(args)
    if wrong is not None:
        conformance.error(wrong)
    if args.acp:
        return acp_conformance_cli.run(args)
    return conformance_cli.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
