"""The tests' PostgreSQL server (tests/support/postgres.py) outlives nothing: a server whose
starting process was killed outright (a hard-killed xdist worker, which no fixture teardown
follows) is stopped and removed by the next `start_server`, with the copies it made for
nobody."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

import pytest

from .support import unprivileged
from .support.postgres import start_server

pytestmark = pytest.mark.subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent

# A process that starts a server, says where, and waits to be killed.
STARTER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.support import unprivileged
from tests.support.postgres import start_server
server = start_server()
print(server.root, flush=True)
# The copies it made for nobody, from a checkout closed to others (D380), or none.
print(" ".join(str(path) for path in unprivileged.own_directories()), flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Whether `pid` is a process that has not exited. An exited postmaster may stay a
    zombie: its parent is this container's init, which need not reap it soon."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_a_server_whose_starter_was_killed_is_stopped_by_the_next_start() -> None:
    # This process's own copies made first, as in a whole run, where start_server's sweep,
    # not the making of them, must remove the starter's.
    unprivileged.own_directory()
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(ROOT)], stdout=subprocess.PIPE, text=True
    )
    assert starter.stdout is not None
    with starter.stdout:
        try:
            root = pathlib.Path(starter.stdout.readline().strip())
            copies = [pathlib.Path(path) for path in starter.stdout.readline().split()]
        finally:
            starter.kill()
            starter.wait()
    postmaster = int((root / "data" / "postmaster.pid").read_text().split()[0])
    assert running(postmaster)  # the kill left it running, reparented away
    server = start_server()
    try:
        assert not root.exists()
        assert not [path for path in copies if path.exists()]
        # pg_ctl waited for the shutdown; init reaps the process: poll a real condition.
        deadline = time.monotonic() + 30
        while running(postmaster) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(postmaster)
        assert server.root.exists()  # the new one, whose starter lives, is left alone
    finally:
        server.stop()
