"""What "acknowledged means durable" costs: ACP answer latency when `session/prompt` waits for
the SQLite commit of its turn (rule L9) against a baseline in the same run that answers
without waiting (the store's `flush` made a no-op), for 1 session and for 20 sessions
prompting at once. Also counts the commits, to show that sessions settling together share
one (group commit) rather than queueing one commit each.

    python benchmarks/ack_latency.py [--repeat 5] [--prompts 200]

The server runs in process over memory streams with the offline model and a real SQLite
file in a temporary directory, so the figures are the server's own cost plus the disk's.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

from trio_agents import BashTools, OfflineModel, Session, SqliteStore, open_runtime
from trio_agents.acp._server import AcpServer


class CountingStore(SqliteStore):
    """A SqliteStore that counts its commits (writer batches)."""

    commits = 0

    def _write_batch(self, headers: Any, batch: Any) -> None:
        self.commits += 1
        super()._write_batch(headers, batch)


class NoWaitStore(CountingStore):
    """The baseline: `flush` returns at once, so an answer never waits for the disk (what the
    server did before rule L9). Its records still commit behind, as before."""

    async def flush(self, session: Session) -> None:
        await trio.lowlevel.checkpoint()


class Client:
    """A JSON-RPC client over memory streams: send requests, wait for their answers."""

    def __init__(self, send: trio.abc.SendStream) -> None:
        self._send = send
        self._sending = trio.StrictFIFOLock()
        self._next = 0
        self._waiting: dict[int, trio.Event] = {}
        self.answers: dict[int, dict[str, Any]] = {}

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        self._next += 1
        request_id = self._next
        self._waiting[request_id] = done = trio.Event()
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        async with self._sending:
            await self._send.send_all(json.dumps(frame).encode() + b"\n")
        await done.wait()
        return self.answers.pop(request_id)

    async def read(self, receive: trio.abc.ReceiveStream) -> None:
        buffer = b""
        async for data in receive:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                frame = json.loads(line)
                if "method" not in frame and frame.get("id") in self._waiting:
                    self.answers[frame["id"]] = frame
                    self._waiting.pop(frame["id"]).set()


async def run_once(store: CountingStore, sessions: int, prompts: int) -> tuple[list[float], int]:
    """Latencies of `prompts` prompts per session, the sessions prompting concurrently, and
    the commits made while they ran."""
    to_server_send, to_server_receive = trio.testing.memory_stream_one_way_pair()
    to_client_send, to_client_receive = trio.testing.memory_stream_one_way_pair()
    client = Client(to_server_send)
    latencies: list[float] = []
    bash = BashTools()
    async with open_runtime(store) as rt:
        await rt.load(bash)
        server = AcpServer(rt, OfflineModel, bash=bash)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.read, to_client_receive)

            async def serve() -> None:
                await server.serve(to_server_receive, to_client_send)
                await to_client_send.aclose()

            nursery.start_soon(serve)
            ids: list[str] = []
            for _ in range(sessions):
                answer = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
                ids.append(answer["result"]["sessionId"])

            async def prompter(sid: str) -> None:
                for i in range(prompts):
                    params = {"sessionId": sid, "prompt": [{"type": "text", "text": f"p{i}"}]}
                    start = time.perf_counter()
                    answer = await client.request("session/prompt", params)
                    latencies.append(time.perf_counter() - start)
                    assert answer["result"] == {"stopReason": "end_turn"}, answer

            commits_before = store.commits
            async with trio.open_nursery() as prompting:
                for sid in ids:
                    prompting.start_soon(prompter, sid)
            commits = store.commits - commits_before
            await to_server_send.aclose()
    return latencies, commits


def measure(waiting: bool, sessions: int, prompts: int) -> tuple[list[float], int]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.sqlite3"
        store = CountingStore(path) if waiting else NoWaitStore(path)
        return trio.run(run_once, store, sessions, prompts)


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=200, help="prompts per session")
    args = parser.parse_args(argv)
    print(
        f"ACP answer latency, waiting for the commit vs not (baseline, same run); median of "
        f"{args.repeat} interleaved runs; python {sys.version.split()[0]}"
    )
    ok_all = True
    for sessions in (1, 20):
        prompts = args.prompts if sessions == 1 else max(1, args.prompts // 10)
        p50: dict[bool, list[float]] = {True: [], False: []}
        p99: dict[bool, list[float]] = {True: [], False: []}
        commits: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeat):
            for waiting in (False, True):  # interleaved: machine drift hits both alike
                latencies, made = measure(waiting, sessions, prompts)
                p50[waiting].append(pct(latencies, 0.5))
                p99[waiting].append(pct(latencies, 0.99))
                commits[waiting].append(made / (sessions * prompts))
        ratio50 = statistics.median(p50[True]) / statistics.median(p50[False])
        ratio99 = statistics.median(p99[True]) / statistics.median(p99[False])
        per_prompt = statistics.median(commits[True])
        # The target: waiting costs at most one extra commit's wait, so p50 at most 2x the
        # baseline; and sessions share commits (at most 4 per prompt, the turn's own
        # triggers: turn start, step end, turn end, plus the answer's flush).
        ok = ratio50 <= 2.0 and per_prompt <= 4.0
        ok_all = ok_all and ok
        print(
            f"{sessions:>2} session(s) x {prompts} prompts: "
            f"p50 {statistics.median(p50[True]) * 1e3:.2f} ms vs "
            f"{statistics.median(p50[False]) * 1e3:.2f} ms baseline ({ratio50:.2f}x), "
            f"p99 {statistics.median(p99[True]) * 1e3:.2f} ms vs "
            f"{statistics.median(p99[False]) * 1e3:.2f} ms ({ratio99:.2f}x); "
            f"commits per prompt {per_prompt:.2f} (baseline "
            f"{statistics.median(commits[False]):.2f}); "
            f"{'met' if ok else 'MISSED'} (p50 <= 2x baseline, <= 4 commits per prompt)"
        )
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
