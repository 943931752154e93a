"""A real `trio-agents acp` server process driven over raw JSON-RPC lines, blocking, with a
bounded wait on every read: for the kill and backpressure tests, which need the process
itself (its pid, its stdout pipe, a SIGKILL at an exact point)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["AcpProcess", "StallReport", "rss_kib", "stall"]


def rss_kib(pid: int) -> int:
    """The resident set size of `pid` in KiB, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class AcpProcess:
    """`trio-agents acp --store STORE` (a file or a database URL; offline model) in a child
    process running this checkout's code. Frames read are kept in `frames`, in arrival order."""

    def __init__(self, store: Path | str, *extra: str) -> None:
        command = [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(store)]
        # `auto`: these tests run commands with no client to answer permission requests.
        self.process = subprocess.Popen(
            [*command, "--mode", "auto", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self._in = self.process.stdin
        self._out = self.process.stdout.fileno()
        self._buffer = b""
        self._next_id = 0
        self.frames: list[dict[str, Any]] = []

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, method: str, params: Mapping[str, Any]) -> int:
        """Send a request; returns its id."""
        self._next_id += 1
        self.write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def write(self, frame: Mapping[str, Any]) -> None:
        self._in.write(json.dumps(frame).encode() + b"\n")
        self._in.flush()

    def read_frame(self, timeout: float = 30.0) -> dict[str, Any] | None:
        """The next frame, or None at end of output; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no frame from the ACP server within {timeout}s")
            ready, _, _ = select.select([self._out], [], [], left)
            if not ready:
                continue
            data = os.read(self._out, 1 << 20)
            if not data:
                return None
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        frame: dict[str, Any] = json.loads(line)
        self.frames.append(frame)
        return frame

    def read_available(self, timeout: float) -> None:
        """Read what arrives within `timeout` seconds (at most one read), keeping its frames."""
        ready, _, _ = select.select([self._out], [], [], timeout)
        if ready:
            data = os.read(self._out, 1 << 20)
            self._buffer += data
            *lines, self._buffer = self._buffer.split(b"\n")
            self.frames += [json.loads(line) for line in lines]

    def answer(self, request_id: int, timeout: float = 30.0) -> dict[str, Any]:
        """The answer to `request_id`, among the frames read or reading on until it comes."""
        for seen in self.frames:
            if seen.get("id") == request_id and "method" not in seen:
                return seen
        while True:
            frame = self.read_frame(timeout)
            if frame is None:
                raise AssertionError(f"the server ended before answering {request_id}")
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    def result(self, method: str, params: Mapping[str, Any]) -> Any:
        answer = self.answer(self.send(method, params))
        assert "result" in answer, answer
        return answer["result"]

    def initialize(self) -> None:
        self.result("initialize", {"protocolVersion": 1})

    def new_session(self, cwd: Path) -> str:
        return str(self.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"])

    def prompt(self, session_id: str, text: str) -> int:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return self.send("session/prompt", params)

    def kill(self) -> None:
        """SIGKILL, then read what the pipe still holds (written before the death)."""
        os.kill(self.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        while self.read_frame() is not None:
            pass
        self.close()

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)

    def answered(self, ids: Sequence[int]) -> list[int]:
        """The ids among `ids` that were answered with a result, in the frames read."""
        wanted = set(ids)
        return [
            int(f["id"])
            for f in self.frames
            if "result" in f and "method" not in f and f.get("id") in wanted
        ]


@dataclass
class StallReport:
    """What `stall` saw: RSS samples (seconds since the stall began, KiB) while the client
    did not read, the RSS just before, and the frames read once it read again."""

    rss_before: int
    samples: list[tuple[float, int]] = field(default_factory=list[tuple[float, int]])
    requests_sent: int = 0
    after: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    @property
    def peak(self) -> int:
        return max(rss for _, rss in self.samples)


def stall(
    server: AcpProcess,
    cwd: Path,
    *,
    seconds: float,
    interval: float = 0.5,
    sessions: int = 4,
    on_sample: Callable[[float, int], None] | None = None,
) -> StallReport:
    """Open `sessions` sessions running `/loop` (a tool call per step, for ever), then stop
    reading the server's output for `seconds` while a thread keeps sending requests, sampling
    the server's RSS every `interval`. Then read again, cancel every session, and check that
    each loop's prompt answers `cancelled` and a new prompt answers `end_turn`."""
    server.initialize()
    ids = [server.new_session(cwd) for _ in range(sessions)]
    report = StallReport(rss_kib(server.pid))
    loops = [server.prompt(sid, "/loop") for sid in ids]
    stop = threading.Event()

    def pump() -> None:
        # Blocking writes: once the server stops reading, this blocks in the pipe, which is
        # the point; it returns once the server reads again.
        while not stop.is_set():
            try:
                server.send("initialize", {"protocolVersion": 1})
            except (BrokenPipeError, ValueError):
                return
            report.requests_sent += 1

    pumper = threading.Thread(target=pump, daemon=True)
    start = time.monotonic()
    pumper.start()
    while (elapsed := time.monotonic() - start) < seconds:
        rss = rss_kib(server.pid)
        report.samples.append((elapsed, rss))
        if on_sample is not None:
            on_sample(elapsed, rss)
        time.sleep(interval)  # the sampling period, not a wait for a condition
    stop.set()
    first = len(server.frames)
    deadline = time.monotonic() + 60
    while pumper.is_alive():  # read, so the server reads again and the pump's write ends
        assert time.monotonic() < deadline, "the request pump never got unblocked"
        server.read_available(0.1)
    for sid in ids:
        server.write({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    for request_id in loops:
        answer = server.answer(request_id, timeout=60)
        assert answer.get("result") == {"stopReason": "cancelled"}, answer
    answer = server.answer(server.prompt(ids[0], "after the stall"), timeout=60)
    assert answer.get("result") == {"stopReason": "end_turn"}, answer
    report.after = server.frames[first:]
    return report
