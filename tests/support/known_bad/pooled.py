"""Seeded checks of the machines on real processes, several at a time, each in a process of
its own (D524). A check of the shell or MCP machine mostly waits on its processes and the
real clock (a tenth of its time is CPU), so one worker running them one after another sat
idle most of its nine minutes; three at a time fill each other's waits. Each runs
`check_caught` exactly as in-process (derandomised, no local constants), from `python -m
tests.support.known_bad.pooled NAME`, which prints `caught` or why not."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import subprocess
import sys
import traceback
from collections.abc import Iterable

__all__ = ["AT_ONCE", "CAUGHT", "run_pooled"]

AT_ONCE = 3
CAUGHT = "caught"
ROOT = pathlib.Path(__file__).resolve().parents[3]


def run_pooled(names: Iterable[str]) -> dict[str, str]:
    """Each seeded defect's check, `AT_ONCE` at a time: `CAUGHT`, or what happened instead."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def one(name: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.known_bad.pooled", name],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        said = done.stdout.strip()
        if done.returncode == 0 and said == CAUGHT:
            return CAUGHT
        return f"exit {done.returncode}: {said[-3000:]}\n{done.stderr[-3000:]}"

    ordered = list(names)
    with concurrent.futures.ThreadPoolExecutor(AT_ONCE) as pool:
        return dict(zip(ordered, pool.map(one, ordered), strict=True))


def main(name: str) -> int:
    from . import SEEDED
    from .catching import check_caught, forbid_local_constants

    forbid_local_constants()
    seeded = next(s for s in SEEDED if s.name == name)
    try:
        check_caught(seeded)
    except BaseException:  # the test that asked prints it
        print(traceback.format_exc(), flush=True)
        return 1
    print(CAUGHT, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
