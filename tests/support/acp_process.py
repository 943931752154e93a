"""A real `trio-agents acp` server process driven over raw JSON-RPC lines, blocking, with a
bounded wait on every read: for the kill and backpressure tests, which need the process
itself (its pid, its stdout pipe, a SIGKILL at an exact point)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["AcpProcess", "rss_kib"]


def rss_kib(pid: int) -> int:
    """The resident set size of `pid` in KiB, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class AcpProcess:
    """`trio-agents acp --store STORE` (offline model) in a child process running this
    checkout's code. Frames read are kept in `frames`, in arrival order."""

    def __init__(self, store: Path, *extra: str) -> None:
        command = [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(store)]
        self.process = subprocess.Popen(
            [*command, *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        assert self.process.stdin is not None and self.process.stdout is not None
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

    def answer(self, request_id: int, timeout: float = 30.0) -> dict[str, Any]:
        """Read frames until the answer to `request_id`."""
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
                try:
                    stream.close()
                except BrokenPipeError:
                    pass
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
