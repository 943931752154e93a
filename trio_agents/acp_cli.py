"""`trio-agents acp`: serve the Agent Client Protocol on this process's stdin and stdout.

Stdout carries protocol frames only; logs go to stderr. End of stdin closes every session's
agent (the store keeps the sessions) and the process exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import trio

from .acp import AcpServer
from .bash_tools import BashTools
from .cli_args import positive_int
from .model import Model
from .model_choice import MODELS
from .options import AgentOptions
from .runtime import open_runtime
from .sqlite_store import default_store_path
from .store import SessionStore

__all__ = ["add_parser", "run", "serve_stdio"]


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


async def serve_stdio(
    store: SessionStore | Path | None,
    model_factory: Callable[[], Model],
    options: AgentOptions | None = None,
) -> None:
    # Duplicates: trio makes the descriptors non-blocking and closes them when done.
    receive = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    send = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    bash = BashTools()
    async with open_runtime(store) as rt, receive, send:
        await rt.load(bash)
        server = AcpServer(rt, model_factory, bash=bash, options=options, version=_version())
        await server.serve(receive, send)


def _version() -> str:
    try:
        return metadata.version("trio-agents")
    except metadata.PackageNotFoundError:
        return "0"
