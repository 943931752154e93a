"""What the sandbox costs a command (issue 36): the start-up of one command, and 200 sessions
running commands at once, for this checkout and for another one (the sandbox before a
change), measured in the same run, alternately, so that the machine's load hits both alike.

    python benchmarks/sandbox_cost.py [--before PATH] [--rounds 5] [--commands 40]
                                      [--sessions 200]

`--before` is another checkout of trio-agents (e.g. `git worktree add /tmp/before <rev>`);
without it only this checkout is measured, against commands run without a sandbox. Each
figure is the median over rounds; the ratios are this checkout's over the other's. Targets:
a command's start-up within 3x of the sandbox before (the sandbox now does more: a user
namespace of its own, a seccomp filter, limits, and as root id-mapped mounts), and the
200-session rate within 0.5x of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


async def _measure(commands: int, sessions: int, sandboxed: bool) -> dict[str, float]:
    import trio

    from trio_agents import SandboxPolicy, ShellExecutor, ShellRequest

    with tempfile.TemporaryDirectory(prefix="trio-agents-bench-") as where:
        policy = SandboxPolicy() if sandboxed else None
        shell = ShellExecutor(cwd=where, sandbox=policy)
        async with shell.running():
            spec = shell.resolve(ShellRequest("true"))
            await shell.run(spec)  # the sandbox check, once
            times: list[float] = []
            for _ in range(commands):
                start = time.perf_counter()
                await shell.run(spec)
                times.append(time.perf_counter() - start)

            async def session(n: int) -> None:
                for _ in range(3):
                    await shell.run(shell.resolve(ShellRequest("true", owner=f"s{n}")))

            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for n in range(sessions):
                    nursery.start_soon(session, n)
            load = time.perf_counter() - start
    return {"start": statistics.median(times), "rate": sessions * 3 / load}


def _child(args: argparse.Namespace) -> int:
    import trio

    figures = trio.run(_measure, args.commands, args.sessions, not args.unsandboxed)
    print(json.dumps(figures))
    return 0


def _run(
    checkout: Path, args: argparse.Namespace, *, unsandboxed: bool = False
) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child"]
    argv += ["--commands", str(args.commands), "--sessions", str(args.sessions)]
    if unsandboxed:
        argv.append("--unsandboxed")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measurement in {checkout} failed: {done.stderr.strip()[-500:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--commands", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--unsandboxed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    if args.before is not None and not (args.before / "trio_agents" / "__init__.py").is_file():
        raise SystemExit(f"--before {args.before}: not a trio-agents checkout")
    now: list[dict[str, float]] = []
    other: list[dict[str, float]] = []
    for _ in range(args.rounds):  # interleaved: drift in the machine's load hits both alike
        now.append(_run(ROOT, args))
        if args.before is not None:
            other.append(_run(args.before, args))
        else:
            other.append(_run(ROOT, args, unsandboxed=True))
    label = f"before ({args.before})" if args.before is not None else "unsandboxed"

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    start_ratio = median(now, "start") / median(other, "start")
    rate_ratio = median(now, "rate") / median(other, "rate")
    print(f"command start-up: {median(now, 'start') * 1e3:.1f} ms, {label} "
          f"{median(other, 'start') * 1e3:.1f} ms: {start_ratio:.2f}x "
          f"(target <= 3x before: {'met' if start_ratio <= 3 else 'NOT met'})")  # fmt: skip
    print(f"{args.sessions} sessions x 3 commands at once: {median(now, 'rate'):.0f} commands/s, "
          f"{label} {median(other, 'rate'):.0f}/s: {rate_ratio:.2f}x "
          f"(target >= 0.5x before: {'met' if rate_ratio >= 0.5 else 'NOT met'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
