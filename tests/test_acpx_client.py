"""`trio-agents acp` driven by a third real client, the `acpx` command line, pinned to 0.19.1
(issue 17, acceptance 3). The test installs the pinned package with npm into `.ci/acpx/`
(ignored by git) the first time it runs, and gives acpx a home of its own in `tmp_path`
(acpx keeps its sessions under `~/.acpx/`).

acpx is pointed at the checkout's server with `--agent` (a command line it splits as a shell
would). With `--format json` it prints every JSON-RPC message it exchanges with the agent,
one per line, which is what the tests read. A persistent session is served by a "queue
owner" process acpx leaves behind until it has been idle for `--ttl` seconds: the tests
use `--ttl 1` and wait for it to exit, which is also how a later prompt comes to load the
session in a fresh agent process."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ACPX_DIR = ROOT / ".ci" / "acpx"
VERSION = "0.19.1"
PACKAGE = f"acpx@{VERSION}"

pytestmark = pytest.mark.subprocess


@pytest.fixture(scope="module")
def acpx_cli() -> pathlib.Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the acpx client test")
    package = ACPX_DIR / "node_modules" / "acpx"
    marker = package / "package.json"
    if not marker.exists() or json.loads(marker.read_text()).get("version") != VERSION:
        ACPX_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(ACPX_DIR), "--no-audit", "--no-fund", PACKAGE],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return package / "dist" / "cli.js"


@dataclass
class Acpx:
    """One acpx home and project directory, and the server command acpx starts."""

    cli: pathlib.Path
    home: pathlib.Path
    project: pathlib.Path
    store: pathlib.Path

    @property
    def agent(self) -> str:
        return shlex.join(
            [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(self.store)]
        )

    def env(self) -> dict[str, str]:
        path = os.environ.get("PYTHONPATH")
        return {
            **os.environ,
            "HOME": str(self.home),
            # The server acpx starts runs this checkout's code.
            "PYTHONPATH": str(ROOT) if not path else f"{ROOT}{os.pathsep}{path}",
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [
            "node", str(self.cli), "--cwd", str(self.project), "--format", "json", "--ttl", "1",
            "--agent", self.agent, *args,
        ]  # fmt: skip
        return subprocess.run(
            command, env=self.env(), capture_output=True, text=True, timeout=60, check=False
        )

    def owners(self) -> list[int]:
        """The pids of the queue owners acpx recorded (alive or not)."""
        pids: list[int] = []
        for lock in (self.home / ".acpx" / "queues").glob("*.lock"):
            try:
                pid = json.loads(lock.read_text()).get("pid")
            except (OSError, ValueError):
                continue
            if isinstance(pid, int):
                pids.append(pid)
        return pids

    def processes(self) -> list[int]:
        """Live processes of this test: acpx's queue owners and the servers on its store."""
        found = [pid for pid in self.owners() if _alive(pid)]
        for entry in pathlib.Path("/proc").iterdir():
            if entry.name.isdigit() and str(self.store).encode() in _cmdline(entry):
                found.append(int(entry.name))
        return sorted(set(found))

    def wait_until_idle_owners_exit(self, deadline: float = 20.0) -> None:
        end = time.monotonic() + deadline
        while self.processes():
            assert time.monotonic() < end, f"still running after {deadline}s: {self.processes()}"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _cmdline(entry: pathlib.Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture
def acpx(acpx_cli: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[Acpx]:
    client = Acpx(acpx_cli, tmp_path / "home", tmp_path / "project", tmp_path / "s.sqlite3")
    client.home.mkdir()
    client.project.mkdir()
    try:
        yield client
        # An idle queue owner exits after its ttl, and takes its server with it.
        client.wait_until_idle_owners_exit()
    finally:
        for pid in client.processes():  # ours (started through acpx): after a failure
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def messages(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The JSON-RPC messages acpx printed (its own status lines are not JSON-RPC)."""
    out: list[dict[str, Any]] = []
    for line in result.stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            frame = cast("dict[str, Any]", message)
            if frame.get("jsonrpc") == "2.0":
                out.append(frame)
    return out


def requests(found: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [m for m in found if m.get("method") == method and "id" in m]


def answer_to(found: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    (answer,) = [m for m in found if m.get("id") == request["id"] and "method" not in m]
    return answer


def chosen(found: list[dict[str, Any]], asked: dict[str, Any]) -> str:
    """The kind of the option the client chose in its answer to permission request `asked`."""
    outcome = answer_to(found, asked)["result"]["outcome"]
    assert outcome["outcome"] == "selected", outcome
    kinds = {o["optionId"]: o["kind"] for o in asked["params"]["options"]}
    return str(kinds[outcome["optionId"]])


def tool_statuses(found: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each tool call's statuses, in the order the agent sent them."""
    statuses: dict[str, list[str]] = {}
    for message in found:
        if message.get("method") != "session/update":
            continue
        update = message["params"]["update"]
        if update["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in update:
            statuses.setdefault(update["toolCallId"], []).append(update["status"])
    return statuses


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"


def test_deny_all_runs_no_command_and_approve_all_runs_it(acpx: Acpx) -> None:
    denied = acpx.run("--deny-all", "exec", "!touch denied.txt")
    assert not (acpx.project / "denied.txt").exists(), describe(denied)
    assert denied.returncode == 5, describe(denied)  # acpx: "a permission was denied"
    found = messages(denied)
    (asked,) = requests(found, "session/request_permission")
    assert asked["params"]["toolCall"]["toolCallId"] == "offline-1"
    assert chosen(found, asked) == "reject_once"
    # Shown to the client as asked, then failed: it never ran.
    assert tool_statuses(found) == {"offline-1": ["pending", "failed"]}, describe(denied)
    (prompt,) = requests(found, "session/prompt")
    # The model is told, and the turn goes on to its end.
    assert answer_to(found, prompt).get("result") == {"stopReason": "end_turn"}

    allowed = acpx.run("--approve-all", "exec", "!touch allowed.txt")
    assert allowed.returncode == 0, describe(allowed)
    assert (acpx.project / "allowed.txt").exists(), describe(allowed)
    found = messages(allowed)
    (asked,) = requests(found, "session/request_permission")
    assert chosen(found, asked) == "allow_once"
    statuses = tool_statuses(found)
    assert statuses == {"offline-1": ["pending", "in_progress", "completed"]}, describe(allowed)


def test_a_session_made_by_sessions_new_is_resumed_by_later_acpx_processes(acpx: Acpx) -> None:
    made = acpx.run("sessions", "new")
    assert made.returncode == 0, describe(made)
    (created,) = [json.loads(line) for line in made.stdout.splitlines() if "acpxSessionId" in line]
    sid = created["acpxSessionId"]
    acpx.wait_until_idle_owners_exit()

    # Each prompt comes from a new acpx process, whose agent is a new server process.
    for number, word in ((1, "one"), (2, "two")):
        prompted = acpx.run("--approve-all", f"!echo {word}")
        assert prompted.returncode == 0, describe(prompted)
        found = messages(prompted)
        assert requests(found, "session/new") == [], describe(prompted)
        # acpx resumes a session when the agent advertises `session/resume` (D507), and
        # loads it otherwise.
        assert requests(found, "session/load") == [], describe(prompted)
        (load,) = requests(found, "session/resume")
        assert load["params"]["sessionId"] == sid
        assert "result" in answer_to(found, load), describe(prompted)
        (prompt,) = requests(found, "session/prompt")
        assert prompt["params"]["sessionId"] == sid
        # The offline model numbers its calls after those in the history it was given: the
        # second process's model saw the first process's turn.
        assert list(tool_statuses(found)) == [f"offline-{number}"], describe(prompted)
        acpx.wait_until_idle_owners_exit()

    shown = subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", "sessions", "show", "--json", "--store",
         str(acpx.store), sid],
        env=acpx.env(), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    prompts = [r["data"]["content"] for r in records if r["type"] == "user/message"]
    assert prompts == ["!echo one", "!echo two"]
