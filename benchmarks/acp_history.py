"""The ACP prompt round trip of a session with a long history against one with a short
history, in one server (D331).

    python benchmarks/acp_history.py [--repeat 5] [--history 2000]

The server is the ACP server with the memory store and the offline model, in this process
over memory streams (as benchmarks/ack_latency.py runs it), so each round trip can be timed
in the process's CPU time, which leaves out what other processes of a shared machine take.
One session is given `--history` prompts, another 20; after a full garbage collection, 150
prompts of each are timed, one of each in turn (which goes first alternating), so whatever
the machine does meanwhile falls on both alike. The figure is the ratio of the mean round
trips, long against short, per repetition; the target is run.py's, 1.2x.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import trio
import trio.testing
from ack_latency import Client

from trio_agents import MemoryStore, OfflineModel, open_runtime
from trio_agents.acp._server import AcpServer

SHORT = 20
TIMED = 150


async def measure(history: int) -> tuple[float, float]:
    """(mean CPU time of a round trip of the short-history session, of the long one)."""
    to_server_send, to_server_receive = trio.testing.memory_stream_one_way_pair()
    to_client_send, to_client_receive = trio.testing.memory_stream_one_way_pair()
    client = Client(to_server_send)
    async with open_runtime(MemoryStore()) as rt:
        server = AcpServer(rt, OfflineModel)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.read, to_client_receive)

            async def serve() -> None:
                await server.serve(to_server_receive, to_client_send)
                await to_client_send.aclose()

            nursery.start_soon(serve)

            async def prompt(sid: str) -> float:
                params = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
                start = time.process_time()
                answer = await client.request("session/prompt", params)
                spent = time.process_time() - start
                assert answer["result"] == {"stopReason": "end_turn"}, answer
                return spent

            sessions: list[str] = []
            for _ in range(2):
                answer = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
                sessions.append(answer["result"]["sessionId"])
            short, long = sessions
            for _ in range(history):
                await prompt(long)
            for _ in range(SHORT):
                await prompt(short)
            gc.collect()
            spent = {short: 0.0, long: 0.0}
            for lap in range(TIMED):
                for sid in (short, long) if lap % 2 == 0 else (long, short):
                    spent[sid] += await prompt(sid)
            await to_server_send.aclose()
    return spent[short] / TIMED, spent[long] / TIMED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--history", type=int, default=2000)
    args = parser.parse_args(argv)
    ratios: list[float] = []
    for _ in range(args.repeat):
        short, long = trio.run(measure, args.history)
        ratios.append(long / short)
        print(
            f"ACP prompt round trip: {long * 1e6:.0f} us CPU at {args.history:,} prompts of "
            f"history, {short * 1e6:.0f} us CPU at {SHORT}: {long / short:.2f}x",
            flush=True,
        )
    median = statistics.median(ratios)
    print(f"median {median:.2f}x: {'met' if median <= 1.2 else 'MISSED'} (<= 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
