"""`trio-agents acp` against third-party ACP agents: spawn-to-initialize and the prompt round
trip, on one scripted OpenAI-compatible endpoint, in one run.

    python benchmarks/acp_peers.py [--rounds 7] [--prompts 8] [--only AGENT] [--third-party DIR]
    python benchmarks/run.py --acp-peers            # the same rows at the end of run.py's table

The third-party agents are npm packages, installed pinned, each into its own prefix under the
gitignored `.third-party/` (about 720 MB together; not in CI, D102):

    scripts/install-third-party-agents.sh          # the three commands below, skipping done ones
    npm install --prefix .third-party/qwen-code @qwen-code/qwen-code@0.24.4
    npm install --prefix .third-party/codex-acp @zed-industries/codex-acp@0.16.0
    npm install --prefix .third-party/opencode opencode-ai@1.18.33

Each agent is started as `trio-agents conformance --acp` starts it (docs/conformance.md,
"Third-party ACP agents"): the same `AcpTarget` with its `--env` and `--config-file` templates
filled with the endpoint's `{base_url}`, `{model}` and `{api_key}`, a scratch `HOME`, and its
telemetry and update checks off. The endpoint is the suite's scripted one on 127.0.0.1, in
this process: every model call, chat completions or Responses API (codex-acp), is answered
with the one-chunk text `ok`, at once.

Figures, per agent (D350-D354), over `--rounds` rounds that take the agents in turn (so a
change in the machine's load falls on all alike), after one untimed start of each (a first
start lays out its caches under the scratch HOME). In a round each agent is started once:

- spawn -> initialize: from the spawn to the parsed answer to `initialize`; median, min and
  max over the rounds.
- prompt round trip: in a new session, after two untimed prompts, `--prompts` times a
  `session/prompt` of `hi` to its answer; median and p90 over all rounds. Each prompt must
  end `end_turn` with `ok` among its `agent_message_chunk` text, or the agent's row says what
  it did. The model calls the endpoint served per timed prompt are printed too: an agent that
  makes calls of its own (a title, a memory extraction) pays for them here.
- CPU: the user and system time the agent's processes used (read from /proc for the process
  and its descendants), to `initialize` (median) and per timed prompt (mean). On a shared
  machine the wall clock varies with the load; CPU time much less.

trio-agents runs from this checkout (`python -m trio_agents._cli acp`) with a SQLite store in
the scratch directory, once with `--model openai` on the endpoint (the baseline of every
ratio: the same model calls) and once with the offline model (no HTTP). Each ratio is
third-party / trio-agents `--model openai`; the target is >= 1.0 (trio-agents as fast or
faster). An agent that is not installed, does not start or does not answer is printed with
the reason, never dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import trio

from agent_conformance._acp._client import AcpTarget, AgentProcess
from agent_conformance._acp._endpoint import API_KEY, MODEL, ScriptedEndpoint, open_endpoint
from agent_conformance._acp._procs import Proc, descendants, kill_all
from trio_agents.acp._jsonrpc import LineSplitter

ROOT = Path(__file__).resolve().parent.parent
Row = tuple[str, str, str, str]
STDERR_TAIL = 2000


@dataclass(frozen=True)
class Peer:
    """An agent to time: its name, pinned version, npm prefix name, and how to start it
    (`argv[0]` relative to the prefix's `node_modules/.bin`)."""

    name: str
    version: str
    target: AcpTarget
    prefix: str | None = None  # None: trio-agents itself, run from this checkout
    answer: str = "ok"  # the text its answer must contain: the endpoint's, or the offline echo


def _agent_env(name: str) -> tuple[tuple[str, str], ...]:
    quiet = {
        "qwen-code": (("QWEN_TELEMETRY_ENABLED", "0"), ("QWEN_USAGE_STATISTICS_ENABLED", "0")),
        "codex-acp": (("CODEX_HOME", "{dir}/codex"),),
        "opencode": (
            ("OPENCODE_CONFIG", "{dir}/opencode.json"),
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("OPENCODE_DISABLE_SHARE", "1"),
            ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
            ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
        ),
    }[name]
    return (("HOME", "{dir}"), *quiet)


def peers(third_party: Path) -> list[Peer]:
    """trio-agents (twice) and the three agents of docs/conformance.md, configured as
    scripts/check-third-party-agent.sh configures them for the suite."""
    templates = ROOT / "scripts" / "third-party"
    ours = (sys.executable, "-m", "trio_agents._cli", "acp", "--store", "{dir}/acp.sqlite3")
    python_path = (("PYTHONPATH", str(ROOT)),)

    def bin_of(prefix: str, command: str) -> str:
        return str(third_party / prefix / "node_modules" / ".bin" / command)

    return [
        Peer(
            "trio-agents --model openai", "", AcpTarget((*ours, "--model", "openai"), python_path)
        ),
        Peer("trio-agents (offline model)", "", AcpTarget(ours, python_path), answer="echo: hi"),
        Peer(
            "qwen-code",
            "0.24.4",
            AcpTarget(
                (bin_of("qwen-code", "qwen"), "--acp", "--auth-type", "openai"),
                _agent_env("qwen-code"),
            ),
            "qwen-code",
        ),
        Peer(
            "codex-acp",
            "0.16.0",
            AcpTarget(
                (bin_of("codex-acp", "codex-acp"),),
                _agent_env("codex-acp"),
                (("codex/config.toml", (templates / "codex-config.toml").read_text()),),
            ),
            "codex-acp",
        ),
        Peer(
            "opencode",
            "1.18.33",
            AcpTarget(
                (bin_of("opencode", "opencode"), "acp"),
                _agent_env("opencode"),
                (("opencode.json", (templates / "opencode.json").read_text()),),
            ),
            "opencode",
        ),
    ]


# -- a lean ACP client: one request at a time, nothing checked but the answers timed --------


class Unusable(Exception):
    """The agent cannot be timed: the reason, in one line."""


class Client:
    """One agent process over its stdio. Owned by `open_client`, which kills its process
    group and every descendant seen on every exit (codex-acp does not exit at the end of its
    input, and its native child outlives its launcher)."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.splitter = LineSplitter(16 * 1024 * 1024)
        self.lines: list[bytes] = []
        self.stderr_tail = b""
        self.ids = 0

    async def request(
        self, method: str, params: Mapping[str, Any], seconds: float
    ) -> tuple[Any, list[Mapping[str, Any]]]:
        """Send a request and read up to its answer; (result, the session/update params
        seen meanwhile). Raises `Unusable` on an error answer, the end of output or
        after `seconds`."""
        self.ids += 1
        frame = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": dict(params)}
        assert self.process.stdin is not None
        await self.process.stdin.send_all(json.dumps(frame).encode() + b"\n")
        updates: list[Mapping[str, Any]] = []
        with trio.move_on_after(seconds):
            while True:
                message = await self._next()
                if message is None:
                    raise Unusable(f"its output ended before it answered {method}{self._said()}")
                if "method" not in message and message.get("id") == self.ids:
                    if "error" in message:
                        error = json.dumps(message["error"])[:300]
                        raise Unusable(f"it answered {method} with the error {error}")
                    return message.get("result"), updates
                if message.get("method") == "session/update":
                    updates.append(message.get("params") or {})
                elif "method" in message and "id" in message:  # its own request: none served
                    answer = {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "not served by this benchmark"},
                    }
                    await self.process.stdin.send_all(json.dumps(answer).encode() + b"\n")
        raise Unusable(f"no answer to {method} within {seconds:g} s{self._said()}")

    async def _next(self) -> Mapping[str, Any] | None:
        assert self.process.stdout is not None
        while not self.lines:
            try:
                data = await self.process.stdout.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                return None
            self.lines.extend(line for line in self.splitter.feed(data) if line and line.strip())
        line = self.lines.pop(0)
        try:
            message = json.loads(line)
        except ValueError:
            return {}  # not JSON-RPC (a log line on stdout): not an answer
        return cast(dict[str, Any], message) if isinstance(message, dict) else {}

    async def drain_stderr(self) -> None:
        assert self.process.stderr is not None
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async for data in self.process.stderr:
                self.stderr_tail = (self.stderr_tail + data)[-STDERR_TAIL:]

    def _said(self) -> str:
        tail = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()
        return f"; its stderr ended with: {tail[-1][:300]!r}" if tail else ""


@contextlib.asynccontextmanager
async def open_client(
    peer: Peer, placeholders: Mapping[str, str], directory: Path, started: list[float]
) -> AsyncGenerator[Client, None]:
    """Spawn `peer` in `directory` and yield its `Client`; `started` gets the spawn time
    (perf_counter, just before the spawn)."""
    launcher = AgentProcess(peer.target, placeholders, directory)  # its env and files only
    launcher.workdir.mkdir(parents=True, exist_ok=True)
    launcher.write_files()
    env = launcher.environment()
    started.append(time.perf_counter())
    process = await trio.lowlevel.open_process(
        list(peer.target.argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(launcher.workdir),
        start_new_session=True,
    )
    client = Client(process)
    seen: list[Proc] = []
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.drain_stderr)
            try:
                yield client
            finally:
                seen = descendants(process.pid)
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await _stop(process, seen)


async def _stop(process: trio.Process, seen: list[Any]) -> None:
    """Close its stdin, give it a second to exit, then kill its group and what it started."""
    assert process.stdin is not None
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await process.stdin.aclose()
    with trio.move_on_after(1.0):
        await process.wait()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with trio.move_on_after(5):
            await process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()
    kill_all(seen)


# -- the measurements -----------------------------------------------------------------------

INITIALIZE: Mapping[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
}


@dataclass
class Figures:
    spawns: list[float] = field(default_factory=list[float])
    trips: list[float] = field(default_factory=list[float])
    calls: int = 0  # model calls the endpoint served during the timed prompts
    start_cpu: list[float] = field(default_factory=list[float])  # CPU s to `initialize`
    prompt_cpu: float = 0.0  # CPU s the agent's processes used over the timed prompts

    @property
    def calls_per_prompt(self) -> float:
        return self.calls / len(self.trips) if self.trips else 0.0


@dataclass(frozen=True)
class Place:
    """Where one agent runs: its scratch directory (its HOME) and the template values."""

    directory: Path
    placeholders: Mapping[str, str]


def place(peer: Peer, endpoint: ScriptedEndpoint, scratch: Path) -> Place:
    directory = scratch / peer.name.split()[0]
    directory.mkdir(parents=True, exist_ok=True)
    placeholders = {
        "base_url": endpoint.base_url,
        "api_key": API_KEY,
        "model": MODEL,
        "dir": str(directory),
        "workdir": str(directory / "work"),
    }
    return Place(directory, placeholders)


async def first_start(peer: Peer, where: Place) -> None:
    """An untimed start to `initialize`: a first start lays out caches under its HOME."""
    async with open_client(peer, where.placeholders, where.directory, []) as client:
        await client.request("initialize", INITIALIZE, seconds=60)


async def one_round(
    peer: Peer, where: Place, endpoint: ScriptedEndpoint, prompts: int, figures: Figures
) -> None:
    """One start of `peer`: spawn to `initialize` timed, a session, two untimed prompts,
    then `prompts` timed ones; appended to `figures`."""
    started: list[float] = []
    async with open_client(peer, where.placeholders, where.directory, started) as client:
        await client.request("initialize", INITIALIZE, seconds=60)
        spawn = time.perf_counter() - started[0]
        start_cpu = cpu_seconds(client.process.pid)
        new, _ = await client.request(
            "session/new", {"cwd": str(where.directory / "work"), "mcpServers": []}, seconds=60
        )
        params = {"sessionId": str(new["sessionId"]), "prompt": [{"type": "text", "text": "hi"}]}
        for _ in range(2):  # warm up: first-prompt work (a title, caches) is not timed
            await _prompt(client, params, peer.answer)
        calls_before = endpoint.unscripted + len(endpoint.served)
        cpu_before = cpu_seconds(client.process.pid)
        trips: list[float] = []
        for _ in range(prompts):
            start = time.perf_counter()
            await _prompt(client, params, peer.answer)
            trips.append(time.perf_counter() - start)
        figures.calls += endpoint.unscripted + len(endpoint.served) - calls_before
        figures.prompt_cpu += cpu_seconds(client.process.pid) - cpu_before
    figures.spawns.append(spawn)
    figures.start_cpu.append(start_cpu)
    figures.trips.extend(trips)


def cpu_seconds(root: int) -> float:
    """User and system CPU time of `root` and its live descendants, and of the children it
    has reaped, from /proc: what the agent computed, whatever the machine's load made the
    wall clock say."""
    total = 0
    for pid in (root, *(proc.pid for proc in descendants(root))):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile: a reaped child is counted in its parent's cutime
        # After the name: utime (14), stime (15), cutime (16), cstime (17), from field 3.
        total += sum(int(value) for value in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


async def _prompt(client: Client, params: Mapping[str, Any], answer: str) -> None:
    result, updates = await client.request("session/prompt", params, seconds=60)
    stop = cast(dict[str, Any], result).get("stopReason") if isinstance(result, dict) else None
    said = [cast(Mapping[str, Any], u.get("update") or {}) for u in updates]
    text = "".join(
        str(update.get("content", {}).get("text", ""))
        for update in said
        if update.get("sessionUpdate") == "agent_message_chunk"
    )
    if stop != "end_turn" or answer not in text:
        raise Unusable(
            f"a prompt ended {stop!r} with the text {text[:200]!r}, not end_turn {answer!r}"
        )


def missing(peer: Peer, third_party: Path) -> str | None:
    """Why `peer` cannot run here, or None."""
    if peer.prefix is None:
        return None
    manifest = third_party / peer.prefix / "node_modules" / ".bin" / Path(peer.target.argv[0]).name
    if not manifest.exists():
        return f"not installed in {third_party}: run scripts/install-third-party-agents.sh"
    return None


async def measure_all(
    chosen: Sequence[Peer], third_party: Path, rounds: int, prompts: int
) -> dict[str, Figures | str]:
    """Every peer's figures, or the reason it has none, on one endpoint. The rounds take the
    agents in turn (a start and `prompts` prompts each), so a change in the machine's load
    during the run falls on all of them alike."""
    found: dict[str, Figures | str] = {}
    with tempfile.TemporaryDirectory(prefix="acp-peers-") as scratch:
        async with open_endpoint() as endpoint:
            places: dict[str, Place] = {}
            for peer in chosen:
                why = missing(peer, third_party)
                if why is None:
                    places[peer.name] = place(peer, endpoint, Path(scratch))
                    why = await _untimable(first_start(peer, places[peer.name]))
                found[peer.name] = Figures() if why is None else why
            for _ in range(rounds):
                for peer in chosen:
                    figures = found[peer.name]
                    if isinstance(figures, Figures):
                        work = one_round(peer, places[peer.name], endpoint, prompts, figures)
                        why = await _untimable(work)
                        if why is not None:
                            found[peer.name] = why
    return found


async def _untimable(work: Awaitable[None]) -> str | None:
    """Run `work`; the reason the agent cannot be timed if it raised one, else None."""
    try:
        await work
    except BaseException as exc:
        reason = _reason(exc)
        if reason is None:
            raise
        return f"could not be timed: {reason}"
    return None


def _reason(exc: BaseException) -> str | None:
    """What made an agent untimable, if `exc` is only that (an `Unusable`, or an OSError of
    its spawn, perhaps inside the nursery's exception group); None for anything else."""
    if isinstance(exc, Unusable | OSError):
        return str(exc)
    if isinstance(exc, BaseExceptionGroup):
        group = cast(BaseExceptionGroup[BaseException], exc)
        match, rest = group.split((Unusable, OSError))
        if match is not None and rest is None:
            leaf: BaseException = match
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            return str(leaf)
    return None


# -- the table ------------------------------------------------------------------------------


def p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def rows(rounds: int, prompts: int, third_party: Path, only: Sequence[str] = ()) -> list[Row]:
    """run.py's rows: name, value, versus, target/verdict. `only`: the third-party agents to
    time (by name; default all); trio-agents is always timed, as the baseline."""
    chosen = [p for p in peers(third_party) if p.prefix is None or not only or p.name in only]
    found = trio.run(measure_all, chosen, third_party, rounds, prompts)
    base = found[chosen[0].name]
    table: list[Row] = []
    for peer in chosen:
        figures = found[peer.name]
        label = f"ACP peer {peer.name}{' ' + peer.version if peer.version else ''}"
        if isinstance(figures, str):
            table.append((label, figures, "", ""))
            continue
        spawn_median = statistics.median(figures.spawns)
        trip_median = statistics.median(figures.trips)
        spawn_value = (
            f"{spawn_median * 1e3:8.0f} ms spawn->initialize "
            f"(min {min(figures.spawns) * 1e3:.0f}, max {max(figures.spawns) * 1e3:.0f}; "
            f"CPU {statistics.median(figures.start_cpu) * 1e3:.0f} ms)"
        )
        trip_value = (
            f"{trip_median * 1e3:8.2f} ms prompt round trip "
            f"(p90 {p90(figures.trips) * 1e3:.2f}; CPU "
            f"{figures.prompt_cpu / len(figures.trips) * 1e3:.1f} ms; "
            f"{figures.calls_per_prompt:.1f} model calls)"
        )
        spawn_versus = trip_versus = spawn_target = trip_target = ""
        if isinstance(base, Figures) and peer is not chosen[0]:
            spawn_ratio = spawn_median / statistics.median(base.spawns)
            trip_ratio = trip_median / statistics.median(base.trips)
            spawn_versus = f"{spawn_ratio:6.2f}x trio-agents"
            trip_versus = f"{trip_ratio:6.2f}x trio-agents"
            if peer.prefix is not None:
                spawn_target = _verdict(spawn_ratio >= 1.0)
                trip_target = _verdict(trip_ratio >= 1.0)
        table.append((label, spawn_value, spawn_versus, spawn_target))
        table.append(("", trip_value, trip_versus, trip_target))
    return table


def _verdict(ok: bool) -> str:
    return f"{'met' if ok else 'MISSED'} (>= 1.0x: trio-agents as fast or faster)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed starts per agent")
    parser.add_argument("--prompts", type=int, default=8, help="timed prompts per agent per start")
    parser.add_argument(
        "--third-party", type=Path, default=ROOT / ".third-party", help="the agents' npm prefixes"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=[p.name for p in peers(ROOT / ".third-party") if p.prefix is not None],
        help="time only this third-party agent (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.prompts < 1:
        parser.error("--rounds and --prompts must be at least 1")
    print(
        f"ACP agents on one scripted endpoint: {args.rounds} rounds of a start and "
        f"{args.prompts} prompts each; ratios against trio-agents --model openai; "
        f"{os.cpu_count()} cores"
    )
    table = rows(args.rounds, args.prompts, args.third_party, args.only)
    width = max(len(name) for name, _, _, _ in table)
    value_width = max(len(value) for _, value, _, _ in table)
    versus_width = max(len(versus) for _, _, versus, _ in table)
    for name, value, versus, target in table:
        print(f"{name:<{width}}  {value:<{value_width}}  {versus:<{versus_width}}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
