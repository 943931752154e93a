"""`trio-agents acp`: serve the Agent Client Protocol on this process's stdin and stdout.

Stdout carries protocol frames only; logs go to stderr. End of stdin closes every session's
agent (the store keeps the sessions) and the process exits 0.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import trio

from .._options import AgentOptions
from .._store_sqlite import default_store_path
from ..acp import serve_stdio
from ._args import positive_int
from ._model_choice import MODELS

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    acp = commands.add_parser("acp", help="serve the Agent Client Protocol on stdio")
    acp.add_argument(
        "--store",
        type=Path,
        default=None,
        help=f"the SQLite session store (default: {default_store_path()})",
    )
    acp.add_argument(
        "--model",
        choices=sorted(MODELS),
        default="offline",
        help="the model every session uses (default: offline, which needs no network)",
    )
    acp.add_argument(
        "--max-steps",
        type=positive_int,
        default=None,
        help="end a turn after this many model calls (ACP stop reason max_turn_requests)",
    )
    acp.add_argument("--verbose", action="store_true", help="log more, to stderr")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if args.verbose else logging.WARNING,
        format="trio-agents acp: %(levelname)s %(name)s: %(message)s",
    )
    options = AgentOptions(max_steps=args.max_steps)
    factory = MODELS[args.model]
    try:
        factory()  # a model that is not configured should say so now, not at session/new
    except ValueError as exc:
        print(f"trio-agents acp: --model {args.model}: {exc}", file=sys.stderr)
        return 2
    trio.run(serve_stdio, args.store, factory, options)
    return 0
