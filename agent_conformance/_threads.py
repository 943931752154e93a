"""Threads a target starts while a machine runs: where each came from, so a report can say
that work ran outside the trio run's schedule. No trio import.

The machines drive one trio run, step by step; work a framework hands to a thread pool runs
beside that schedule, so what it does can change from run to run, and a failure it causes
may not replay. Threads of trio itself, of the runtime's stores and of the suite are
expected and not reported.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import traceback
from collections.abc import Generator

__all__ = ["THREADS_NOTE", "threads_note", "watching_threads"]

THREADS_NOTE = "the target ran work in threads of its own"

# Code whose threads are expected: trio's, the runtime's and the suite's.
_EXPECTED = frozenset({"trio", "trio_asyncio", "trio_agents", "agent_conformance", "hypothesis"})


@contextlib.contextmanager
def watching_threads() -> Generator[list[str]]:
    """Within the block, record where each new thread was started from, as
    `name (file:line, in function)`, when that is code other than the expected's."""
    started: list[str] = []
    original = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        origin = _origin()
        if origin is not None:
            started.append(f"{thread.name} ({origin})")
        original(thread)

    threading.Thread.start = start  # type: ignore[method-assign, assignment]
    try:
        yield started
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]


def _origin() -> str | None:
    """Where the thread being started comes from: the innermost frame of the starting stack
    outside the standard library (a pool the stdlib runs belongs to whoever asked for it),
    or None when that frame is trio's, the runtime's or the suite's."""
    here = inspect.currentframe()
    # Past this function and the patched `start` that called it.
    caller = here.f_back.f_back if here is not None and here.f_back is not None else None
    for frame, line in traceback.walk_stack(caller):
        top = str(frame.f_globals.get("__name__", "")).split(".")[0]
        if top in sys.stdlib_module_names:
            continue
        if top in _EXPECTED:
            return None
        return f"{frame.f_code.co_filename}:{line}, in {frame.f_code.co_name}"
    return None


def threads_note(started: list[str]) -> str:
    """The note a failure carries when the target started threads of its own."""
    shown = "\n".join(f"  {entry}" for entry in sorted(set(started))[:5])
    return (
        f"{THREADS_NOTE} ({len(started)} started), beside the trio run the machine drives: "
        f"what they do can change from run to run, so a failure may not replay.\n{shown}"
    )
