"""How many defects of a blind batch the conformance suite catches (issue 34).

    python benchmarks/blind_batch.py DIR [--seed 1] [--jobs 2] [--acp] [--scenarios]

A blind batch is a folder of single-defect variants of the runtime, written by someone who
has not read the suite: `NN-name.patch` (a unified diff against this checkout, applied with
`patch -p1`) and, beside it, `NN-name.py`, a scenario that exits 0 on the runtime as it is
and 1 on the variant (the proof that the defect changes what a user sees). Batches live
outside the repository: a batch the suite was improved with is no longer blind.

For each patch the script copies the suite and the runtime as they are at a commit
(`--rev`, default HEAD) into a temporary tree, applies the patch and runs the main job
there (`trio-agents conformance --seed S`, ci profile); with `--acp always` (or `missed`:
only where the main job missed), also the ACP machine against the variant's
`trio-agents acp`. A defect is caught when a run exits 1 with a machine FAILED (exit 1
without one is a broken run, not a catch). `--scenarios` first checks each
scenario on the clean tree and on its variant. The last lines give the rate per column. Not
a test: a batch of 30 takes about half an hour on two cores (twice that with the ACP
machine).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PACKAGES = ("trio_agents", "agent_conformance")
FINDING = re.compile(r"[A-Z]{1,2}\d+ \([a-z0-9-]+\): ")
RUN_TIMEOUT = 1200.0  # seconds; a run past it counts as caught (a hang is seen), and says so


@dataclass
class Verdict:
    """What the runs said of one defect: per column, caught or not and the first line of
    the failure (or why the run could not judge)."""

    name: str
    columns: dict[str, tuple[bool, str]] = field(default_factory=dict[str, tuple[bool, str]])
    scenario: str = ""


def copy_tree(into: Path, rev: str) -> Path:
    """The two packages as they are at the commit `rev`: the suite being measured stays
    the same while the checkout changes."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, *PACKAGES], cwd=ROOT, capture_output=True
    )
    if archive.returncode != 0:
        sys.exit(f"git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def env_for(tree: Path) -> dict[str, str]:
    # The tree's packages first, for every process the suite starts (the ACP agent too),
    # ahead of the editable install of this checkout.
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}


def judge(command: list[str], tree: Path) -> tuple[bool, str]:
    """(caught, first line): exit 1 with a machine FAILED is caught, with its finding."""
    try:
        done = subprocess.run(
            command,
            cwd=tree,
            env=env_for(tree),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return True, f"the run did not end within {RUN_TIMEOUT:.0f}s"
    out = done.stdout + done.stderr
    if done.returncode == 0:
        return False, ""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if done.returncode != 1:
        return False, f"exit {done.returncode}: {lines[-1] if lines else ''}"
    # After the machine's FAILED line, the finding's first line names the property and the
    # rule, then what happened (D392): `A5 (idle-cancel-inert): cancel() ...`.
    at = next((i for i, line in enumerate(lines) if " machine: FAILED" in line), None)
    if at is None:
        # Exit 1 with no machine failing is the run breaking (an import, a set-up), not a
        # finding: counting it would flatter the suite.
        return False, f"no machine failed: {lines[-1] if lines else ''}"[:300]
    machine = lines[at].split(":")[0]
    finding = next(
        (line for line in lines[at + 1 :] if FINDING.match(line) or "crashed" in line), ""
    )
    return True, f"{machine}: {finding}"[:300]


def measure(patch: Path, seed: int, acp: str, scenarios: bool, base: Path, rev: str) -> Verdict:
    verdict = Verdict(patch.stem)
    with tempfile.TemporaryDirectory(prefix=f"blind-{patch.stem[:2]}-", dir=base) as folder:
        tree = copy_tree(Path(folder), rev)
        applied = subprocess.run(
            ["patch", "-p1", "-s", "-i", str(patch)], cwd=tree, capture_output=True, text=True
        )
        if applied.returncode != 0:
            verdict.columns["main"] = (False, f"the patch does not apply: {applied.stdout}")
            return verdict
        if scenarios:
            script = patch.with_suffix(".py")
            ran = subprocess.run(
                [PYTHON, str(script)], cwd=folder, env=env_for(tree), capture_output=True
            )
            verdict.scenario = f"variant exit {ran.returncode}"
        main = [PYTHON, "-m", "trio_agents._cli", "conformance", "--seed", str(seed)]
        verdict.columns["main"] = judge(main, tree)
        if acp == "always" or (acp == "missed" and not verdict.columns["main"][0]):
            command = [
                PYTHON, "-m", "agent_conformance._cli", "--acp", "--seed", str(seed),
                "--no-shrink", "--stop-at-first",
                "--", PYTHON, "-m", "trio_agents._cli", "acp", "--model", "openai",
            ]  # fmt: skip
            verdict.columns["acp"] = judge(command, tree)
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("batch", type=Path, help="the folder of NN-name.patch files")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="defects measured at once")
    parser.add_argument(
        "--acp",
        choices=["never", "missed", "always"],
        default="never",
        help="also run the ACP machine: never, only where the main job missed, or always",
    )
    parser.add_argument("--scenarios", action="store_true", help="check each proof first")
    parser.add_argument("--rev", default="HEAD", help="the commit whose suite is measured")
    parser.add_argument("--start", default="", help="skip the patches named before this")
    args = parser.parse_args(argv)
    patches = [p for p in sorted(args.batch.glob("*.patch")) if p.name >= args.start]
    rev = subprocess.run(
        ["git", "rev-parse", "--short", args.rev], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if not patches:
        print(f"no *.patch in {args.batch}", file=sys.stderr)
        return 2
    # Every run is this Python: one without the project's dependencies would count each
    # defect missed, for an ImportError.
    missing = subprocess.run(
        [PYTHON, "-c", "import anyio, hypothesis, trio"], capture_output=True, text=True
    )
    if missing.returncode != 0:
        print(
            f"{PYTHON} lacks the project's dependencies "
            f"({missing.stderr.strip().splitlines()[-1]}); run this with the project's "
            "Python, e.g. .venv/bin/python benchmarks/blind_batch.py",
            file=sys.stderr,
        )
        return 2
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="blind-batch-") as base,
        ThreadPoolExecutor(max_workers=args.jobs) as pool,
    ):
        futures = [
            pool.submit(measure, p, args.seed, args.acp, args.scenarios, Path(base), rev)
            for p in patches
        ]
        verdicts: list[Verdict] = []
        for future in futures:
            verdict = future.result()
            verdicts.append(verdict)
            cells = "; ".join(
                f"{column}: {'caught' if caught else 'MISSED'}{' - ' + why if why else ''}"
                for column, (caught, why) in verdict.columns.items()
            )
            extra = f" [{verdict.scenario}]" if verdict.scenario else ""
            print(f"{verdict.name}{extra}: {cells}", flush=True)
    total = len(verdicts)
    main_caught = sum(v.columns["main"][0] for v in verdicts)
    print(
        f"\nbatch {args.batch}, suite at {rev}, seed {args.seed}, {time.monotonic() - started:.0f}s"
    )
    print(f"the main job caught {main_caught} of {total} ({main_caught / total:.0%})")
    if args.acp != "never":
        either = sum(any(c for c, _ in v.columns.values()) for v in verdicts)
        print(f"the main job or the ACP machine caught {either} of {total} ({either / total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
