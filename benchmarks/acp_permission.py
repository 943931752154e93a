"""What asking costs: the time of a prompt that runs one command (`!true`) through a real
`trio-agents acp` server and the real Python ACP client, in `ask` mode (the client answers
"allow once" at once) and in `auto` mode (nobody is asked), one server of each, their
prompts alternated. Prints the median and the 90th percentile of each, and the difference of
the medians: what one permission round trip adds to a prompt.

    python benchmarks/acp_permission.py [--prompts 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.acp_sdk import RecordingClient, new_session, prompt, server

MODES = ("auto", "ask")


async def timings(prompts: int, work: Path) -> dict[str, list[float]]:
    """Both servers at once, their prompts alternated, so a busy machine slows both alike."""
    clients = {mode: RecordingClient() for mode in MODES}
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    async with (
        server(clients["auto"], work / "auto.sqlite3", "--mode", "auto") as (auto, _),
        server(clients["ask"], work / "ask.sqlite3", "--mode", "ask") as (ask, _),
    ):
        conns = {"auto": auto, "ask": ask}
        sids = {mode: await new_session(conn, work) for mode, conn in conns.items()}
        for mode, conn in conns.items():  # warm: each server's first command
            await conn.prompt(session_id=sids[mode], prompt=prompt("!true"))
        for _ in range(prompts):
            for mode, conn in conns.items():
                started = time.perf_counter()
                answer = await conn.prompt(session_id=sids[mode], prompt=prompt("!true"))
                seconds[mode].append(time.perf_counter() - started)
                assert answer.stop_reason == "end_turn", answer
    assert len(clients["auto"].permissions) == 0
    assert len(clients["ask"].permissions) == prompts + 1
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=40)
    args = parser.parse_args(argv)
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        seconds = asyncio.run(timings(args.prompts, Path(directory)))
    for mode in MODES:
        medians[mode] = statistics.median(seconds[mode])
        p90 = statistics.quantiles(seconds[mode], n=10)[-1]
        print(f"{mode:>4}: median {medians[mode] * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms")
    print(f"one permission round trip: {(medians['ask'] - medians['auto']) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
