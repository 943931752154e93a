"""Every trio test runs on an autojump MockClock inside a deadlock guard.

With the autojump clock, virtual time only passes when every task is blocked, so a
`fail_after` of one virtual hour fires exactly when a test has deadlocked: a hang becomes an
immediate, deterministic failure. Tests marked `subprocess` or `realtime` wait on real
processes or worker threads (SQLite), during which an autojump clock would leap ahead and
fire every timeout; they run on the real clock with a wall-clock bound.
"""

from __future__ import annotations

import compileall
import functools
import inspect
import pathlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import settings

from agent_conformance._profiles import profile

from .support import unprivileged
from .support.bwrap import ensure_bwrap
from .support.postgres import PgServer, start_server

# TRIO_AGENTS_PROFILE=deep runs every Hypothesis test with the deep budget.
settings.register_profile("trio-agents", profile())
settings.load_profile("trio-agents")

VIRTUAL_GUARD = 3600.0
REAL_GUARD = 120.0


def _guarded_run(seconds: float, autojump: bool) -> Callable[..., Any]:
    def run(
        fn: Callable[[], Awaitable[Any]],
        *,
        clock: trio.abc.Clock | None = None,
        instruments: Sequence[trio.abc.Instrument] = (),
    ) -> Any:
        async def guarded() -> Any:
            try:
                with trio.fail_after(seconds):
                    return await fn()
            except trio.TooSlowError:
                kind = "virtual" if autojump else "real"
                raise AssertionError(
                    f"deadlock guard: the test was still blocked after {seconds:.0f} {kind} seconds"
                ) from None

        if clock is None and autojump:
            clock = trio.testing.MockClock(autojump_threshold=0)
        return trio.run(guarded, clock=clock, instruments=instruments)

    return run


@pytest.fixture(scope="session")
def bwrap() -> tuple[str | None, str]:
    """bubblewrap, found or installed once per run (tests/support/bwrap.py)."""
    return ensure_bwrap()


@pytest.fixture(autouse=True)
def _sandbox_available(request: pytest.FixtureRequest, bwrap: tuple[str | None, str]) -> None:
    # Commands run sandboxed by default: a real-process test without bubblewrap fails here,
    # saying why, instead of skipping. Asked before any test runs, so no test on the
    # autojump clock ever waits for the check (it would jump to its deadline meanwhile).
    path, reason = bwrap
    if path is None and request.node.get_closest_marker("subprocess") is not None:
        pytest.fail(f"this test needs bubblewrap, and it could not be had: {reason}")


# The test files that take longest on CI's workers (seconds of a worker, measured on a
# clean-clone run at three workers), run first: a long file started last runs alone at the
# end while the others idle (D483, D503). Pytest-xdist keeps this order with
# --no-loadscope-reorder (addopts).
LONGEST_FIRST = (
    "test_acp_seeded.py",  # 405 s
    "test_acp_conformance.py",  # 250 s
    "test_known_bad.py",  # 372 s
    "test_known_bad_shell.py",  # 229 s, three at a time (D524)
    "test_static_and_docs.py",  # 154 s
    "test_cli.py",  # 147 s
    "test_chat_machine.py",  # 140 s
    "test_acp_verdict_run.py",  # 61 s
    "test_shell_reproduction.py",  # 39 s
    "test_peer_adapters.py",  # 33 s
    "test_sandbox.py",  # 33 s
    "test_shell_machine.py",  # 29 s
    "test_sandbox_escapes.py",  # 28 s
    "test_signals.py",  # 27 s
    "test_cli_mistakes.py",  # 26 s
)


def _rank(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: a file's tests stay together and in their order
    for item in items:
        function = getattr(item, "obj", None)
        inner = getattr(getattr(function, "hypothesis", None), "inner_test", function)
        if inner is None or not inspect.iscoroutinefunction(inner):
            continue
        real = any(item.get_closest_marker(m) is not None for m in ("subprocess", "realtime"))
        run = _guarded_run(REAL_GUARD, False) if real else _guarded_run(VIRTUAL_GUARD, True)
        # Prepended, so pytest-trio finds this runner before trio_mode's default one.
        item.add_marker(pytest.mark.trio(run=functools.partial(run)), append=False)


# The packages whose modules the tests' subprocesses import (servers, agents, the CLI).
COMPILED = ("trio_agents", "agent_conformance", "tests", "examples")


def pytest_configure(config: pytest.Config) -> None:
    # Bytecode for every module, written once by the controller before the workers start:
    # where PYTHONDONTWRITEBYTECODE is set (CI's image sets it) no process writes its own,
    # and each of the hundreds of Python processes the tests start (an ACP server per
    # example, MCP servers, the CLI) compiled the sources again: 0.67 s an import of the
    # server where it takes 0.22 s from bytecode (D501). compileall writes whatever that
    # variable says, and skips what is up to date.
    if hasattr(config, "workerinput"):
        return
    root = pathlib.Path(__file__).resolve().parents[1]
    for package in COMPILED:
        compileall.compile_dir(root / package, quiet=2)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish() -> None:
    # Last: after the session's fixtures are torn down (the runner's own sessionfinish does
    # that), since the server is stopped by a copied pg_ctl.
    unprivileged.remove_copies()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    """One real PostgreSQL server per pytest process (each xdist worker its own), started
    at the first test that asks and stopped at the end (tests/support/postgres.py)."""
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_dsn(postgres_server: PgServer) -> str:
    """The DSN of a new, empty database of its own for one test."""
    return postgres_server.new_database()
