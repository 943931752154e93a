"""Mutation testing of the runtime with the conformance suite as the only test (issue 34).

    python benchmarks/mutation.py [--per-group 30] [--group NAME ...] [--seed 1]
    python benchmarks/mutation.py --report          # the table so far, without running

Each group of the runtime's modules (the agent core, approval, fibers and registry, the
stores, MCP, the shell, the ACP server, the model adapter) is checked by the machines that
reach it, with a fixed seed and the ci profile: `trio-agents conformance --seed S --machine ...`, or
`agent-conformance --acp` against `trio-agents acp` for the ACP server. Cosmic Ray (pinned in
the `mutation` extra) enumerates the mutants and applies each; this script samples
`--per-group` of them per group (spread over the group's modules by how many each has, drawn
with the seed), runs the suite on each in a copy of the repository (never in this checkout),
and prints, per module, killed / total and every survivor.

It is resumable: the sessions live in `.mutation/` (one SQLite file per group, Cosmic Ray's
own) and a second run goes on where the first stopped, also after a SIGKILL (the copy is
reset before each run). A new commit starts over (`--fresh` forces it). Not a test, not CI:
a mutant costs one run of the machines (20-90 s on two cores), so a full sample takes hours.

Survivors that change nothing a user can see are triaged by hand and listed in
`benchmarks/mutation_equivalents.toml` with the reason; they leave the totals. The target is
90% killed per group.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
EQUIVALENTS = Path(__file__).resolve().parent / "mutation_equivalents.toml"
TARGET = 0.90
PYTHON = sys.executable
# A mutant that runs past this many times the unmutated run is killed (it hangs: a user
# sees that); never less than this many seconds.
TIMEOUT_FACTOR = 4.0
MIN_TIMEOUT = 120.0
MAIN = [PYTHON, "-m", "trio_agents._cli", "conformance", "--profile", "ci"]
ACP = [
    PYTHON,
    "-m",
    "agent_conformance._cli",
    "--acp",
    "--profile",
    "ci",
    "--no-shrink",
    "--stop-at-first",
]
ACP_AGENT = ["--", PYTHON, "-m", "trio_agents._cli", "acp", "--model", "openai"]


@dataclass(frozen=True)
class Group:
    """Modules of the runtime, and the suite's command that reaches them (`{seed}` filled)."""

    name: str
    modules: tuple[str, ...]
    command: tuple[str, ...]
    note: str = ""


def _machines(*names: str) -> tuple[str, ...]:
    return (*MAIN, "--seed", "{seed}", *(f"--machine={name}" for name in names))


def _under(folder: str, *, but: Sequence[str] = ()) -> tuple[str, ...]:
    found = sorted((ROOT / folder).glob("*.py"))
    return tuple(
        str(p.relative_to(ROOT)) for p in found if p.name != "__init__.py" and p.name not in but
    )


def _root(*names: str) -> tuple[str, ...]:
    return tuple(f"trio_agents/{name}" for name in names)


APPROVAL = ("_approval.py", "_approval_gate.py", "_mode_policy.py")
POSTGRES = ("_postgres.py", "_pg_schema.py")
GROUPS = (
    Group(
        "agent-core",
        _under("trio_agents/_agent", but=APPROVAL),
        _machines("agent", "lifecycle", "durable"),
    ),
    Group(
        "approval",
        tuple(f"trio_agents/_agent/{name}" for name in APPROVAL),
        _machines("agent"),
    ),
    Group(
        "fibers-registry",
        _root("_fiber.py", "_registry.py", "_nursery.py", "_runtime.py"),
        _machines("lifecycle", "durable", "agent"),
    ),
    Group("stores", _under("trio_agents/_store", but=POSTGRES), _machines("durable", "lifecycle")),
    Group(
        "stores-postgres",
        tuple(f"trio_agents/_store/{name}" for name in POSTGRES),
        _machines("durable", "lifecycle"),
        note="no machine opens a PostgreSQL store: every mutant here is expected to survive",
    ),
    Group("mcp", _under("trio_agents/_mcp"), _machines("mcp")),
    Group("shell", _under("trio_agents/_shell"), _machines("shell")),
    Group("acp-server", _under("trio_agents/acp"), (*ACP, "--seed", "{seed}", *ACP_AGENT)),
    Group("model", _root("_model/_openai.py", "_model/_sse.py"), _machines("model")),
)


def cosmic_ray(module: str) -> Any:
    """A module of Cosmic Ray (the `mutation` extra; untyped, so `Any`), or exit with the
    line that says how to install it."""
    try:
        return importlib.import_module(f"cosmic_ray.{module}")
    except ModuleNotFoundError:
        sys.exit("cosmic-ray is not installed here: pip install -e '.[mutation]'")


# -- the copy and the sessions -----------------------------------------------------------------


def head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def prepare(fresh: bool) -> Path:
    """The copy of the repository at HEAD under `.mutation/tree`, reset to its commit (a
    mutant a killed run left applied is undone); sessions of another commit are removed."""
    tree = WORK / "tree"
    commit = head()
    stamp = WORK / "commit"
    if fresh or not stamp.exists() or stamp.read_text().strip() != commit:
        if WORK.exists():
            print(f"starting over: the sessions in {WORK} are not of {commit[:10]}")
        shutil.rmtree(WORK, ignore_errors=True)
        WORK.mkdir(parents=True)
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(tree)], check=True)
        subprocess.run(["git", "checkout", "-q", commit], cwd=tree, check=True)
        stamp.write_text(commit + "\n")
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=tree, check=True)
    subprocess.run(["git", "clean", "-qfdx", "-e", "*.pyc"], cwd=tree, check=True)
    return tree


def session_path(group: Group) -> Path:
    return WORK / f"{group.name}.sqlite"


def init_session(group: Group, tree: Path, per_group: int, seed: int) -> None:
    """Enumerate the group's mutants with Cosmic Ray, keep a sample of `per_group` (spread
    over the modules by their share of the mutants, at least one each), skip the rest."""
    work_db, work_item = cosmic_ray("work_db"), cosmic_ray("work_item")

    config = WORK / f"{group.name}.toml"
    modules = ", ".join(f'"{m}"' for m in group.modules)
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = [{modules}]\n"
        "timeout = 600.0\n"
        "excluded-modules = []\n"
        'test-command = "false"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    path = session_path(group)
    subprocess.run(
        [PYTHON, "-m", "cosmic_ray.cli", "init", str(config), str(path)], cwd=tree, check=True
    )
    with work_db.use_db(str(path), work_db.WorkDB.Mode.open) as db:
        items: list[Any] = list(db.work_items)
        by_module: dict[str, list[str]] = {}
        unread = 0
        for item in items:
            mutation = item.mutations[0]
            module = str(mutation.module_path)
            if in_unread_annotation(tree / module, tuple(mutation.start_pos)):
                unread += 1
                continue
            by_module.setdefault(module, []).append(item.job_id)
        keep = sample(by_module, per_group, random.Random(f"{seed}:{group.name}"))
        skipped = [item.job_id for item in items if item.job_id not in keep]
        skip = work_item.WorkResult(worker_outcome=work_item.WorkerOutcome.SKIPPED)
        db.set_multiple_results(skipped, skip)
    print(
        f"{group.name}: {len(keep)} of {len(items) - unread} mutants sampled "
        f"({unread} in annotations Python never reads left out)"
    )


# Modules whose own function annotations something reads at run time: a mutant there is
# not an annotation nobody reads.
_READS_ANNOTATIONS = ("function_tool", "get_type_hints", "signature(", "BaseModel")


def in_unread_annotation(path: Path, at: tuple[int, int]) -> bool:
    """Whether the position `at` (line, column) of the module at `path` lies in a function's
    parameter or return annotation that is never evaluated (the module postpones them with
    `from __future__ import annotations` and nothing in it reads them): such a mutant is
    equivalent by construction, like those triaged by hand."""
    text = path.read_text(encoding="utf-8")
    if "from __future__ import annotations" not in text or any(
        word in text for word in _READS_ANNOTATIONS
    ):
        return False
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        hints = [a.annotation for a in every if a is not None and a.annotation is not None]
        if node.returns is not None:
            hints.append(node.returns)
        for hint in hints:
            start = (hint.lineno, hint.col_offset)
            end = (hint.end_lineno or hint.lineno, hint.end_col_offset or 0)
            if start <= at < end:
                return True
    return False


def sample(by_module: dict[str, list[str]], total: int, rng: random.Random) -> set[str]:
    """`total` job ids, spread over the modules in proportion to their mutants (at least one
    each, while there are any)."""
    count = sum(len(ids) for ids in by_module.values())
    keep: set[str] = set()
    for module in sorted(by_module):
        ids = sorted(by_module[module])
        share = max(1, round(total * len(ids) / count)) if count else 0
        keep.update(rng.sample(ids, min(share, len(ids))))
    return keep


# -- running ---------------------------------------------------------------------------------------


def command_for(group: Group, seed: int) -> list[str]:
    return [part.replace("{seed}", str(seed)) for part in group.command]


def baseline(group: Group, tree: Path, seed: int) -> float:
    """Seconds the unmutated run takes; exits if it does not pass (a suite that fails the
    correct runtime kills every mutant and measures nothing)."""
    started = time.monotonic()
    done = subprocess.run(
        command_for(group, seed), cwd=tree, env=_env(tree), capture_output=True, text=True
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        sys.exit(f"{group.name}: the unmutated runtime does not pass ({seconds:.0f}s):\n{tail}")
    return seconds


def _env(tree: Path) -> dict[str, str]:
    # The copy's packages first, for every process the suite starts (the ACP agent, too),
    # ahead of the editable install of this checkout.
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}


def run_group(group: Group, tree: Path, seed: int) -> None:
    mutating, work_db = cosmic_ray("mutating"), cosmic_ray("work_db")

    with work_db.use_db(str(session_path(group)), work_db.WorkDB.Mode.open) as db:
        pending: list[Any] = list(db.pending_work_items)
        if not pending:
            return
        first = baseline(group, tree, seed)
        timeout = max(MIN_TIMEOUT, TIMEOUT_FACTOR * first)
        print(f"{group.name}: {len(pending)} mutants to run; unmutated {first:.0f}s")
        os.environ.update(_env(tree))
        command = shlex.join(command_for(group, seed))
        cwd = os.getcwd()
        os.chdir(tree)
        try:
            for number, item in enumerate(pending, 1):
                started = time.monotonic()
                result = mutating.mutate_and_test(item.mutations, command, timeout)
                db.set_result(item.job_id, result)
                spec = item.mutations[0]
                outcome = result.test_outcome or result.worker_outcome
                print(
                    f"  {group.name} {number}/{len(pending)} {spec.module_path}:"
                    f"{spec.start_pos[0]} {spec.operator_name}: {outcome} "
                    f"({time.monotonic() - started:.0f}s)",
                    flush=True,
                )
        finally:
            os.chdir(cwd)


# -- the report ------------------------------------------------------------------------------------


@dataclass
class Tally:
    killed: int = 0
    timeouts: int = 0
    survived: int = 0
    equivalent: int = 0
    incompetent: int = 0
    pending: int = 0

    @property
    def total(self) -> int:
        return self.killed + self.survived


def equivalents() -> dict[str, str]:
    """`module:line:operator:occurrence` -> why the mutant changes nothing a user sees."""
    if not EQUIVALENTS.exists():
        return {}
    with EQUIVALENTS.open("rb") as file:
        table = tomllib.load(file)
    return {key: str(entry["reason"]) for key, entry in table.get("equivalent", {}).items()}


def results(group: Group) -> Iterator[tuple[str, str, str, str | None]]:
    """(module, key, outcome, diff) for each sampled mutant of the group."""
    work_db, work_item = cosmic_ray("work_db"), cosmic_ray("work_item")
    tested, worker = work_item.TestOutcome, work_item.WorkerOutcome
    path = session_path(group)
    if not path.exists():
        return
    with work_db.use_db(str(path), work_db.WorkDB.Mode.open) as db:
        done: dict[str, Any] = dict(db.results)
        for item in db.work_items:
            spec = item.mutations[0]
            key = f"{spec.module_path}:{spec.start_pos[0]}:{spec.operator_name}:{spec.occurrence}"
            result = done.get(item.job_id)
            if result is None:
                yield str(spec.module_path), key, "pending", None
            elif result.worker_outcome == worker.SKIPPED:
                continue
            elif result.test_outcome == tested.SURVIVED:
                yield str(spec.module_path), key, "survived", result.diff
            elif result.test_outcome == tested.INCOMPETENT:
                yield str(spec.module_path), key, "incompetent", result.diff
            elif result.output == "timeout":
                yield str(spec.module_path), key, "timeout", result.diff
            else:
                yield str(spec.module_path), key, "killed", result.diff


def report(groups: Sequence[Group]) -> bool:
    """Print the table; True when every group with results meets the target."""
    known = equivalents()
    met = True
    print(f"\nmutants killed by the conformance suite (target {TARGET:.0%} per group)")
    for group in groups:
        per_module: dict[str, Tally] = {}
        survivors: list[tuple[str, str | None]] = []
        for module, key, outcome, diff in results(group):
            tally = per_module.setdefault(module, Tally())
            if outcome == "survived" and key in known:
                tally.equivalent += 1
            elif outcome == "survived":
                tally.survived += 1
                survivors.append((key, diff))
            elif outcome in ("killed", "timeout"):
                tally.killed += 1
                tally.timeouts += outcome == "timeout"
            else:
                setattr(tally, outcome, getattr(tally, outcome) + 1)
        whole = Tally()
        for tally in per_module.values():
            for field in ("killed", "timeouts", "survived", "equivalent", "incompetent", "pending"):
                setattr(whole, field, getattr(whole, field) + getattr(tally, field))
        rate = whole.killed / whole.total if whole.total else 0.0
        verdict = "no results" if not whole.total else ("met" if rate >= TARGET else "missed")
        if whole.total and rate < TARGET:
            met = False
        print(
            f"\n{group.name}: {whole.killed}/{whole.total} killed ({rate:.0%}), "
            f"{whole.pending} pending, {whole.equivalent} equivalent: {verdict}"
            + (f"  [{group.note}]" if group.note else "")
        )
        for module in sorted(per_module):
            t = per_module[module]
            extra = f", {t.timeouts} by timeout" if t.timeouts else ""
            extra += f", {t.equivalent} equivalent" if t.equivalent else ""
            extra += f", {t.incompetent} incompetent" if t.incompetent else ""
            extra += f", {t.pending} pending" if t.pending else ""
            print(f"  {module}: {t.killed}/{t.total}{extra}")
        for key, diff in survivors:
            print(f"  survived {key}")
            for line in (diff or "").splitlines():
                if line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
                    print(f"      {line.strip()}")
    return met


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--per-group", type=int, default=30, help="mutants sampled per group")
    parser.add_argument(
        "--group", action="append", choices=[g.name for g in GROUPS], help="only this group"
    )
    parser.add_argument("--seed", type=int, default=1, help="the suite's seed and the sample's")
    parser.add_argument("--fresh", action="store_true", help="drop the sessions; start over")
    parser.add_argument("--report", action="store_true", help="print the table; run nothing")
    args = parser.parse_args(argv)
    chosen = [g for g in GROUPS if not args.group or g.name in args.group]
    if not args.report:
        tree = prepare(args.fresh)
        for group in chosen:
            if not session_path(group).exists():
                init_session(group, tree, args.per_group, args.seed)
        for group in chosen:
            run_group(group, tree, args.seed)
    return 0 if report(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
