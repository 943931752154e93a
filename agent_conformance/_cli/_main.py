"""The `agent-conformance` command: the suite against Python targets, or `--acp` against any
ACP agent's command. `trio-agents conformance ARGS` is this command under the runtime's name."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trio_agents import __version__

from . import _acp as acp_cli
from . import _run as run_cli

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, prog: str = "agent-conformance") -> int:
    """Run the command on `argv` (default: `sys.argv[1:]`); `prog` is the name its messages
    and `--help` go by. Returns the exit status."""
    parser = argparse.ArgumentParser(
        prog=prog, description="run the property-based conformance suite"
    )
    parser.add_argument("--version", action="version", version=f"{prog} {__version__}")
    run_cli.add_arguments(parser)
    acp_cli.add_arguments(parser)
    args = parser.parse_args(argv)
    args.prog = prog
    wrong = acp_cli.misplaced(args)
    if wrong is not None:
        parser.error(wrong)
    if args.acp:
        return acp_cli.run(args)
    return run_cli.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
