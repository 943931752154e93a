"""SIGTERM and SIGHUP to `trio-agents acp` and `chat` run the teardown of end of input, and a
second signal forces the exit; on every path no process is left (issue 16, acceptance 6).

Each test starts the real command (offline model) with a background job running a script
from the test's directory, then signals it. The checks read the process table (/proc) for
the job's processes and for anything whose command line names the test's directory (the
server included), and the store file after the exit.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import math
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import pexpect
import pytest
import trio
import trio.testing

from trio_agents import (
    MemoryStore,
    OfflineModel,
    RunResult,
    ShellExecutor,
    ShellRequest,
    SqliteStore,
    StoredSession,
)
from trio_agents._cli._chat import ChatConfig, run_chat
from trio_agents._cli._signals import Quit, QuitPolicy, SignalWatch, exit_status, teardown_limit

from .support.processes import gone, host_pid, live_group_members

TIMEOUT = 30.0  # seconds for any one expectation; nothing here sleeps to wait

# A background job of two processes: the script's bash and a sleep it waits for. `trapped`
# makes the sleep ignore TERM and the bash note each TERM it gets, so killing the job takes
# the whole shell grace (3 s): a window in which the teardown is known to be running. Each
# pid is written once its process has set its traps, so a signal sent after both files
# exist finds them in place.
JOB = """\
{trap}
echo "$$" > {dir}/job.pid
({ignore}echo "$BASHPID" > {dir}/child.pid; exec sleep 300) &
while :; do wait; done
"""


def write_job(tmp_path: pathlib.Path, *, trapped: bool = False) -> pathlib.Path:
    script = tmp_path / "job.sh"
    script.write_text(
        JOB.format(
            dir=tmp_path,
            trap=f"trap 'echo term >> {tmp_path}/job.term' TERM" if trapped else "",
            ignore="trap '' TERM; " if trapped else "",
        )
    )
    return script


@pytest.fixture(autouse=True)
def kill_leftover_jobs(tmp_path: pathlib.Path) -> Iterator[None]:
    """A failing test must not leave its job running: kill its group after the test."""
    yield
    groups: set[int] = set()
    for name in ("job.pid", "child.pid"):
        with contextlib.suppress(OSError, ValueError, IndexError, AssertionError):
            groups.add(process_group(host_pid(int((tmp_path / name).read_text()))))
    for pgid in groups:
        # A pid written inside a sandbox is its namespace's: never signal a group it does
        # not name here (0 would be this process's own group).
        if pgid > 1 and pgid != os.getpgrp():
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)


def wait_for(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def job_pids(tmp_path: pathlib.Path) -> list[int]:
    """The job's bash and sleep, once both have written their pid."""
    files = [tmp_path / "job.pid", tmp_path / "child.pid"]
    wait_for("the job's pids", lambda: all(f.exists() and f.read_text().strip() for f in files))
    # The job runs sandboxed: its `$$` is a number in its own PID namespace.
    return [host_pid(int(f.read_text())) for f in files]


def process_group(pid: int) -> int:
    return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


def marked(marker: str) -> list[int]:
    """Live pids whose command line contains `marker`, this test process excepted."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and not gone(int(entry)):
            found.append(int(entry))
    return found


def assert_nothing_left(tmp_path: pathlib.Path, pids: list[int], pgid: int) -> None:
    # The server was waited for; the job's processes were killed by it (or, on the forced
    # path, SIGKILLed just before it exited): the kernel may still be removing them.
    wait_for("the job's processes to go", lambda: all(gone(pid) for pid in pids))
    # So may the rest of the group (the sandbox's own processes): a SIGKILLed group empties
    # in the kernel's time, not at once; what must not happen is that it stays.
    wait_for("the job's group to empty", lambda: live_group_members(pgid) == [])
    assert marked(str(tmp_path)) == []


def environment(tmp_path: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # never the user's store
    return env


def read_session(path: pathlib.Path, sid: str) -> StoredSession:
    async def load() -> StoredSession:
        store = SqliteStore(path, readonly=True)
        async with store.running():
            return await store.load(sid)

    return trio.run(load)


def turn_ends(session: StoredSession) -> list[dict[str, Any]]:
    return [dict(r.data["reason"]) for r in session.records if r.type == "turn/end"]


def committed_turn_ends(path: pathlib.Path, sid: str) -> list[dict[str, Any]]:
    """After a forced exit: the turn ends the store had committed, read through a store that
    opens the file as it is (whole transactions only). Until answers and prompts wait for
    their turn's commit (issue 16, item 2), that may be nothing of the finished turn."""

    async def load() -> list[dict[str, Any]]:
        store = SqliteStore(path, readonly=True)
        async with store.running():
            if not await store.exists(sid):
                return []
            return turn_ends(await store.load(sid))

    return trio.run(load)


def prompts(session: StoredSession) -> list[str]:
    return [str(r.data["content"]) for r in session.records if r.type == "user/message"]


# -- acp over stdio ---------------------------------------------------------------------------


ACP = (sys.executable, "-m", "trio_agents._cli", "acp")


class AcpProcess:
    """`trio-agents acp` in a subprocess, driven with newline-delimited JSON-RPC."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.store = tmp_path / "s.db"
        self.process = subprocess.Popen(
            # `auto`: nothing here answers permission requests.
            [*ACP, "--store", str(self.store), "--mode", "auto"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=environment(tmp_path),
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._ids = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.frames.put(json.loads(line))
        self.frames.put(None)

    def start(self, method: str, params: Mapping[str, Any]) -> int:
        self._ids += 1
        frame = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": dict(params)}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()
        return self._ids

    def expect(self, what: str, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            frame = self.frames.get(timeout=max(0.0, deadline - time.monotonic()))
            assert frame is not None, f"the server's output ended before {what}"
            self.seen.append(frame)
            if matches(frame):
                return frame

    def answer(self, request_id: int) -> dict[str, Any]:
        frame = self.expect(f"the answer to {request_id}", lambda f: f.get("id") == request_id)
        assert "result" in frame, frame
        return dict(frame["result"])

    def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return self.answer(self.start(method, params))

    def prompt(self, sid: str, text: str) -> int:
        content = [{"type": "text", "text": text}]
        return self.start("session/prompt", {"sessionId": sid, "prompt": content})

    def exit(self) -> tuple[int, str]:
        """Wait for the exit; its status and what it wrote on stderr."""
        assert self.process.stderr is not None
        code = self.process.wait(timeout=TIMEOUT)
        return code, self.process.stderr.read().decode()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(TIMEOUT)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


def acp_with_a_job(tmp_path: pathlib.Path, script: pathlib.Path) -> tuple[AcpProcess, str]:
    server = AcpProcess(tmp_path)
    server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = str(server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"])
    answer = server.answer(server.prompt(sid, f"!&bash {script}"))
    assert answer["stopReason"] == "end_turn"
    return server, sid


def text_of(frame: dict[str, Any]) -> str:
    update = frame.get("params", {}).get("update", {})
    return str(update.get("content", {}).get("text", ""))


@pytest.mark.subprocess
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_acp_quits_on_a_signal_as_at_end_of_input(tmp_path: pathlib.Path, signum: int) -> None:
    server, sid = acp_with_a_job(tmp_path, write_job(tmp_path))
    try:
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        held = server.prompt(sid, "/hold")
        server.expect("the held turn", lambda f: "holding" in text_of(f))
        server.process.send_signal(signum)
        # The teardown of end of input: the pending prompt is answered, then the exit.
        assert server.answer(held)["stopReason"] == "cancelled"
        code, stderr = server.exit()
    finally:
        server.close()
    assert code == 128 + signum, stderr
    # Only the line that says what it serves (D317): no error, no traceback.
    (startup,) = stderr.splitlines()
    assert startup.startswith("trio-agents acp "), stderr
    assert_nothing_left(tmp_path, pids, pgid)
    session = read_session(server.store, sid)
    assert prompts(session) == [f"!&bash {tmp_path / 'job.sh'}", "/hold"]
    assert turn_ends(session) == [{"kind": "completed"}, {"kind": "closed"}]


@pytest.mark.subprocess
def test_end_of_input_kills_a_sessions_jobs_and_its_running_command_in_one_grace(
    tmp_path: pathlib.Path,
) -> None:
    # A job and the turn's foreground command that both ignore TERM each take the shell's
    # 3 s grace. They took one after the other, 6 s, past P6's 5 s bound (D384).
    server, sid = acp_with_a_job(tmp_path, write_job(tmp_path, trapped=True))
    try:
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        foreground = tmp_path / "fg.sh"
        foreground.write_text(f"trap '' TERM\necho $$ > {tmp_path}/fg.pid\nsleep 300\n")
        running = server.prompt(sid, f"!bash {foreground}")
        wait_for("the foreground command", lambda: (tmp_path / "fg.pid").exists())
        assert server.process.stdin is not None
        # P6's bound counts from the end of input: the two kills overlap within it.
        deadline = time.monotonic() + 5.0
        server.process.stdin.close()
        assert server.answer(running)["stopReason"] == "cancelled"
        code = server.process.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        server.close()
    assert code == 0
    assert_nothing_left(tmp_path, pids, pgid)


@pytest.mark.subprocess
def test_acp_quits_on_sigterm_during_a_running_tool(tmp_path: pathlib.Path) -> None:
    server = AcpProcess(tmp_path)
    try:
        server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        params: dict[str, Any] = {"cwd": str(tmp_path), "mcpServers": []}
        sid = str(server.request("session/new", params)["sessionId"])
        running = server.prompt(sid, f"!bash {write_job(tmp_path)}")  # in the foreground
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        server.process.send_signal(signal.SIGTERM)
        assert server.answer(running)["stopReason"] == "cancelled"
        code, stderr = server.exit()
    finally:
        server.close()
    assert code == 143, stderr
    assert_nothing_left(tmp_path, pids, pgid)
    session = read_session(server.store, sid)
    results = [
        (r.data["content"], r.data["is_error"]) for r in session.records if r.type == "tool/result"
    ]
    assert results == [("tool call 'bash' was interrupted before it finished", True)]
    assert turn_ends(session) == [{"kind": "closed"}]


@pytest.mark.subprocess
def test_a_second_signal_during_the_acp_teardown_forces_the_exit(tmp_path: pathlib.Path) -> None:
    server, sid = acp_with_a_job(tmp_path, write_job(tmp_path, trapped=True))
    try:
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        server.process.send_signal(signal.SIGTERM)
        # The teardown is killing the job, which holds out for the shell's grace (3 s).
        wait_for("the job's TERM", (tmp_path / "job.term").exists)
        server.process.send_signal(signal.SIGINT)
        code, stderr = server.exit()
    finally:
        server.close()
    assert code == 128 + signal.SIGINT
    assert "trio-agents acp: SIGINT during the teardown: exiting at once" in stderr
    assert "1 command group(s) killed" in stderr
    assert_nothing_left(tmp_path, pids, pgid)
    assert committed_turn_ends(server.store, sid) in ([], [{"kind": "completed"}])


class StalledAcp(AcpProcess):
    """A client that stops reading: nothing takes the server's frames off the pipe."""

    def _read(self) -> None:
        pass

    def expect(self, what: str, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            frame: dict[str, Any] = json.loads(self.process.stdout.readline())
            if matches(frame):
                return frame

    def unread(self) -> int:
        """How many bytes wait in the server's stdout pipe."""
        assert self.process.stdout is not None
        count = array.array("i", [0])
        fcntl.ioctl(self.process.stdout.fileno(), termios.FIONREAD, count)
        return count[0]


@pytest.mark.subprocess
def test_a_teardown_held_by_a_client_that_stopped_reading_ends_at_its_bound(
    tmp_path: pathlib.Path,
) -> None:
    server = StalledAcp(tmp_path)
    try:
        server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        params: dict[str, Any] = {"cwd": str(tmp_path), "mcpServers": []}
        sid = str(server.request("session/new", params)["sessionId"])
        assert server.answer(server.prompt(sid, f"!&bash {write_job(tmp_path)}"))
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        server.prompt(sid, "x" * 2_000_000)  # echoed back: far more than a pipe holds
        wait_for("the server's stdout pipe to fill", lambda: server.unread() >= 65536)
        start = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        code, stderr = server.exit()
        took = time.monotonic() - start
    finally:
        server.close()
    limit = teardown_limit(5.0, 3.0)  # the defaults: close_grace 5 s, the shell's grace 3 s
    assert code == 143
    assert f"trio-agents acp: the teardown took longer than {limit:g}s: exiting at once" in stderr
    assert took >= limit
    assert_nothing_left(tmp_path, pids, pgid)


# -- chat in a pseudo-terminal ---------------------------------------------------------------


def spawn_chat(tmp_path: pathlib.Path) -> pexpect.spawn[str]:
    child: pexpect.spawn[str] = pexpect.spawn(
        sys.executable,
        # --auto: its commands run unasked (asking is tests/test_chat_approval.py's).
        ["-m", "trio_agents._cli", "chat", "--auto", "--store", str(tmp_path / "s.db")],
        cwd=str(tmp_path),
        env=environment(tmp_path),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )
    child.logfile_read = sys.stdout
    return child


def chat_with_a_job(tmp_path: pathlib.Path, script: pathlib.Path) -> tuple[pexpect.spawn[str], str]:
    child = spawn_chat(tmp_path)
    child.expect(r"session (\S+) \(resume with: ")
    match = child.match
    assert isinstance(match, re.Match)
    sid = match.group(1)
    child.expect_exact("\r\n> ")
    child.sendline(f"!&bash {script}")
    child.expect_exact("tool said:")
    child.expect_exact("\r\n> ")
    return child, sid


def exit_of(child: pexpect.spawn[str]) -> int | None:
    """The exit status of a child whose output has ended (None if a signal ended it)."""
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


@pytest.mark.subprocess
def test_chat_quits_on_sigterm_closing_the_running_turn(tmp_path: pathlib.Path) -> None:
    child, sid = chat_with_a_job(tmp_path, write_job(tmp_path))
    try:
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        child.sendline("/hold")
        child.expect_exact("holding until you cancel...")
        child.kill(signal.SIGTERM)
        child.expect_exact(f"session {sid} kept; resume with: ")
        code = exit_of(child)
    finally:
        child.close(force=True)
    assert code == 128 + signal.SIGTERM
    assert_nothing_left(tmp_path, pids, pgid)
    session = read_session(tmp_path / "s.db", sid)
    assert prompts(session) == [f"!&bash {tmp_path / 'job.sh'}", "/hold"]
    assert turn_ends(session) == [{"kind": "completed"}, {"kind": "closed"}]


@pytest.mark.subprocess
def test_chat_quits_when_its_terminal_hangs_up(tmp_path: pathlib.Path) -> None:
    child, sid = chat_with_a_job(tmp_path, write_job(tmp_path))
    try:
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        child.sendline("/hold")
        child.expect_exact("holding until you cancel...")
        # Closing the terminal: the kernel sends SIGHUP to the chat, which leads the
        # terminal's session, and its reads and writes fail from now on.
        pty: Any = cast("Any", child).ptyproc  # pexpect's stubs do not know it
        pty.fileobj.close()
        wait_for("the chat to exit after the hang-up", lambda: not pty.isalive())
        code = pty.exitstatus
    finally:
        if child.isalive():
            child.kill(signal.SIGKILL)
    assert code == 128 + signal.SIGHUP
    assert_nothing_left(tmp_path, pids, pgid)
    session = read_session(tmp_path / "s.db", sid)
    assert turn_ends(session) == [{"kind": "completed"}, {"kind": "closed"}]


@pytest.mark.subprocess
def test_a_ctrl_c_during_the_chat_teardown_forces_the_exit(tmp_path: pathlib.Path) -> None:
    child, sid = chat_with_a_job(tmp_path, write_job(tmp_path, trapped=True))
    try:
        pids = job_pids(tmp_path)
        pgid = process_group(pids[0])
        child.kill(signal.SIGHUP)
        wait_for("the job's TERM", (tmp_path / "job.term").exists)
        child.sendintr()  # after a quit, Ctrl-C no longer interrupts: it forces the exit
        child.expect_exact("trio-agents chat: SIGINT during the teardown: exiting at once")
        code = exit_of(child)
    finally:
        child.close(force=True)
    assert code == 128 + signal.SIGINT
    assert_nothing_left(tmp_path, pids, pgid)
    assert committed_turn_ends(tmp_path / "s.db", sid) in ([], [{"kind": "completed"}])


# -- the policy and the deadline, in process ---------------------------------------------------


def test_the_first_quit_signal_quits_and_any_later_one_forces() -> None:
    chat = QuitPolicy(interrupt_signals=(signal.SIGINT,))
    assert [chat.on_signal(signal.SIGINT) for _ in range(2)] == ["interrupt", "interrupt"]
    assert chat.quitting is None
    assert chat.on_signal(signal.SIGHUP) == "quit"
    assert chat.quitting == signal.SIGHUP
    assert chat.on_signal(signal.SIGINT) == "force"
    acp = QuitPolicy()
    assert acp.on_signal(signal.SIGINT) == "quit"
    assert acp.on_signal(signal.SIGTERM) == "force"
    assert (exit_status(signal.SIGTERM), exit_status(signal.SIGHUP)) == (143, 129)
    assert teardown_limit(5.0, 3.0) == 16.0


class Forced(Exception):
    pass


async def test_a_teardown_past_the_limit_forces_the_exit_with_the_first_signal() -> None:
    forced: list[tuple[int, str]] = []

    def force(signum: int, why: str) -> Any:
        forced.append((signum, why))
        raise Forced

    signals_send, signals = trio.open_memory_channel[int](math.inf)
    send, events = trio.open_memory_channel[int | Quit](math.inf)
    watch = SignalWatch(QuitPolicy((signal.SIGINT,)), events, force)
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    start = trio.current_time()
    with pytest.RaisesGroup(Forced, flatten_subgroups=True):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run, signals, send, 16.0)
            signals_send.send_nowait(signal.SIGINT)
            signals_send.send_nowait(signal.SIGTERM)
            assert await events.receive() == signal.SIGINT
            assert await events.receive() == Quit(signal.SIGTERM)
            await trio.sleep(15.9)
            assert forced == []
            assert watch.status(0) == 143
            await trio.sleep_forever()
    assert forced == [(signal.SIGTERM, "the teardown took longer than 16s")]
    assert trio.current_time() - start == pytest.approx(16.0)


class Terminal:
    """Lines typed by the test, output kept (as tests/test_chat_cli.py's FakeTerminal)."""

    def __init__(self) -> None:
        self.output = ""
        self._send, self._lines = trio.open_memory_channel[str](math.inf)

    async def readline(self) -> str | None:
        try:
            return await self._lines.receive()
        except trio.EndOfChannel:
            return None

    def write(self, text: str) -> None:
        self.output += text

    def error(self, text: str) -> None:
        raise AssertionError(f"unexpected error line: {text}")

    def type(self, line: str) -> None:
        self._send.send_nowait(line)

    async def expect(self, text: str) -> None:
        await trio.testing.wait_all_tasks_blocked()
        assert text in self.output, f"{text!r} not in {self.output!r}"


class QuittingChat:
    """`run_chat` in the background, with a channel for its signals as the command sends
    them: a signal number for a Ctrl-C, a `Quit` for SIGTERM or SIGHUP."""

    def __init__(self, terminal: Terminal, store: MemoryStore) -> None:
        self.terminal = terminal
        self.signals, self._receive = trio.open_memory_channel[int | Quit](math.inf)
        self._config = ChatConfig(store, OfflineModel, new_session_id="s1", cwd="/")
        self.code: int | None = None

    async def run(self) -> None:
        self.code = await run_chat(self.terminal, self._config, self._receive)


async def test_a_quit_while_the_chat_starts_leaves_before_any_session_exists() -> None:
    store, term = MemoryStore(), Terminal()
    chat = QuittingChat(term, store)
    chat.signals.send_nowait(Quit(signal.SIGTERM))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
    assert chat.code == 143
    assert not await store.exists("s1")


async def test_a_quit_at_the_prompt_leaves_and_keeps_the_session() -> None:
    store, term = MemoryStore(), Terminal()
    chat = QuittingChat(term, store)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("hi")
        await term.expect("echo: hi\n> ")
        chat.signals.send_nowait(Quit(signal.SIGHUP))
    assert chat.code == 129
    assert term.output.endswith("> \nsession s1 kept; resume with: trio-agents chat --session s1\n")
    ends = [
        dict(r.data["reason"]) for r in (await store.load("s1")).records if r.type == "turn/end"
    ]
    assert ends == [{"kind": "completed"}]


async def test_a_quit_in_a_turn_closes_it_where_a_ctrl_c_would_cancel_it() -> None:
    store, term = MemoryStore(), Terminal()
    chat = QuittingChat(term, store)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat.run)
        term.type("/hold")
        await term.expect("holding until you cancel...")
        chat.signals.send_nowait(signal.SIGINT)
        await term.expect("[cancelled]\n> ")
        term.type("/hold")
        await term.expect("holding until you cancel...")
        chat.signals.send_nowait(Quit(signal.SIGTERM))
        chat.signals.send_nowait(Quit(signal.SIGTERM))  # a second changes nothing here
    assert chat.code == 143
    assert "session s1 kept" in term.output
    ends = [
        dict(r.data["reason"]) for r in (await store.load("s1")).records if r.type == "turn/end"
    ]
    assert ends == [{"kind": "aborted", "reason": "Ctrl-C", "cause": "user"}, {"kind": "closed"}]


@pytest.mark.subprocess
async def test_kill_now_kills_foreground_commands_and_jobs_without_waiting(
    tmp_path: pathlib.Path,
) -> None:
    shell = ShellExecutor(cwd=str(tmp_path))
    async with shell.running(), trio.open_nursery() as nursery:
        job = await shell.start(shell.resolve(ShellRequest("sleep 300 & wait")))
        results: list[RunResult] = []

        async def foreground() -> None:
            request = ShellRequest("echo $$ > fg.pid; sleep 300 & wait")
            results.append(await shell.run(shell.resolve(request)))

        nursery.start_soon(foreground)
        fg_file = tmp_path / "fg.pid"
        while not (fg_file.exists() and fg_file.read_text().strip()):  # noqa: ASYNC110
            await trio.sleep(0.01)
        groups = [
            shell.pgid(job),
            process_group(host_pid(int(fg_file.read_text()), marker="fg.pid")),
        ]
        assert all(live_group_members(pgid) for pgid in groups)
        # The command runs (it wrote its pid) a moment before `run` has it in hand: call
        # again until both groups are gone. Without the foreground tracked, its group lives.
        killed = 0
        with trio.fail_after(TIMEOUT):
            while any(live_group_members(pgid) for pgid in groups):
                killed += shell.kill_now()
                await trio.sleep(0.01)
        assert killed >= 2
        assert (await shell.wait(job)).signal == "SIGKILL"
    assert [r.signal for r in results] == ["SIGKILL"]
    assert [live_group_members(pgid) for pgid in groups] == [[], []]
    assert shell.kill_now() == 0  # nothing is running any more
