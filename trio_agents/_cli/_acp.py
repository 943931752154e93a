"""`trio-agents acp`: serve the Agent Client Protocol on this process's stdin and stdout.

Stdout carries protocol frames only; logs go to stderr. End of stdin closes every session's
agent (the store keeps the sessions) and the process exits 0.
"""

from __future__ import annotations

import argparse
import logging
import sys
from functools import partial
from typing import Any

import trio

from .._options import AgentOptions
from .._shell import ShellExecutor
from ..acp import serve_stdio
from ._args import (
    add_max_steps,
    add_model,
    add_sandbox,
    add_store,
    configure_logging,
    sandbox_policy,
)
from ._model_choice import MODELS

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    acp = commands.add_parser("acp", help="serve the Agent Client Protocol on stdio")
    add_store(acp)
    add_model(
        acp,
        default="offline",
        help="the model every session uses (default: offline, which needs no network)",
    )
    add_max_steps(
        acp, help="end a turn after this many model calls (ACP stop reason max_turn_requests)"
    )
    add_sandbox(acp)
    acp.add_argument("--verbose", action="store_true", help="log more, to stderr")


def run(args: argparse.Namespace) -> int:
    configure_logging("acp", logging.INFO if args.verbose else logging.WARNING)
    options = AgentOptions(max_steps=args.max_steps)
    factory = MODELS[args.model]
    try:
        factory()  # a model that is not configured should say so now, not at session/new
    except ValueError as exc:
        print(f"trio-agents acp: --model {args.model}: {exc}", file=sys.stderr)
        return 2
    policy = sandbox_policy("acp", args)
    if policy is None:
        return 2
    trio.run(
        partial(serve_stdio, shell=ShellExecutor(sandbox=policy)), args.store, factory, options
    )
    return 0
