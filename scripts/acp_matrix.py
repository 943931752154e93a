"""The requirement x agent matrix of ACP agents other people publish (issue 35, D478).

    python scripts/acp_matrix.py install [NAME ...]      # pinned installs, done ones skipped
    python scripts/acp_matrix.py check NAME [-- OPTIONS]  # the suite on one agent, as the
                                                          # matrix runs it, extra options after --
    python scripts/acp_matrix.py run [--only NAME,...] [--seed 1] [--max-examples 8]
                                     [--out docs/matrix]

The agents, their pinned versions and how each is pointed at the suite's scripted endpoint
are in `scripts/third-party/agents.toml` (`--agents FILE` for another list). `install` puts
each into its own prefix under `.third-party/` (gitignored; npm packages with `npm install
--prefix`, PyPI ones in a virtual environment of their own). `run` runs `trio-agents
conformance --acp` on every installed agent, in turn, with a JSON report; then replays each
failure's reproduction script in a fresh process against the agent alone, which confirms it
when it fails with the same property; and writes `acp-matrix.json` and `acp-matrix.html`
(self-contained) and the reproductions (`repro/AGENT/PROPERTY.py`) under `--out`. An agent
that is not installed, or that the run could not start, keeps its column, with the reason.
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "scripts" / "third-party" / "agents.toml"
PREFIX = ROOT / ".third-party"
RUN_TIMEOUT = 1800.0  # seconds one agent's run may take, all passes
REPLAY_TIMEOUT = 600.0
STOP_GRACE = 30.0  # seconds a run past its time has to close its agents once interrupted
REPLAYS = 3  # attempts to confirm a failure that hangs on a race
OUTCOMES = ("passed", "failed", "not reached", "not applicable", "skipped")


@dataclass(frozen=True)
class Agent:
    """One agent of the list: how to install it, start it and point it at the endpoint."""

    name: str
    version: str
    source: str  # "npm", "pypi" or "builtin"
    package: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    config: Mapping[str, str] = field(default_factory=dict[str, str])  # path in HOME -> file
    api: str = ""
    options: tuple[str, ...] = ()  # more conformance options (a longer --timeout, say)
    extras: tuple[str, ...] = ()  # more packages installed beside it, pinned
    python: str = "python3"  # the interpreter a PyPI agent's environment is made with
    note: str = ""

    def directory(self, prefix: Path) -> Path:
        return prefix / self.name

    def installed(self, prefix: Path) -> bool:
        if self.source == "builtin":
            return True
        marker = self.directory(prefix) / ".installed"
        if marker.exists():
            return marker.read_text().strip() == self.pin
        # Installed by hand, before the marker: the package's own record of its version.
        if self.source == "npm":
            manifest = self.directory(prefix) / "node_modules" / self.package / "package.json"
            try:
                found: dict[str, object] = json.loads(manifest.read_text())
                return found.get("version") == self.version
            except (OSError, ValueError):
                return False
        dist = re.sub(r"[-.]+", "_", self.package.split("[", 1)[0]).lower()
        venv = self.directory(prefix) / "venv"
        return any(venv.glob(f"lib/python*/site-packages/{dist}-{self.version}.dist-info"))

    @property
    def pin(self) -> str:
        return f"{self.package}@{self.version}" + "".join(f" {e}" for e in self.extras)


class Unusable(Exception):
    """The agent list is wrong: one line says what."""


def load(path: Path) -> list[Agent]:
    """The agents of a TOML list (`[[agent]]` tables)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise Unusable(f"cannot read the agent list {path}: {exc}") from None
    agents: list[Agent] = []
    for entry in cast("list[dict[str, Any]]", data.get("agent", [])):
        _check_entry(path, entry)
        try:
            agent = Agent(
                name=str(entry["name"]),
                version=str(entry["version"]),
                source=str(entry["source"]),
                package=str(entry.get("package", "")),
                command=tuple(str(c) for c in entry["command"]),
                env={str(k): str(v) for k, v in dict(entry.get("env", {})).items()},
                config={str(k): str(v) for k, v in dict(entry.get("config", {})).items()},
                api=str(entry.get("api", "")),
                options=tuple(str(o) for o in entry.get("options", ())),
                extras=tuple(str(e) for e in entry.get("extras", ())),
                python=str(entry.get("python", "python3")),
                note=str(entry.get("note", "")),
            )
        except KeyError as exc:
            raise Unusable(f"{path}: an agent has no {exc.args[0]!r}") from None
        if agent.source not in ("npm", "pypi", "builtin"):
            raise Unusable(f"{path}: {agent.name}: source {agent.source!r} is not npm/pypi/builtin")
        if agent.source != "builtin" and not re.fullmatch(
            r"\d+(\.\d+)*([a-z0-9.-]*)", agent.version
        ):
            raise Unusable(f"{path}: {agent.name}: version {agent.version!r} is not a pin")
        agents.append(agent)
    return agents


def _check_entry(path: Path, entry: Mapping[str, Any]) -> None:
    """The fields a user can get wrong in a way `str()` would hide: a command or a list of
    options given as one string, a table given as something else."""
    name = entry.get("name", "?")
    for key in ("command", "options", "extras"):
        if key in entry and not (
            isinstance(entry[key], list) and all(isinstance(v, str) for v in entry[key])
        ):
            raise Unusable(
                f"{path}: {name}: {key} must be a list of strings, e.g. "
                f'{key} = ["{key}-word", "..."], not {entry[key]!r}'
            )
    for key in ("env", "config"):
        if key in entry and not isinstance(entry[key], dict):
            raise Unusable(f"{path}: {name}: {key} must be a table of strings, not {entry[key]!r}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Unusable(f"cannot read {path}: {exc}; `acp_matrix.py run` rewrites it") from None


def _run_bounded(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`argv` to its end or for `timeout` seconds. Past that, an interrupt lets the suite
    close the agents it started (each in its own process group, out of reach of a kill of
    this one's); what is left a grace later is killed. Raises TimeoutExpired then. A Ctrl-C
    of this script (which no longer reaches the child's new session) is passed on alike."""
    with subprocess.Popen(
        argv,
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except BaseException:  # the timeout, or an interrupt of this script
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.communicate(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
            raise
        return subprocess.CompletedProcess(argv, process.returncode, out, err)


# -- installing ---------------------------------------------------------------------------


def install(agent: Agent, prefix: Path) -> str:
    """Install `agent` pinned into its own prefix; what was done, in one line."""
    if agent.installed(prefix):
        return f"{agent.name}: {agent.pin} already installed"
    where = agent.directory(prefix)
    where.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if agent.source == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise Unusable(f"{agent.name} is an npm package and npm is not on PATH")
        packages = [f"{agent.package}@{agent.version}", *agent.extras]
        argv = [npm, "install", "--prefix", str(where), "--save-exact", "--no-audit", "--no-fund"]
        subprocess.run([*argv, *packages], check=True)
    else:
        venv = where / "venv"
        python = shutil.which(agent.python)
        if python is None:
            raise Unusable(f"{agent.name} needs {agent.python}, which is not on PATH")
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, f"{agent.package}=={agent.version}", *agent.extras], check=True)
    (where / ".installed").write_text(agent.pin + "\n")
    return f"{agent.name}: installed {agent.pin} in {time.monotonic() - started:.0f} s"


# -- one agent's run ------------------------------------------------------------------------


def conformance_argv(
    agent: Agent, prefix: Path, extra: Sequence[str] = (), defaults: Sequence[str] = ()
) -> list[str]:
    """`trio-agents conformance --acp` on `agent`, configured as the list says: `defaults`,
    then the agent's own options, then `extra` (the last given wins)."""
    values = {"prefix": str(agent.directory(prefix)), "python": sys.executable}
    argv = [sys.executable, "-m", "trio_agents._cli", "conformance", "--acp"]
    argv += ["--env", "HOME={dir}"]
    for name, value in agent.env.items():
        argv += ["--env", f"{name}={_fill(value, values)}"]
    for target, source in agent.config.items():
        argv += ["--config-file", f"{target}=@{ROOT / 'scripts' / 'third-party' / source}"]
    argv += [*defaults, *agent.options, *extra, "--"]
    return argv + [_fill(part, values) for part in agent.command]


def _fill(text: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def _env() -> dict[str, str]:
    python_path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT) + (os.pathsep + python_path if python_path else ""),
    }


@dataclass
class Column:
    """One agent's column of the matrix."""

    agent: Agent
    seconds: float = 0.0
    report: dict[str, Any] | None = None
    problem: str = ""  # why it has no report
    findings: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])


def run_agent(agent: Agent, prefix: Path, options: Sequence[str], scratch: Path) -> Column:
    column = Column(agent)
    if not agent.installed(prefix):
        column.problem = f"not installed: scripts/install-third-party-agents.sh {agent.name}"
        return column
    report = scratch / f"{agent.name}.json"
    argv = conformance_argv(agent, prefix, ["--report-json", str(report)], options)
    report.unlink(missing_ok=True)  # a run that writes none must not show the last one's
    started = time.monotonic()
    try:
        done = _run_bounded(argv, RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        column.problem = f"the run took longer than {RUN_TIMEOUT:g} s"
        return column
    finally:
        column.seconds = time.monotonic() - started
    if not report.exists():
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        column.problem = f"no report (exit {done.returncode}): {last}"
        return column
    try:
        column.report = json.loads(report.read_text())
    except ValueError as exc:
        column.problem = f"its report {report} is not JSON: {exc}"
    return column


def portable(script: str, path: Path, prefix: Path) -> str:
    """`script`, to be written at `path`, with the paths of this machine it names (the
    agents' install prefix, the checkout) made relative to where it is: it runs from any
    checkout that installed the agent, or with THIRD_PARTY naming another prefix."""
    header = ["import os", "", "_HERE = os.path.dirname(os.path.abspath(__file__))"]
    text = script
    for name, place, variable in (("PREFIX", prefix, "THIRD_PARTY"), ("ROOT", ROOT, None)):
        where = place.resolve()
        quoted = repr(str(where))[:-1]  # the string's opening quote, not its closing one
        if quoted + "/" not in text and quoted + "'" not in text:
            continue
        text = text.replace(quoted + "/", f"{name} + '/").replace(quoted + "'", name)
        relative = os.path.relpath(where, path.parent.resolve())
        default = f"os.path.normpath(os.path.join(_HERE, {relative!r}))"
        value = f"os.environ.get({variable!r}, {default})" if variable else default
        header.append(f"{name} = {value}")
    if len(header) == 3:
        return script
    first, _, rest = text.partition("\n")
    return "\n".join([first, *header, rest])


def confirm(column: Column, out: Path, prefix: Path, *, replaying: bool = True) -> None:
    """Write each failure's reproduction under `out` and replay it in a fresh process: a
    failure is confirmed when the replay fails with the same property."""
    assert column.report is not None
    for row in column.report["requirements"]:
        finding = row.get("finding")
        if row["outcome"] != "failed" or finding is None:
            continue
        entry: dict[str, Any] = {
            "agent": column.agent.name,
            "requirement": row["id"],
            "tier": row["tier"],
            "property": row["property"],
            "message": finding["message"],
            "reproduction": None,
            "confirmed": False,
            "replay": "no reproduction script: the failure is the agent's start",
        }
        script = finding.get("script")
        if script:
            path = out / "repro" / column.agent.name / f"{row['property']}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(portable(script, path, prefix))
            entry["reproduction"] = str(path.relative_to(out))
            entry["replay"] = "not replayed yet: python scripts/acp_matrix.py confirm"
            if replaying:
                entry["confirmed"], entry["replay"] = replay(path, row["property"], REPLAYS)
        column.findings.append(entry)


def replay(script: Path, prop: str, attempts: int = 1) -> tuple[bool, str]:
    """Run a reproduction script up to `attempts` times, until it fails with `prop` (a race
    may need more than one); whether it did, and what it said."""
    said = ""
    for attempt in range(1, attempts + 1):
        confirmed, said = _replay_once(script, prop)
        if confirmed:
            return True, said + (f" (attempt {attempt} of {attempts})" if attempts > 1 else "")
    return False, said + (f" ({attempts} attempts)" if attempts > 1 else "")


def _replay_once(script: Path, prop: str) -> tuple[bool, str]:
    try:
        done = _run_bounded([sys.executable, str(script)], REPLAY_TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, f"the replay took longer than {REPLAY_TIMEOUT:g} s"
    output = (done.stdout + done.stderr).strip()
    shown = re.search(rf"^.*\b[A-Z]\d+ \({re.escape(prop)}\).*$", output, re.M)
    if shown is not None and done.returncode != 0:
        return True, f"the replay failed the same way: {shown.group(0).strip()}"
    return False, f"the replay exited {done.returncode}: " + "\n".join(output.splitlines()[-6:])


# -- the matrix -----------------------------------------------------------------------------


def matrix(columns: Sequence[Column], seed: int, options: Sequence[str]) -> dict[str, Any]:
    """The matrix as JSON: agents (verdict, time), requirements (outcome by agent),
    findings (with their reproductions and whether each was confirmed)."""
    requirements: dict[str, dict[str, Any]] = {}
    agents: list[dict[str, Any]] = []
    for column in columns:
        agent = column.agent
        summary: dict[str, Any] = {
            "name": agent.name,
            "version": agent.version,
            "source": agent.source,
            "package": agent.package,
            "api": agent.api,
            "seconds": round(column.seconds, 1),
            "note": agent.note,
        }
        if column.report is None:
            summary.update(verdict="NOT RUN", problem=column.problem)
        else:
            verdict = column.report["verdict"]
            summary.update(
                verdict="CONFORMANT" if verdict["conformant"] else "NOT CONFORMANT",
                headline=verdict["headline"],
                counts=verdict["counts"],
                crash=(column.report.get("crash") or {"message": None})["message"],
            )
            for row in column.report["requirements"]:
                entry = requirements.setdefault(
                    row["id"],
                    {
                        "id": row["id"],
                        "tier": row["tier"],
                        "property": row["property"],
                        "rule": row["rule"],
                        "says": row["says"],
                        "outcomes": {},
                    },
                )
                entry["outcomes"][agent.name] = row["outcome"]
        agents.append(summary)
    return {
        "format": "trio-agents-acp-matrix/1",
        "generated": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "command": "python scripts/acp_matrix.py run " + " ".join(options),
        "seed": seed,
        "agents": agents,
        "requirements": sorted(requirements.values(), key=lambda r: r["id"]),
        "findings": [f for column in columns for f in column.findings],
    }


def reconfirm(out: Path, attempts: int) -> int:
    """Replay each unconfirmed failure of the matrix under `out` again; rewrite the matrix."""
    path = out / "acp-matrix.json"
    if not path.exists():
        raise Unusable(f"no matrix at {path} to confirm: run `acp_matrix.py run` first")
    data = _read_json(path)
    for finding in data["findings"]:
        if finding["confirmed"] or not finding["reproduction"]:
            continue
        print(f"{finding['agent']}: replaying {finding['property']}", flush=True)
        script = out / finding["reproduction"]
        finding["confirmed"], finding["replay"] = replay(script, finding["property"], attempts)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    (out / "acp-matrix.html").write_text(render_html(data))
    return 0


def merged(old: Mapping[str, Any], new: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """The matrix `old` with the columns of `new` in place of its own (a run with `--only`
    redoes some agents and keeps the rest), agents in the list's `order`."""
    redone = {a["name"] for a in new["agents"]}
    agents = {a["name"]: a for a in old["agents"] if a["name"] not in redone}
    agents.update({a["name"]: a for a in new["agents"]})
    requirements = {r["id"]: r for r in old["requirements"]}
    for req in requirements.values():
        req["outcomes"] = {k: v for k, v in req["outcomes"].items() if k not in redone}
    for req in new["requirements"]:
        requirements.setdefault(req["id"], {**req, "outcomes": {}})["outcomes"].update(
            req["outcomes"]
        )
    findings = [f for f in old["findings"] if f["agent"] not in redone] + list(new["findings"])
    rank = {name: n for n, name in enumerate(order)}
    return {
        **new,
        "agents": sorted(agents.values(), key=lambda a: rank.get(a["name"], len(rank))),
        "requirements": sorted(requirements.values(), key=lambda r: r["id"]),
        "findings": sorted(findings, key=lambda f: rank.get(f["agent"], len(rank))),
    }


_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { border: 1px solid #bbb; padding: 3px 6px; vertical-align: top; }
th.agent { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; }
td.passed { background: #c8ecc8; } td.failed { background: #f4b4b4; font-weight: bold; }
td.not-reached, td.not-applicable, td.skipped { background: #eee; color: #666; }
pre { background: #f6f6f6; padding: 6px; white-space: pre-wrap; }
"""


def render_html(data: Mapping[str, Any]) -> str:
    """The matrix as one self-contained HTML page."""
    agents = [a["name"] for a in data["agents"]]
    e = html.escape
    head = "".join(f'<th class="agent">{e(a)}</th>' for a in agents)
    rows: list[str] = []
    for req in data["requirements"]:
        cells: list[str] = []
        for name in agents:
            outcome = req["outcomes"].get(name, "")
            css = outcome.replace(" ", "-")
            link = (
                f'<a href="#{e(name)}-{e(req["property"])}">failed</a>'
                if outcome == "failed"
                else e(outcome)
            )
            cells.append(f'<td class="{css}">{link}</td>')
        rows.append(
            f"<tr><td>{e(req['id'])}</td><td>{e(req['tier'])}</td>"
            f"<td>{e(req['property'])} ({e(req['rule'])})</td>{''.join(cells)}</tr>"
        )
    agent_rows = "".join(
        f"<tr><td>{e(a['name'])}</td><td>{e(a['version'])}</td><td>{e(a['source'])}: "
        f"{e(a['package'])}</td><td>{e(a['api'])}</td><td><b>{e(a['verdict'])}</b></td>"
        f"<td>{a['seconds']:.0f} s</td>"
        f"<td>{e(a.get('headline') or a.get('problem') or '')}</td></tr>"
        for a in data["agents"]
    )
    findings = "".join(
        f'<h3 id="{e(f["agent"])}-{e(f["property"])}">{e(f["agent"])}: {e(f["requirement"])} '
        f"{e(f['property'])} ({e(f['tier'])})</h3><pre>{e(f['message'])}</pre>"
        f"<p>reproduction: <code>{e(f['reproduction'] or 'none')}</code>; "
        f"{'confirmed by a replay' if f['confirmed'] else 'NOT confirmed by a replay'}</p>"
        f"<pre>{e(f['replay'])}</pre>"
        for f in data["findings"]
    )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>ACP conformance matrix'
        f"</title><style>{_CSS}</style></head><body><h1>ACP conformance matrix</h1>"
        f"<p>{e(data['generated'])}, seed {data['seed']}: <code>{e(data['command'])}</code></p>"
        "<h2>Agents</h2><table><tr><th>agent</th><th>version</th><th>from</th><th>model API"
        f"</th><th>verdict</th><th>time</th><th>summary</th></tr>{agent_rows}</table>"
        "<h2>Requirements</h2><table><tr><th>id</th><th>tier</th><th>property</th>"
        f"{head}</tr>{''.join(rows)}</table><h2>Findings</h2>{findings}</body></html>\n"
    )


# -- the command line ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="acp_matrix.py", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--agents", type=Path, default=AGENTS, help="the agent list (TOML)")
    parser.add_argument("--prefix", type=Path, default=PREFIX, help="where agents are installed")
    commands = parser.add_subparsers(dest="command", required=True)
    inst = commands.add_parser("install", help="install the pinned agents")
    inst.add_argument("names", nargs="*")
    check = commands.add_parser("check", help="the suite on one agent")
    check.add_argument("name")
    check.add_argument("options", nargs=argparse.REMAINDER)
    again = commands.add_parser(
        "confirm", help="replay the matrix's unconfirmed failures again, and rewrite it"
    )
    again.add_argument("--attempts", type=int, default=REPLAYS)
    again.add_argument("--out", type=Path, default=ROOT / "docs" / "matrix")
    run = commands.add_parser("run", help="the matrix")
    run.add_argument("--only", default="", help="agents, comma-separated")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--max-examples", type=int, default=8)
    run.add_argument("--timeout", type=float, default=30.0, help="seconds an answer may take")
    run.add_argument("--shrink-budget", type=float, default=30.0, help="seconds per failure")
    run.add_argument("--out", type=Path, default=ROOT / "docs" / "matrix")
    run.add_argument(
        "--reuse", action="store_true", help="take each agent's report from an earlier run"
    )
    run.add_argument(
        "--no-replay", action="store_true", help="write the reproductions, do not run them"
    )
    args = parser.parse_args(argv)
    try:
        agents = load(args.agents)
        by_name = {a.name: a for a in agents}
        if args.command == "install":
            unknown = [n for n in args.names if n not in by_name]
            if unknown:
                raise Unusable(f"no agent {unknown[0]!r} in {args.agents}: {', '.join(by_name)}")
            for agent in agents:
                if agent.source != "builtin" and (not args.names or agent.name in args.names):
                    print(install(agent, args.prefix), flush=True)
            return 0
        if args.command == "check":
            if args.name not in by_name:
                raise Unusable(f"no agent {args.name!r} in {args.agents}: {', '.join(by_name)}")
            agent = by_name[args.name]
            if not agent.installed(args.prefix):
                raise Unusable(
                    f"{agent.name} is not installed in {args.prefix}: run "
                    f"scripts/install-third-party-agents.sh {agent.name}"
                )
            extra = [o for o in args.options if o != "--"]
            command = conformance_argv(agent, args.prefix, extra)
            return subprocess.run(command, cwd=ROOT, env=_env(), check=False).returncode
        if args.command == "confirm":
            return reconfirm(args.out, args.attempts)
        only = [n for n in args.only.split(",") if n]
        unknown = [n for n in only if n not in by_name]
        if unknown:
            raise Unusable(f"no agent {unknown[0]!r} in {args.agents}: {', '.join(by_name)}")
        chosen = [a for a in agents if not only or a.name in only]
        options = ["--seed", str(args.seed), "--max-examples", str(args.max_examples)]
        options += ["--timeout", f"{args.timeout:g}", "--shrink-budget", f"{args.shrink_budget:g}"]
        out: Path = args.out
        for agent in chosen:
            shutil.rmtree(out / "repro" / agent.name, ignore_errors=True)
        scratch = out / "reports"
        scratch.mkdir(parents=True, exist_ok=True)
        columns: list[Column] = []
        for agent in chosen:
            print(f"{agent.name}: running the suite", flush=True)
            earlier = scratch / f"{agent.name}.json"
            if args.reuse and earlier.exists():
                report = _read_json(earlier)
                column = Column(agent, seconds=float(report.get("seconds", 0.0)), report=report)
            elif args.reuse:
                column = Column(agent, problem="not run: no report of an earlier run to reuse")
            else:
                column = run_agent(agent, args.prefix, options, scratch)
            if column.report is not None:
                confirm(column, out, args.prefix, replaying=not args.no_replay)
            verdict = (
                column.problem or column.report["verdict"]["headline"]
                if column.report
                else column.problem
            )
            print(f"{agent.name}: {verdict} ({column.seconds:.0f} s)", flush=True)
            columns.append(column)
        data = matrix(columns, args.seed, options)
        previous = out / "acp-matrix.json"
        if only and previous.exists():
            data = merged(_read_json(previous), data, [a.name for a in agents])
        (out / "acp-matrix.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        (out / "acp-matrix.html").write_text(render_html(data))
        print(f"wrote {out / 'acp-matrix.json'} and {out / 'acp-matrix.html'}")
        return 0
    except Unusable as exc:
        print(f"acp_matrix.py: error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(
            f"acp_matrix.py: error: {' '.join(map(str, exc.cmd))} exited {exc.returncode}",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
