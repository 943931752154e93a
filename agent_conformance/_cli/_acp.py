"""`agent-conformance --acp [--env NAME=TEMPLATE] [--config-file PATH=TEMPLATE] --
CMD [ARGS...]`: the ACP machine against any ACP agent command."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import random
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from trio_agents import __version__

from .._acp._properties import PROPERTIES
from .._acp._report import json_report, junit_xml, read_baseline, summarize
from .._acp._report_html import html_report
from .._acp._requirements import TIERS, by_property, select, selector_problem
from ._failure import print_found
from ._lanes import OUTPUT, installed, progress, say

__all__ = ["add_arguments", "run"]

PLACEHOLDERS = "{base_url}, {root_url}, {api_key}, {model}, {dir}, {workdir}"


DEFAULT_TIMEOUT = 20.0
DEFAULT_GRACE = 5.0


def misplaced(args: argparse.Namespace) -> str | None:
    """The error for flags that the mode `args` asks for would ignore, or None: a flag of
    the ACP mode without `--acp`, or a Python target with it."""
    if args.acp:
        targets = (
            "--target",
            "--runtime-target",
            "--shell-target",
            "--mcp-target",
            "--function-target",
            "--model-target",
        )
        given = [flag for flag in targets if getattr(args, flag[2:].replace("-", "_"))]
        if given:
            names = (
                "names a Python implementation"
                if len(given) == 1
                else "name Python implementations"
            )
            return (
                f"{', '.join(given)} {names}, which --acp does not check; leave "
                f"{'it' if len(given) == 1 else 'them'} out, or run without --acp"
            )
        return None
    ours: dict[str, object] = {
        "--env": args.env,
        "--config-file": args.config_file,
        "--timeout": args.timeout is not None,
        "--grace": args.grace is not None,
        "--only": args.only,
        "--skip": args.skip,
        "--shrink-budget": args.shrink_budget is not None,
        "--report-json": args.report_json,
        "--junit-xml": args.junit_xml,
        "--report-html": args.report_html,
        "--baseline": args.baseline,
        "--fail-on": args.fail_on is not None,
        "--stop-at-first": args.stop_at_first,
    }
    command = [part for part in args.agent_command if part != "--"]
    if command:
        ours[f"the agent command {shlex.join(command)!r}"] = True
    given = [flag for flag, value in ours.items() if value]
    if len(given) == 1:
        return f"{given[0]} applies only with --acp; add --acp, or leave it out"
    if given:
        return f"{', '.join(given)} apply only with --acp; add --acp, or leave them out"
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ACP mode's flags on the `conformance` parser."""
    parser.add_argument(
        "--acp",
        action="store_true",
        help="check the ACP agent started by the command after `--` (ACP over its stdio)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=TEMPLATE",
        help=f"with --acp: set NAME in the agent's environment; placeholders {PLACEHOLDERS} "
        "(default: OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL point at the suite's "
        "endpoint)",
    )
    parser.add_argument(
        "--config-file",
        action="append",
        default=[],
        metavar="PATH=TEMPLATE",
        help="with --acp: write TEMPLATE (placeholders filled) to PATH before each start; a "
        "relative PATH is inside the example's directory {dir}; TEMPLATE @FILE reads a file",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,  # 20: None tells a flag given without --acp from one not given
        help="with --acp: seconds any answer may take (default 20)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=None,  # 5
        help="with --acp: seconds the agent may take to exit at end of input (default 5)",
    )
    parser.add_argument(
        "--no-shrink",
        action="store_true",
        help="report the first failing program as found, without shrinking it (a failure "
        "of a machine on real processes can take minutes to shrink)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="WHAT[,WHAT...]",
        help="with --acp: enforce only these: property names, rule ids (P5), requirement ids "
        "(TA-RPC-003) or tiers (MUST, SHOULD, INFO); the others are still run, not judged",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="WHAT[,WHAT...]",
        help="with --acp: do not judge these (as --only names them)",
    )
    parser.add_argument(
        "--shrink-budget",
        type=float,
        default=None,  # SHRINK_BUDGET
        metavar="SECONDS",
        help="with --acp: seconds to shrink each failure before reporting the smallest "
        "program found so far (default 120)",
    )
    parser.add_argument(
        "--stop-at-first",
        action="store_true",
        help="with --acp: stop at the first property found broken (the others are then not "
        "judged); a quicker answer to 'does it pass'",
    )
    parser.add_argument(
        "--report-json", metavar="FILE", help="with --acp: write the JSON report to FILE"
    )
    parser.add_argument(
        "--junit-xml", metavar="FILE", help="with --acp: write a JUnit XML report to FILE"
    )
    parser.add_argument(
        "--report-html",
        metavar="FILE",
        help="with --acp: write a self-contained HTML report to FILE",
    )
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="with --acp: the failures FILE lists (one requirement id, property or rule per "
        "line) do not fail the run; one of them that passes does (the baseline is stale)",
    )
    parser.add_argument(
        "--fail-on",
        choices=("MUST", "SHOULD", "INFO"),
        type=str.upper,
        default=None,  # INFO
        help="with --acp: the lowest tier whose failure fails the run (default INFO: any "
        "failure; MUST: only a failure that makes the agent not conformant)",
    )
    parser.add_argument(
        "agent_command",
        nargs="*",
        metavar="-- CMD [ARGS...]",
        help="with --acp: the agent's command",
    )


def _pairs(values: Sequence[str], flag: str, prog: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for value in values:
        name, sep, template = value.partition("=")
        if not sep or not name:
            raise SystemExit(f"{prog}: {flag} {value!r}: write it as NAME=TEMPLATE")
        if flag == "--config-file" and template.startswith("@"):
            try:
                with open(template[1:]) as source:
                    template = source.read()
            except OSError as exc:
                raise SystemExit(
                    f"{prog}: {flag} {value!r}: cannot read {template[1:]!r}: {exc.strerror}"
                ) from None
        pairs.append((name, template))
    return tuple(pairs)


def run(args: argparse.Namespace) -> int:
    """Run the ACP mode and print its report; the exit status."""
    command: list[str] = list(args.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print(
            f"{args.prog} --acp: name the agent's command after `--`, e.g. "
            f"{args.prog} --acp -- trio-agents acp --model openai",
            file=sys.stderr,
        )
        return 2
    found = shutil.which(command[0])
    if found is None:
        print(
            f"{args.prog} --acp: {command[0]!r} is not a command here (not on PATH "
            "and not a path to an executable)",
            file=sys.stderr,
        )
        return 2
    # The agent runs in the example's work directory: a relative command must still resolve.
    command[0] = os.path.abspath(found) if os.sep in command[0] else found
    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    grace = DEFAULT_GRACE if args.grace is None else args.grace
    for flag, value in (("--timeout", timeout), ("--grace", grace)):
        if not value > 0:
            print(f"{args.prog}: {flag} must be > 0 seconds, got {value}", file=sys.stderr)
            return 2
    try:
        # Imported here: the suite needs Hypothesis and the ACP schema, the rest of the
        # command neither.
        from .._acp._client import AcpTarget
        from .._acp._run import run_acp_conformance
    except ImportError as exc:  # acp.schema: the agent-client-protocol package
        print(
            f"{args.prog} --acp needs the ACP schema package ({exc.name} is missing): "
            "pip install 'trio-agents[acp-conformance]'",
            file=sys.stderr,
        )
        return 2
    try:
        choice = _choices(args)
    except _Refused as exc:
        print(f"{args.prog} --acp: {exc}", file=sys.stderr)
        return 2
    target = AcpTarget(
        tuple(command),
        env=_pairs(args.env, "--env", args.prog),
        files=_pairs(args.config_file, "--config-file", args.prog),
        timeout=timeout,
        grace=grace,
    )
    shown = shlex.join(command)
    # Chosen here, not by the run, so an interrupted run can still say how to replay it.
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    stop: list[bool] = []

    def on_sigint(signum: int, frame: object) -> None:
        # The first Ctrl-C stops the run before its next example (the agent processes of
        # the example under way are closed as usual); a second one is an ordinary interrupt.
        stop.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_sigint)
    # Printed once Ctrl-C is handled: from this line on, it stops the run cleanly.
    print(f"{args.prog} --acp: {shown}, profile {args.profile or 'ci'}", flush=True)
    started = time.time()
    try:
        run_ = run_acp_conformance(
            target,
            profile_name=args.profile,
            max_examples=args.max_examples,
            seed=seed,
            shrink=not args.no_shrink,
            progress=progress,
            interrupted=lambda: bool(stop),
            skip=choice.skip,
            keep_going=not args.stop_at_first,
            **({} if args.shrink_budget is None else {"shrink_budget": args.shrink_budget}),
        )
    except KeyboardInterrupt:
        print(
            f"{args.prog} --acp: interrupted; replay this run with --seed {seed}",
            file=sys.stderr,
        )
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    status = _print_acp_run(
        run_,
        f"{args.prog} --acp ... --seed {{seed}} -- {shown}",
        table=True,
        baseline=choice.baseline,
        fail_on=args.fail_on or "INFO",
    )
    run_info: dict[str, Any] = {
        "suite": "trio-agents conformance --acp",
        "version": __version__,
        "agent_command": command,
        "agent_info": run_.advertised.get("agentInfo"),
        "advertised": {k: v for k, v in run_.advertised.items() if k != "agentInfo"},
        "seed": run_.report.seed,
        "profile": args.profile or "ci",
        "started_at": datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(),
        "seconds": round(run_.report.seconds, 3),
        "examples": run_.report.examples,
        "one_session_a_process": run_.one_session,
        "skipped_by_user": sorted(choice.skip),
        "cancel_to_abort_ms": {
            kind: [round(x * 1000, 1) for x in seconds] for kind, seconds in run_.latencies.items()
        },
        "baseline": choice.baseline.path if choice.baseline is not None else None,
    }
    written = _write_reports(args, run_, run_info, choice.baseline)
    return status if written else 1


class _Refused(Exception):
    """A flag's value the run cannot use: the message says which and what to do."""


@dataclass(frozen=True)
class _Choice:
    skip: frozenset[str]
    baseline: Any


def _choices(args: argparse.Namespace) -> _Choice:
    """What `--only`, `--skip`, `--baseline` and the report flags ask for, checked before
    the run starts (a typo must not cost a run of minutes)."""

    def split(values: list[str]) -> list[str]:
        return [part.strip() for value in values for part in value.split(",") if part.strip()]

    only, skip = split(args.only), split(args.skip)
    for flag, selectors in (("--only", only), ("--skip", skip)):
        problem = selector_problem(selectors, PROPERTIES)
        if problem is not None:
            raise _Refused(f"{flag}: {problem}")
    names = {p.name for p in PROPERTIES}
    skipped = set(select(skip, PROPERTIES))
    if only:
        skipped |= names - select(only, PROPERTIES)
    if skipped == names:
        raise _Refused("--only and --skip leave no property to judge; leave one in")
    baseline = None
    if args.baseline:
        try:
            with open(args.baseline, encoding="utf-8") as source:
                text = source.read()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise _Refused(f"--baseline {args.baseline!r}: cannot read it: {why}") from None
        try:
            baseline = read_baseline(args.baseline, text, PROPERTIES)
        except ValueError as exc:
            raise _Refused(f"--baseline: {exc}") from None
    for flag, path in (
        ("--report-json", args.report_json),
        ("--junit-xml", args.junit_xml),
        ("--report-html", args.report_html),
    ):
        if path:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise _Refused(f"{flag} {path!r}: the folder {folder!r} does not exist")
            if os.path.isdir(path):
                raise _Refused(f"{flag} {path!r} is a folder; name a file")
    return _Choice(frozenset(skipped), baseline)


def _write_reports(
    args: argparse.Namespace, run_: Any, info: dict[str, Any], baseline: Any
) -> bool:
    """Write the reports the flags ask for; False (after one line each) if one could not
    be written."""
    if not (args.report_json or args.junit_xml or args.report_html):
        return True

    summary = summarize(run_.verdicts, baseline)
    crash = run_.crash
    texts: list[tuple[str, str, Callable[[], str]]] = [
        (
            "--report-json",
            args.report_json,
            lambda: json_report(run_.verdicts, summary, info, crash),
        ),
        (
            "--junit-xml",
            args.junit_xml,
            lambda: junit_xml(run_.verdicts, run_.report.seconds, expected=summary.expected),
        ),
        (
            "--report-html",
            args.report_html,
            lambda: html_report(run_.verdicts, summary, info, crash),
        ),
    ]
    ok = True
    for flag, path, make in texts:
        if not path:
            continue
        try:
            with open(path, "w", encoding="utf-8") as out:
                out.write(make())
        except OSError as exc:
            print(
                f"{args.prog} --acp: {flag} {path!r}: cannot write it: {exc.strerror}",
                file=sys.stderr,
            )
            ok = False
        else:
            print(f"  {flag[2:].replace('-', ' ')}: {path}")
    return ok


def _print_acp_run(
    run_: Any,
    replay: str,
    *,
    table: bool = False,
    baseline: Any = None,
    fail_on: str = "INFO",
) -> int:
    """Print what an ACP run found; 0 if it passed, else 1. `replay`: the command that
    replays it, with `{seed}` for the run's seed. `table`: print every requirement's
    verdict. A failure fails the run when its tier is `fail_on` or above and `baseline`
    does not list it; a baseline entry that passed fails it too."""
    from .._acp._client import AgentSetupError  # the ACP schema, only when run

    report = run_.report
    counts = (
        f"{report.examples} examples, {report.checks} checked steps, "
        f"{report.histories} distinct histories, seed {report.seed} ({report.seconds:.1f}s)"
    )
    info = run_.advertised.get("agentInfo")
    if isinstance(info, dict):
        agent = cast("dict[str, Any]", info)
        print(f"  the agent says it is {agent.get('name')} {agent.get('version')}")
    loads = (
        "session/load checked"
        if run_.advertised.get("loadSession")
        else "session/load not advertised: not checked"
    ) + (
        ", session/list checked"
        if run_.advertised.get("listSessions")
        else ", session/list not advertised: not checked"
    )
    if run_.one_session:
        print(
            "  the agent refused a second session/new in one process: rules that need two "
            "sessions of a process were not drawn"
        )
    if run_.landed:
        where = ", ".join(f"{point} {n}" for point, n in sorted(run_.landed.items()))
        print(f"  cancels that landed where aimed: {where}")
    aborts = describe_latencies(run_.latencies)
    if aborts:
        print(f"  cancel to abort: {aborts}")
    if run_.asked:
        answers = ", ".join(f"{answer} {n}" for answer, n in sorted(run_.asked.items()))
        print(f"  permission requests answered: {answers}")
    else:
        print("  permission requests answered: none (the agent never asked)")
    if isinstance(report.failure, AgentSetupError) and not run_.failed:
        print(f"  acp machine: NOT CHECKED: {report.failure}")
        return 1
    reqs = by_property()
    summary = summarize(run_.verdicts, baseline)
    if table:
        for v in run_.verdicts:
            req = reqs[v.property.name]
            outcome = v.outcome.upper() if v.outcome == "failed" else v.outcome
            if v.outcome == "failed" and v.property.name in summary.expected:
                outcome = "failed, expected (baseline)"
            why = f" ({v.why})" if v.why and v.outcome != "failed" else ""
            rpc = " JSON-RPC" if req.source == "json-rpc" else ""
            print(
                f"    {req.tier:6}{rpc:9} {req.id:16} {v.property.name} ({v.property.rule}): "
                f"{outcome}{why}"
            )
    failed = run_.failed
    crash = run_.crash
    if not failed and crash is None:
        print(f"  acp machine: passed, {counts}; {loads}")
        if table:
            print(f"  verdict: {summary.headline}")
        return 0
    rank = TIERS.index(fail_on) if fail_on in TIERS else len(TIERS) - 1
    failing = [
        v.property.name
        for v in failed
        if v.property.name not in summary.expected
        and TIERS.index(reqs[v.property.name].tier) <= rank
        and not (fail_on != "INFO" and reqs[v.property.name].source == "json-rpc")
    ]
    n = len(failed)
    print(f"  acp machine: FAILED {n} of {len(run_.verdicts)} properties, {counts}; {loads}")
    if table:
        print(f"  verdict: {summary.headline}")
    for index, v in enumerate(failed, 1):
        finding = v.finding
        req = reqs[v.property.name]
        print(f"  failure {index} of {n} ({req.tier} {req.id}):")
        _print_finding(finding, replay.replace("{seed}", str(report.seed)))
    if crash is not None:
        print("  the run ended early:")
        _print_finding(crash, replay.replace("{seed}", str(report.seed)))
    if summary.stale:
        print(
            f"  the baseline {baseline.path} is stale: {', '.join(summary.stale)} passed; "
            "take them out of it"
        )
    if summary.expected:
        print(f"  expected by the baseline: {', '.join(summary.expected)}")
    return 1 if failing or crash is not None or summary.stale else 0


def describe_latencies(latencies: Mapping[str, Sequence[float]]) -> str:
    """How long cancels took to abort what they landed on, as one line ("" for none)."""
    words = {"stream": "model stream closed", "tool": "shell command ended"}
    parts: list[str] = []
    for kind in ("stream", "tool"):
        seconds = sorted(latencies.get(kind, ()))
        if seconds:
            median = seconds[len(seconds) // 2] * 1000
            parts.append(
                f"{words[kind]} after {median:.0f} ms median, {seconds[-1] * 1000:.0f} ms "
                f"at most ({len(seconds)} cancels)"
            )
    return "; ".join(parts)


def _print_finding(finding: Any, replay: str) -> None:
    aside = ""
    if finding.shrunk.startswith("shrinking cut short"):
        aside = f"{finding.shrunk}: the program below is the smallest found by then"
    print_found(finding.message, finding.script, replay, aside)


def run_builtin(
    prog: str,
    profile: str | None,
    max_examples: int | None,
    seed: int,
    interrupted: Callable[[], bool] | None = None,
) -> Any:
    """The main job's ACP machine: the built-in runtime's ACP server (`trio-agents acp
    --model openai`, this Python) checked as any ACP agent is (D409). Its report, printed;
    None, after one line saying why, when the ACP schema is not installed."""
    try:
        # Imported here: the ACP schema, which only this machine needs and a plain install
        # leaves out.
        from .._acp._client import AcpTarget  # the ACP schema, only when run
        from .._acp._run import run_acp_conformance  # the ACP schema, only when run
    except ImportError as exc:  # acp.schema: the agent-client-protocol package
        say(
            f"  acp machine: not run: it needs the ACP schema package ({exc.name} is "
            "missing): pip install 'trio-agents[acp-conformance]'"
        )
        return None
    found = installed("trio-agents")
    if found is None:
        say("  acp machine: not run: no trio-agents command here to start")
        return None
    command = (found, "acp", "--model", "openai")
    target = AcpTarget(command, timeout=DEFAULT_TIMEOUT, grace=DEFAULT_GRACE)
    run_ = run_acp_conformance(
        target,
        profile_name=profile,
        max_examples=max_examples,
        seed=seed,
        progress=progress,
        interrupted=interrupted,
    )
    with OUTPUT:  # one block, between the other lanes' (D417)
        _print_acp_run(run_, f"{prog} --machine acp --seed {{seed}}")
    checked = tuple(v.property for v in run_.verdicts if v.outcome in ("passed", "failed"))
    skipped = tuple(
        (v.property, v.why) for v in run_.verdicts if v.outcome not in ("passed", "failed")
    )
    return dataclasses.replace(run_.report, checked=checked, skipped=skipped)
