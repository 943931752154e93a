"""What MCP servers cost an ACP session (issue 18): `trio-agents acp` of this checkout, on a
fresh store, with N stdio reference servers (`agent_conformance._mcp_server`).

    python benchmarks/acp_mcp.py [--runs 5]

Times, per run, in seconds: `session/new` with no server, with one and with three (they
start concurrently); one prompt that calls the server's `echo` (`/tool`); the exit after
end of input with one server; and the exit after SIGTERM with a server that ignores SIGTERM
and spawned a child (its group gets SIGKILL after the 2 s grace). Prints the median, min
and max of each, and checks after every run that no server process is left (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "agent_conformance._mcp_server"]
ACP = [sys.executable, "-m", "trio_agents._cli", "acp"]


class Acp:
    def __init__(self, store: Path) -> None:
        self.env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [*ACP, "--store", str(store), "--mode", "auto"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self.env,
        )
        self.next_id = 0

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            answer: dict[str, Any] = json.loads(self.process.stdout.readline())
            if answer.get("id") == self.next_id and "method" not in answer:
                assert "result" in answer, answer
                return answer

    def server(self, name: str, *flags: str) -> dict[str, Any]:
        env = [{"name": "PYTHONPATH", "value": self.env["PYTHONPATH"]}]
        return {"name": name, "command": SERVER[0], "args": [*SERVER[1:], *flags], "env": env}


def timed(action: Callable[[], object]) -> float:
    start = time.monotonic()
    action()
    return time.monotonic() - start


def live(marker: str) -> list[int]:
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state not in ("Z", "X"):
                found.append(int(entry))
    return found


def one_run(directory: Path) -> dict[str, float]:
    record = str(directory / "record.jsonl")
    times: dict[str, float] = {}
    acp = Acp(directory / "s.sqlite3")
    acp.ask("initialize", {"protocolVersion": 1})
    cwd = str(directory)
    times["session/new, no server"] = timed(
        lambda: acp.ask("session/new", {"cwd": cwd, "mcpServers": []})
    )
    one = [acp.server("ref", "--record", record)]
    sid: list[str] = []
    times["session/new, 1 server"] = timed(
        lambda: sid.append(
            acp.ask("session/new", {"cwd": cwd, "mcpServers": one})["result"]["sessionId"]
        )
    )
    three = [acp.server(f"s{i}", "--record", record) for i in range(3)]
    times["session/new, 3 servers"] = timed(
        lambda: acp.ask("session/new", {"cwd": cwd, "mcpServers": three})
    )
    text = [{"type": "text", "text": '/tool mcp__ref__echo {"text": "hi"}'}]
    times["prompt calling echo"] = timed(
        lambda: acp.ask("session/prompt", {"sessionId": sid[0], "prompt": text})
    )
    times["exit after end of input (4 servers)"] = timed(lambda: end_input(acp.process))
    assert acp.process.returncode == 0
    assert live(record) == [], "a server outlived the end of input"

    stubborn = directory / "stubborn.jsonl"
    acp = Acp(directory / "s.sqlite3")
    acp.ask("initialize", {"protocolVersion": 1})
    flags = ("--record", str(stubborn), "--ignore-term", "--spawn-child")
    acp.ask("session/new", {"cwd": cwd, "mcpServers": [acp.server("ref", *flags)]})
    child = [json.loads(line)["pid"] for line in stubborn.read_text().splitlines()]
    times["exit after SIGTERM (TERM-ignoring server)"] = timed(lambda: terminate(acp.process))
    assert acp.process.returncode == 128 + signal.SIGTERM
    assert live(str(stubborn)) == [], "the server outlived SIGTERM"
    deadline = time.monotonic() + 10
    while not all(zombie(pid) for pid in child):  # init reaps the SIGKILLed child
        assert time.monotonic() < deadline, f"left running after SIGTERM: {child}"
        time.sleep(0.05)
    return times


def end_input(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    process.wait()


def terminate(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait()


def zombie(pid: int) -> bool:
    """Dead: gone from /proc, or a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    results: dict[str, list[float]] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as directory:
            for name, seconds in one_run(Path(directory)).items():
                results.setdefault(name, []).append(seconds)
    print(f"trio-agents acp with stdio MCP servers, {runs} runs (seconds: median, min, max)")
    for name, values in results.items():
        print(f"  {name:42} {statistics.median(values):6.2f} {min(values):6.2f} {max(values):6.2f}")
    print("  no server process left after any run (/proc)")


if __name__ == "__main__":
    main()
