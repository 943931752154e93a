"""The `trio-agents` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._version import VERSION
from . import _acp as acp_cli
from . import _chat as chat_cli
from . import _sessions as sessions_cli

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["conformance"]:
        # The suite is a product of its own; this name for it stays (design: Layout).
        from agent_conformance import main as conformance_main  # Hypothesis: only when run

        return conformance_main(argv[1:], prog="trio-agents conformance")
    parser = argparse.ArgumentParser(prog="trio-agents")
    parser.add_argument("--version", action="version", version=f"trio-agents {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "conformance",
        help="run the property-based conformance suite (the agent-conformance command)",
    )
    sessions_cli.add_parser(commands)
    acp_cli.add_parser(commands)
    chat_cli.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "sessions":
        return sessions_cli.run(args)
    if args.command == "acp":
        return acp_cli.run(args)
    return chat_cli.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
