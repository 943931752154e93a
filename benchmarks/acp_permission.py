"""What asking costs: the time of a prompt that runs one command (`!true`) through a real
`trio-agents acp` server and the real Python ACP client, in `ask` mode (the client answers
"allow once" at once) and in `auto` mode (nobody is asked), in one session each. Prints the
median and the 90th percentile of each, and their difference: one permission round trip.

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


async def timings(mode: str, prompts: int, work: Path) -> list[float]:
    client = RecordingClient()
    async with server(client, work / f"{mode}.sqlite3", "--mode", mode) as (conn, _):
        sid = await new_session(conn, work)
        await conn.prompt(session_id=sid, prompt=prompt("!true"))  # warm: the first command
        seconds: list[float] = []
        for _ in range(prompts):
            started = time.perf_counter()
            answer = await conn.prompt(session_id=sid, prompt=prompt("!true"))
            seconds.append(time.perf_counter() - started)
            assert answer.stop_reason == "end_turn", answer
        asked = len(client.permissions)
        assert asked == (prompts + 1 if mode == "ask" else 0), asked
        return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=40)
    args = parser.parse_args(argv)
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        for mode in ("auto", "ask"):
            seconds = asyncio.run(timings(mode, args.prompts, Path(directory)))
            medians[mode] = statistics.median(seconds)
            p90 = statistics.quantiles(seconds, n=10)[-1]
            print(f"{mode:>4}: median {medians[mode] * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms")
    print(f"one permission round trip: {(medians['ask'] - medians['auto']) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
