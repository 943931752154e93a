"""PostgreSQL appends against SQLite, in one run: records/s appended as turns, each turn's
five records committed by a flush, one session per store.

    python benchmarks/store_appends.py [--repeat 5] [--quick] [--dsn postgresql://...]

Without `--dsn` a PostgreSQL server is started for the run in a temporary directory, as the
tests start theirs (tests/support/postgres.py), but with the server's durable defaults
(`fsync` on, `synchronous_commit` on: each commit waits for the WAL to reach the disk),
over its Unix socket. SQLite runs as SqliteStore always does (WAL, `synchronous=NORMAL`: a
commit survives the process being killed, not a power failure), so PostgreSQL with its
defaults is the more durable of the two. The second PostgreSQL figure gives the store's
connections `synchronous_commit=off` (through the DSN's `options`), SQLite's class of
durability: a commit survives the client being killed; a crash of the server may lose the
last fraction of a second. The target is on that one. Repetitions are interleaved, so drift
in machine load hits all three alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path

import trio

from trio_agents import PostgresStore, Session, SessionStore, SqliteStore

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.5  # PostgreSQL appends/s at least half SQLite's


async def appends_per_second(store: SessionStore, turns: int) -> float:
    """Records/s appended as `turns` turns of 5 records, each turn flushed."""
    async with store.running():
        session = Session(f"bench-{time.monotonic_ns()}")
        detach = store.enter(session)
        start = time.perf_counter()
        for turn in range(1, turns + 1):
            session.append("turn/start", {"turn": turn})
            session.append("user/message", {"id": f"m{turn}", "content": "hi"})
            session.append("assistant/message", {"content": "ok"})
            session.append("step/end", {"turn": turn, "step": 1})
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            await store.flush(session)
        rate = turns * 5 / (time.perf_counter() - start)
        detach()
    return rate


@contextmanager
def database(dsn: str | None) -> Generator[str]:
    """The DSN given, or a new database on a server started for the run."""
    if dsn is not None:
        yield dsn
        return
    sys.path.insert(0, str(ROOT))
    from tests.support.postgres import start_server  # the tests' server, from a checkout

    server = start_server(fsync=True)
    try:
        yield server.new_database()
    finally:
        server.stop()


def measure(repeat: int, quick: bool, dsn: str | None) -> list[tuple[str, str, str, str]]:
    """The rows run.py prints: (name, value, versus, verdict)."""
    from psycopg.conninfo import make_conninfo  # psycopg comes with PostgresStore's extra

    turns = 100 if quick else 500
    pg: list[float] = []
    relaxed: list[float] = []
    lite: list[float] = []
    with database(dsn) as url, tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bench.sqlite3")
        fast = make_conninfo(url, options="-c synchronous_commit=off")
        runs: list[tuple[list[float], Callable[[], SessionStore]]] = [
            (pg, lambda: PostgresStore(url)),
            (relaxed, lambda: PostgresStore(fast)),
            (lite, lambda: SqliteStore(path)),
        ]
        for _ in range(repeat):
            for into, make in runs:
                into.append(trio.run(appends_per_second, make(), turns))
    middle = statistics.median(sorted(r / s for r, s in zip(relaxed, lite, strict=True)))
    return [
        ("SQLite appends, each turn flushed", _summary(lite), "", ""),
        ("PostgreSQL appends, each turn flushed", _summary(pg), _versus(pg, lite), ""),
        (
            "  synchronous_commit=off",
            _summary(relaxed),
            _versus(relaxed, lite),
            f"{'met' if middle >= TARGET else 'MISSED'} (>= {TARGET}x SQLite)",
        ),
    ]


def _versus(values: list[float], baseline: list[float]) -> str:
    ratios = sorted(v / b for v, b in zip(values, baseline, strict=True))
    return f"{statistics.median(ratios):6.2f}x (min {ratios[0]:.2f}, max {ratios[-1]:.2f}) SQLite"


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):10.1f} rec/s (min {min(values):.1f}, max {max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer turns, for a smoke run")
    parser.add_argument("--dsn", default=None, help="a database to use (default: start one)")
    args = parser.parse_args(argv)
    rows = measure(args.repeat, args.quick, args.dsn)
    width = max(len(row[0]) for row in rows)
    for name, value, versus, target in rows:
        print(f"{name:<{width}}  {value}  {versus}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
