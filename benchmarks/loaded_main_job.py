"""The main job under load: `trio-agents conformance` (ci profile, the built-in runtime) run
N times while four busy processes per core spin, each run with a seed of its own.

    python benchmarks/loaded_main_job.py [--runs 20] [--seed-base S] [--per-core 4]

The suite must never fail a correct agent, and CI runners are loaded machines: the target
is 20 of 20 runs passing (issue 34). Each run prints pass or fail, its seed (`--seed S`
replays it) and, when it failed, the first line of its report; the last line says how
many passed, at what load average (the mean of the 1-minute load average read after each
run), against the target. The load is started before the first run and stopped in a
`finally`, also on Ctrl-C. Not a test: it takes N times a minute or more.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 20  # runs of 20 that must pass (issue 34)
RUN_TIMEOUT = 1800.0  # seconds: a run past this counts as failed (hung)
# Busy until its parent is gone: a spinner outlives nothing, even a SIGKILLed script (each
# runs in a session of its own, out of reach of the terminal's Ctrl-C).
SPIN = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass"


@dataclass
class Run:
    """One run of the main job: its seed, whether it passed, how long it took, the first
    line of its failure (empty when it passed) and the load average after it."""

    seed: int
    passed: bool
    seconds: float
    first_failure: str
    load: float


def start_load(per_core: int) -> list[subprocess.Popen[bytes]]:
    """`per_core` busy processes per core, each in a session of its own (so a Ctrl-C
    reaches this script, which stops them, not them alone)."""
    count = (os.cpu_count() or 1) * per_core
    return [
        subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True) for _ in range(count)
    ]


def stop_load(spinners: list[subprocess.Popen[bytes]]) -> None:
    """Kill and reap every busy process (SIGKILL: a spinner has nothing to clean up)."""
    for process in spinners:
        if process.poll() is None:
            process.kill()
    for process in spinners:
        process.wait()


def first_failure(output: str, returncode: int) -> str:
    """The first line of the first failure report in the job's output: the machine that
    failed, and the first line under its coverage lines (what broke). Else the last line
    of the output, for a run that ended otherwise (a crash of the command, a timeout)."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if " machine: FAILED" not in line:
            continue
        machine = line.strip().split(" machine:", 1)[0]
        rest = lines[index + 1 :]
        # Coverage lines come first: the notes, "checked: ...", then skipped ones.
        start = next((i + 1 for i, text in enumerate(rest) if text.startswith("    checked")), 0)
        for text in rest[start:]:
            if ": skipped, " in text or ": checked in part, " in text:
                continue
            return f"{machine} machine: {text.strip()}"
        return f"{machine} machine: FAILED (no report)"
    tail = [line for line in lines if line.strip()]
    return f"exit status {returncode}: {tail[-1].strip() if tail else '(no output)'}"


def run_once(seed: int, logs: Path) -> Run:
    """Run the main job once with `seed`; its whole output goes to `logs`/seed-N.txt."""
    command = [sys.executable, "-m", "trio_agents._cli", "conformance", "--seed", str(seed)]
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        output, _ = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        output += f"\ntimed out after {RUN_TIMEOUT:.0f}s"
    finally:
        if process.poll() is None:  # Ctrl-C while it ran
            process.kill()
            process.wait()
    seconds = time.monotonic() - started
    (logs / f"seed-{seed}.txt").write_text(output)
    passed = process.returncode == 0
    failure = "" if passed else first_failure(output, process.returncode)
    return Run(seed, passed, seconds, failure, os.getloadavg()[0])


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # A SIGTERM (or a SIGINT, also when started in the background, where it is ignored)
    # stops the runs like Ctrl-C: the load is stopped in the `finally`.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=TARGET, help="runs of the main job")
    parser.add_argument(
        "--seed-base",
        type=int,
        default=None,
        help="run i uses seed BASE + i (default: a random base, printed)",
    )
    parser.add_argument("--per-core", type=int, default=4, help="busy processes per core")
    args = parser.parse_args(argv)
    base: int = args.seed_base if args.seed_base is not None else random.randrange(1, 2**31)
    cores = os.cpu_count() or 1
    print(
        f"load: {cores * args.per_core} busy processes ({args.per_core} per core, {cores} "
        f"cores); {args.runs} runs of the main job, seeds {base}..{base + args.runs - 1}",
        flush=True,
    )
    logs = Path(tempfile.mkdtemp(prefix="loaded-main-job-"))
    print(f"each run's whole output: {logs}/seed-N.txt", flush=True)
    runs: list[Run] = []
    spinners = start_load(args.per_core)
    try:
        time.sleep(2.0)  # the load settles in before the first run
        for index in range(args.runs):
            run = run_once(base + index, logs)
            runs.append(run)
            verdict = "pass" if run.passed else "FAIL"
            line = (
                f"run {index + 1}/{args.runs}: {verdict}, seed {run.seed}, {run.seconds:.0f}s, "
                f"load {run.load:.1f}"
            )
            print(line + (f"\n    {run.first_failure}" if run.first_failure else ""), flush=True)
    except KeyboardInterrupt:
        print(f"interrupted after {len(runs)} runs", flush=True)
    finally:
        stop_load(spinners)
    if not runs:
        return 1
    passed = sum(run.passed for run in runs)
    load = statistics.mean(run.load for run in runs)
    met = passed == len(runs) and len(runs) >= TARGET
    verdict = (
        f"target met ({TARGET} of {TARGET})"
        if met
        else f"target not met ({TARGET} of {TARGET} must pass)"
        if passed < len(runs)
        else f"no failure, but {len(runs)} runs are fewer than the target's {TARGET}"
    )
    print(
        f"{passed} of {len(runs)} passed under load (load average {load:.1f}); {verdict}",
        flush=True,
    )
    return 0 if passed == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
