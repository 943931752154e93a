"""The SQLite store under pressure and damage: a write lock another process holds, a full
disk, a read-only file, damaged or wrong-shaped records, lock files, and store paths the
CLI cannot use.

Real processes hold the lock (a second sqlite3 connection in a child, inside BEGIN
IMMEDIATE) and real mounts fill up or turn read-only (a small tmpfs; the tests run as root
in CI and skip only where mounting is refused). Every wait is on a real condition with a
deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import pytest
import trio

from trio_agents import (
    AgentOptions,
    CorruptSessionError,
    FlushTimeoutError,
    NotAStoreError,
    PersistenceError,
    SessionLiveElsewhereError,
    SqliteStore,
    StoreBrokenError,
    StoreFileError,
    StoreLockedError,
    open_runtime,
)
from trio_agents._store._session import Session
from trio_agents.testing import ScriptedModel, reply

from .support.acp_peer import acp_peer

LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
conn.close()
"""


async def read_line(stream: trio.abc.ReceiveStream) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some()
        if not chunk:
            raise AssertionError(f"the lock holder ended before a line: {line!r}")
        line += chunk
    return line


@asynccontextmanager
async def lock_held(path: pathlib.Path) -> AsyncGenerator[Callable[[], Any], None]:
    """A child process holds the write lock of the store at `path` until the returned
    release is awaited (or the block ends)."""
    holder = await trio.lowlevel.open_process(
        [sys.executable, "-c", LOCK_HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdin is not None
    assert holder.stdout is not None
    stdin = holder.stdin

    async def release() -> None:
        if holder.returncode is None:
            await stdin.send_all(b"\n")
            assert await holder.wait() == 0

    try:
        assert await read_line(holder.stdout) == b"locked\n"
        yield release
        await release()
    finally:
        holder.kill()
        await holder.wait()


async def wait_until(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Poll a real condition, for at most `seconds`."""
    with trio.move_on_after(seconds):
        while not condition():  # noqa: ASYNC110 - a condition of another process or thread
            await trio.sleep(0.01)
        return
    raise AssertionError(f"still waiting after {seconds}s for {what}")


def stored(path: pathlib.Path, session_id: str) -> list[dict[str, Any]]:
    """The records of a session as the file holds them, read by a connection of our own."""
    import json

    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, data FROM records WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    finally:
        conn.close()
    return [{"type": kind, "data": json.loads(data)} for kind, data in rows]


def in_memory(session: Session) -> list[dict[str, Any]]:
    return [record.to_json() for record in session.records]


# -- a busy write lock ---------------------------------------------------------------------


@pytest.mark.subprocess
async def test_a_lock_held_past_the_busy_timeout_loses_no_record(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path)
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(model=ScriptedModel([reply("one"), reply("two")]))
        session = handle.agent.session
        handle.agent.send("first")
        await handle.agent.wait_idle()
        await store.flush(session)
        before = in_memory(session)
        async with lock_held(path) as release:
            handle.agent.send("second")
            flushed = trio.Event()
            idle = trio.Event()

            async def flush() -> None:
                await store.flush(session)
                flushed.set()

            async def settle() -> None:
                await handle.agent.wait_idle()  # L7: it waits for the turn's commit too
                idle.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(settle)
                turns_ended = len([r for r in before if r["type"] == "turn/end"])
                await wait_until(
                    lambda: (
                        len([r for r in in_memory(session) if r["type"] == "turn/end"])
                        > turns_ended
                    ),
                    "the second turn to end in memory",
                )
                nursery.start_soon(flush)
                # Five refused attempts: the records wait, nothing is claimed stored. (How
                # long each waits is the MockClock test's to check, not this real-clock one.)
                await wait_until(
                    lambda: store._busy_retries >= 5,  # pyright: ignore[reportPrivateUsage]
                    "the writer to retry the locked database five times",
                )
                assert not flushed.is_set()  # nothing is reported stored that is not
                assert not idle.is_set()
                assert stored(path, session.id) == before
                await release()
            assert flushed.is_set()
            assert idle.is_set()
        # Every record of the second turn, none dropped while the writer retried.
        assert len(in_memory(session)) > len(before)
        assert stored(path, session.id) == in_memory(session)
        await handle.aclose()
    assert stored(path, session.id) == in_memory(session)


@pytest.mark.subprocess
async def test_a_lock_held_past_close_grace_is_one_clear_error_and_nothing_is_stored(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path, close_grace=0.5)
    options = AgentOptions(close_grace=0.3)
    with pytest.RaisesGroup(
        pytest.RaisesExc(FlushTimeoutError),
        pytest.RaisesExc(StoreLockedError, match=r"records of 1 session\(s\) \('s'\)"),
        flatten_subgroups=True,
    ) as info:
        async with open_runtime(store) as rt, lock_held(path):
            handle = await rt.agents.create(
                model=ScriptedModel([reply("one")]), session_id="s", options=options
            )
            handle.agent.send("first")
            # Not wait_idle: it waits for the turn's commit (L7), which the lock holds up.
            await wait_until(
                lambda: any(r.type == "turn/end" for r in handle.agent.session.records),
                "the turn to end in memory",
            )
            with trio.move_on_after(0.3) as waited:
                await store.flush(handle.agent.session)
            assert waited.cancelled_caught  # flush never claims what is not committed
            # The runtime closes with the lock still held: the agent's flush times out,
            # then the store gives up after its close_grace (and the holder is killed).
            await rt.aclose()
    (locked,) = [e for e in info.value.exceptions if isinstance(e, StoreLockedError)]
    message = str(locked)
    assert str(path) in message
    assert "close_grace=0.5s" in message
    assert "database is locked" in message
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM records").fetchone() == (0,)
    finally:
        conn.close()


class RetryCountingStore(SqliteStore):
    """Notes the wait its thread chose after each write attempt the lock refused (the
    backoff), so the schedule is checked as chosen, not as timed on a shared machine."""

    def __init__(self, path: pathlib.Path, **options: Any) -> None:
        super().__init__(path, **options)
        self.delays: list[float] = []
        self.commits = 0

    def _write_batch(self, headers: Any, batch: Any) -> None:
        super()._write_batch(headers, batch)
        self.commits += 1

    def _commit_step(self) -> float | None:
        delay = super()._commit_step()
        if delay is not None:
            self.delays.append(delay)
        return delay


def hold_lock(path: pathlib.Path) -> sqlite3.Connection:
    """A connection of our own holding the write lock (as another process would)."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


@pytest.mark.realtime
async def test_the_writer_backs_off_while_locked_and_commits_once_released(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    store = RetryCountingStore(path)
    session = Session("s")
    async with store.running():
        holder = hold_lock(path)
        store.enter(session)
        session.append("turn/start", {"turn": 1})
        session.append("user/message", {"id": "m1", "content": "hi"})
        await wait_until(lambda: len(store.delays) >= 8, "eight refused attempts")
        with trio.move_on_after(0.05):
            await store.flush(session)
            raise AssertionError("flush returned while the lock was held")
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        commits = store.commits
        holder.rollback()
        holder.close()
        await store.flush(session)
        assert store.commits == commits + 1  # one batch, with the record appended meanwhile
    # 10 ms doubled up to the 200 ms ceiling.
    assert store.delays[:7] == [0.01, 0.02, 0.04, 0.08, 0.16, 0.2, 0.2]
    assert all(delay == 0.2 for delay in store.delays[5:])
    assert stored(path, "s") == in_memory(session)


@pytest.mark.realtime
async def test_closing_gives_up_on_a_held_lock_after_close_grace(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = RetryCountingStore(path, close_grace=0.3)
    session = Session("s")
    closing: list[float] = []

    holders: list[sqlite3.Connection] = []

    async def run() -> None:
        async with store.running():
            holders.append(hold_lock(path))
            store.enter(session)
            session.append("turn/start", {"turn": 1})
            closing.append(trio.current_time())

    with pytest.raises(StoreLockedError, match=r"1 records of 1 session\(s\) \('s'\)"):
        await run()
    assert trio.current_time() - closing[0] >= 0.3  # it waited its grace out
    holders[0].rollback()
    holders[0].close()
    assert store.delays  # it did try
    assert stored(path, "s") == []


@pytest.mark.subprocess
async def test_a_resume_waits_out_a_held_lock_to_repair_the_open_turn(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    await build(path, [])
    conn = sqlite3.connect(path)
    try:  # a crash left turn 1 open
        conn.execute("INSERT INTO sessions VALUES ('crashed', '{\"created_at\": 1}', 1)")
        conn.execute("INSERT INTO records VALUES ('crashed', 0, 'turn/start', '{\"turn\": 1}')")
        conn.commit()
    finally:
        conn.close()
    store = SqliteStore(path)
    async with open_runtime(store) as rt, lock_held(path) as release:
        resumed: list[Session] = []

        async def resume() -> None:
            handle = await rt.agents.resume("crashed", model=ScriptedModel())
            resumed.append(handle.agent.session)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(resume)
            await wait_until(
                lambda: store._busy_retries >= 3,  # pyright: ignore[reportPrivateUsage]
                "the repair to find the lock held three times",
            )
            assert resumed == []
            await release()
        assert [r.type for r in resumed[0].records] == ["turn/start", "turn/end"]
        assert stored(path, "crashed") == in_memory(resumed[0])


@pytest.mark.realtime
async def test_opening_while_another_process_holds_the_lock_names_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite3"
    await build(path, [])
    monkeypatch.setattr("trio_agents._store._sqlite_open.BUSY_TIMEOUT", 0.2)
    holder = hold_lock(path)
    try:
        with pytest.raises(StoreLockedError, match="another process holds its write lock") as info:
            async with SqliteStore(path).running():
                pass
    finally:
        holder.rollback()
        holder.close()
    assert f"cannot open {path}" in str(info.value)


# -- full disk, read-only file -------------------------------------------------------------


@pytest.fixture
def small_mount(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A 512 KiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(directory: pathlib.Path) -> None:
    """Write to a file on `directory`'s mount until the mount is full."""

    def write_forever(filler: BinaryIO) -> None:
        while True:
            filler.write(b"\0" * 4096)

    # Unbuffered, so closing it has nothing left to write.
    with (
        open(directory / "filler", "wb", buffering=0) as filler,
        pytest.raises(OSError, match="No space left on device"),
    ):
        write_forever(filler)


@pytest.mark.subprocess
async def test_a_full_disk_is_one_clear_error_naming_the_file(small_mount: pathlib.Path) -> None:
    path = small_mount / "s.sqlite3"
    store = SqliteStore(path)
    before: list[dict[str, Any]] = []

    async def converse() -> None:
        async with open_runtime(store) as rt:
            handle = await rt.agents.create(
                model=ScriptedModel([reply("one"), reply("two")]), session_id="s"
            )
            session = handle.agent.session
            handle.agent.send("first")
            await handle.agent.wait_idle()
            await store.flush(session)
            before.extend(in_memory(session))
            fill(small_mount)
            handle.agent.send("x" * 100_000)
            # The agent commits before it settles IDLE (L7): that commit fails, and its
            # loop stops with PersistenceError instead of going idle over lost records.
            await handle.agent.wait_idle()

    with pytest.raises(ExceptionGroup) as info:
        await converse()
    leaves: list[BaseException] = []
    stack: list[BaseException] = [info.value]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        else:
            leaves.append(exc)
    # The agent's commit and the store's close each say it, and nothing else fails.
    assert sorted(type(leaf).__name__ for leaf in leaves) == ["PersistenceError", "StoreFileError"]
    causes = [leaf.__cause__ if isinstance(leaf, PersistenceError) else leaf for leaf in leaves]
    assert isinstance(causes[0], StoreBrokenError | StoreFileError)
    assert all(str(path) in str(c) and "disk is full" in str(c) for c in causes), causes
    (small_mount / "filler").unlink()
    assert stored(path, "s") == before  # what was stored is intact, nothing claimed


@pytest.mark.realtime
async def test_opening_on_a_full_disk_names_the_file(small_mount: pathlib.Path) -> None:
    fill(small_mount)
    with pytest.raises(StoreFileError, match="disk is full") as info:
        async with SqliteStore(small_mount / "new.sqlite3").running():
            pass
    assert info.value.path == str(small_mount / "new.sqlite3")


@pytest.mark.realtime
async def test_a_read_only_file_is_reported_as_read_only(small_mount: pathlib.Path) -> None:
    path = small_mount / "s.sqlite3"
    async with open_runtime(path) as rt:
        handle = await rt.agents.create(model=ScriptedModel([reply("one")]), session_id="s")
        handle.agent.send("hi")
        await handle.agent.wait_idle()
    await trio.run_process(["mount", "-o", "remount,ro", str(small_mount)])
    with pytest.raises(StoreFileError, match="read-only file system") as info:
        async with SqliteStore(path).running():
            pass
    assert not isinstance(info.value, NotAStoreError)
    assert "not an SQLite database" not in str(info.value)
    assert str(path) in str(info.value)
    # Reading it still works: nothing can change it, so it is read as it is.
    reader = SqliteStore(path, readonly=True)
    async with reader.running():
        assert [info.id for info in await reader.list_sessions()] == ["s"]


# -- damaged records -----------------------------------------------------------------------


async def build(path: pathlib.Path, ids: list[str]) -> None:
    async with open_runtime(path) as rt:
        for sid in ids:
            handle = await rt.agents.create(model=ScriptedModel([reply("ok")]), session_id=sid)
            handle.agent.send("hi")
            await handle.agent.wait_idle()
            await handle.aclose()


def damage(path: pathlib.Path, session_id: str, seq: int, data: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "UPDATE records SET data = ? WHERE session_id = ? AND seq = ?", (data, session_id, seq)
        )
        conn.commit()
    finally:
        conn.close()


def record_type(path: pathlib.Path, session_id: str, seq: int) -> str:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT type FROM records WHERE session_id = ? AND seq = ?", (session_id, seq)
        ).fetchone()
    finally:
        conn.close()
    return str(row[0])


@pytest.mark.realtime
@pytest.mark.parametrize(
    ("seq", "data", "problem"),
    [
        (0, '{"turn": 1', "not valid JSON"),  # turn/start, cut short
        (1, "[1, 2]", "its data is list, not an object"),  # user/message
        (0, '{"turn": "one"}', "its 'turn' is not a whole number"),
        (1, '{"id": "m1"}', "it has no 'content'"),
        (-1, '{"turn": 1, "reason": {}}', "its 'reason' has no 'kind' text"),  # turn/end
    ],
)
async def test_a_damaged_record_raises_corrupt_session_error_naming_it(
    tmp_path: pathlib.Path, seq: int, data: str, problem: str
) -> None:
    path = tmp_path / "s.sqlite3"
    await build(path, ["s"])
    if seq < 0:
        seq += len(stored(path, "s"))
    kind = record_type(path, "s", seq)
    damage(path, "s", seq, data)
    async with open_runtime(path) as rt:
        for attempt in (
            lambda: rt.sessions.load("s"),
            lambda: rt.agents.resume("s", model=ScriptedModel()),
        ):
            with pytest.raises(CorruptSessionError) as info:
                await attempt()
            assert (info.value.session_id, info.value.seq) == ("s", seq)
            message = str(info.value)
            assert f"session 's' is damaged: record {seq} cannot be read" in message
            assert repr(kind) in message
            assert problem in message
        assert rt.agents.list() == []
        (listed,) = await rt.sessions.list_sessions()
        assert listed.damage is not None
        assert f"record {seq}" in listed.damage


@pytest.mark.realtime
async def test_a_damaged_header_or_bytes_that_are_not_text_are_damage_too(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    await build(path, ["header", "bytes", "fine"])
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE sessions SET header = '{\"created_at\": ' WHERE id = 'header'")
        conn.execute(
            "UPDATE records SET data = CAST(x'ff7b7d' AS TEXT) "
            "WHERE session_id = 'bytes' AND seq = 1"
        )
        conn.commit()
    finally:
        conn.close()
    async with open_runtime(path) as rt:
        with pytest.raises(CorruptSessionError, match="its header cannot be read") as info:
            await rt.sessions.load("header")
        assert info.value.seq is None
        with pytest.raises(CorruptSessionError, match=r"record 1 .*not UTF-8 text"):
            await rt.sessions.load("bytes")
        listed = {info.id: info.damage for info in await rt.sessions.list_sessions()}
        assert listed.keys() == {"header", "bytes", "fine"}
        assert listed["fine"] is None
        assert listed["header"] is not None
        assert listed["bytes"] is not None


# -- lock files ----------------------------------------------------------------------------


@pytest.mark.realtime
async def test_lock_files_are_removed_when_their_session_closes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    live = pathlib.Path(f"{path}.live")
    async with open_runtime(path) as rt:
        ids: list[str] = []
        for index in range(20):
            handle = await rt.agents.create(model=ScriptedModel([reply("ok")]))
            ids.append(handle.agent.id)
            handle.agent.send("hi")
            await handle.agent.wait_idle()
            assert len(os.listdir(live)) == 1  # this session's claim
            await handle.aclose()
            assert os.listdir(live) == [], index
        # Resuming claims the file again, and closing removes it again.
        handle = await rt.agents.resume(ids[-1], model=ScriptedModel())
        await handle.aclose()
        assert os.listdir(live) == []


@pytest.mark.realtime
async def test_a_claim_is_exclusive_across_the_removal_of_its_file(
    tmp_path: pathlib.Path,
) -> None:
    # Two stores on one file stand for two processes: flock locks are per open file.
    path = tmp_path / "s.sqlite3"
    first, second = SqliteStore(path), SqliteStore(path)
    async with first.running(), second.running():
        first._claim("x")  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(SessionLiveElsewhereError):
            second._claim("x")  # pyright: ignore[reportPrivateUsage]
        first._release("x")  # pyright: ignore[reportPrivateUsage]
        second._claim("x")  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(SessionLiveElsewhereError):
            first._claim("x")  # pyright: ignore[reportPrivateUsage]
        second._release("x")  # pyright: ignore[reportPrivateUsage]
        assert os.listdir(f"{path}.live") == []


# -- store paths the CLI cannot use ---------------------------------------------------------


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "command",
    [["acp"], ["chat", "--model", "offline"], ["sessions", "list"], ["sessions", "show", "x"]],
)
def test_a_store_path_through_a_file_is_one_line_and_exit_2(command: list[str]) -> None:
    result = cli(*command, "--store", "/dev/null/x.db")
    assert result.returncode == 2, result
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "/dev/null/x.db" in line
    assert "/dev/null is not a directory" in line
    assert line.startswith(f"trio-agents {command[0]}: ")


@pytest.mark.subprocess
def test_acp_on_a_read_only_store_is_one_line_and_exit_2(small_mount: pathlib.Path) -> None:
    path = small_mount / "s.sqlite3"

    async def create() -> None:
        async with SqliteStore(path).running():
            pass

    trio.run(create)
    subprocess.run(["mount", "-o", "remount,ro", str(small_mount)], check=True)
    result = cli("acp", "--store", str(path))
    assert result.returncode == 2, result
    (line,) = result.stderr.splitlines()
    assert str(path) in line
    assert "read-only file system" in line


@pytest.mark.realtime
async def test_acp_load_of_a_damaged_session_answers_an_error_naming_it(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    async with acp_peer(store=SqliteStore(path)) as peer:
        created = await peer.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = str(created["sessionId"])
        prompt = [{"type": "text", "text": "hello"}]
        await peer.result("session/prompt", {"sessionId": sid, "prompt": prompt})
    damage(path, sid, 1, '{"id": 7, "content": "hello"}')
    async with acp_peer(store=SqliteStore(path)) as peer:
        answer = await peer.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        assert answer["error"]["code"] == -32602  # invalid params, not an internal error
        message = answer["error"]["message"]
        assert f"session {sid!r} is damaged: record 1" in message
        assert "its 'id' is not text" in message
        assert peer.runtime.agents.list() == []


@pytest.mark.parametrize("grace", [0, -1.0, float("inf"), float("nan")])
def test_close_grace_must_be_a_positive_finite_number(grace: float) -> None:
    with pytest.raises(ValueError, match="close_grace must be a positive finite number"):
        SqliteStore("unused.sqlite3", close_grace=grace)


@pytest.mark.subprocess
def test_acp_whose_disk_fills_while_serving_says_so_in_words(small_mount: pathlib.Path) -> None:
    path = small_mount / "s.sqlite3"
    server = subprocess.Popen(
        [sys.executable, "-m", "trio_agents._cli", "acp", "--store", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    assert server.stderr is not None

    to_server, from_server = server.stdin, server.stdout

    def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        to_server.write(json.dumps(frame).encode() + b"\n")
        to_server.flush()
        while True:
            answer: dict[str, Any] = json.loads(from_server.readline())
            if answer.get("id") == request_id:
                return answer

    try:
        request(1, "initialize", {"protocolVersion": 1})
        sid = request(2, "session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]
        prompt = [{"type": "text", "text": "hi"}]
        request(3, "session/prompt", {"sessionId": sid, "prompt": prompt})
        fill(small_mount)
        big = [{"type": "text", "text": "x" * 100_000}]
        request(4, "session/prompt", {"sessionId": sid, "prompt": big})
        server.stdin.close()
        assert server.wait(timeout=60) == 1
        errors = server.stderr.read().decode()
    finally:
        server.kill()
        server.wait()
        # Every pipe, also when a request failed before stdin was closed: a pipe left open
        # is collected, and warned about, inside whichever test runs next.
        with contextlib.suppress(OSError):  # a write the dead server never read
            server.stdin.close()
        server.stdout.close()
        server.stderr.close()
    assert "Traceback" not in errors, errors
    startup, *lines = errors.splitlines()
    assert startup.startswith("trio-agents acp "), startup  # what it serves (D317)
    assert lines[-1].startswith("trio-agents acp: the store failed: cannot write ")
    assert all(str(path) in line and "the disk is full" in line for line in lines), lines


def test_the_acp_cli_names_the_stores_cause_behind_an_agents_persistence_error() -> None:
    # An agent whose commit failed raises PersistenceError ("the cause says why"); the one
    # line the CLI prints is the cause that names the file, whichever error came out first.
    from trio_agents._cli._acp import _first  # pyright: ignore[reportPrivateUsage]  # the CLI's private choice

    disk = StoreFileError("cannot write /x/s.sqlite3: the disk is full", path="/x/s.sqlite3")
    broken = StoreBrokenError(f"the store cannot write any more: {disk}")
    broken.__cause__ = disk
    persistence = PersistenceError("session 's': the finished turns could not be committed")
    persistence.__cause__ = broken
    group = BaseExceptionGroup("closing", [BaseExceptionGroup("agent", [persistence])])
    assert _first(group) is disk


def test_chat_whose_disk_fills_says_so_in_one_line_and_exits_1(small_mount: pathlib.Path) -> None:
    # The agent's own commit before IDLE fails first (rule L7), then the chat's flush: the
    # runtime's PersistenceError as it closes is what the chat has already said (D372).
    path = small_mount / "s.sqlite3"
    command = ["chat", "--model", "offline", "--store", str(path)]
    chat = subprocess.Popen(
        [sys.executable, "-m", "trio_agents._cli", *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert chat.stdin is not None
    try:
        chat.stdin.write(b"hi\n")
        chat.stdin.flush()
        assert chat.stdout is not None
        while True:
            line = chat.stdout.readline()
            assert line, "the chat exited before it echoed"
            if b"echo: hi" in line:
                break
        fill(small_mount)
        _, err = chat.communicate(b"x" * 100_000 + b"\n", timeout=60)
    finally:
        chat.kill()
        chat.wait()
    errors = err.decode()
    assert chat.returncode == 1, (chat.returncode, errors)
    assert "Traceback" not in errors, errors
    assert errors.splitlines()[-1].startswith("trio-agents chat: the turn was not stored: ")
    assert "the disk is full" in errors, errors


@pytest.mark.parametrize(
    ("denied", "reading", "cause", "hint"),
    [
        # A mode-000 file was said to be "read-only", with the hint to open it read-only.
        ({"file": os.R_OK | os.W_OK}, True, "this user may not read the file", "chmod u+r"),
        ({"file": os.R_OK | os.W_OK}, False, "this user may not read the file", "chmod u+r"),
        ({"file": os.W_OK}, False, "the file is read-only", "make it writable (chmod u+w)"),
        # Reading a WAL store needs its -shm file beside it: a read-only file is not why.
        ({"file": os.W_OK, "dir": os.W_OK}, True, "SQLite needs its -shm file there", "make it"),
        ({"dir": os.W_OK}, False, "is not writable", "copy the store to one that is"),
    ],
)
def test_a_store_this_user_may_not_use_is_named_with_the_real_cause_and_the_fix(
    denied: dict[str, int],
    reading: bool,
    cause: str,
    hint: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Run as root, the tests cannot be refused; the kernel's answer is stood in for.
    from trio_agents._store._errors import file_error

    path = tmp_path / "s.sqlite3"
    path.write_bytes(b"")
    real_access = os.access

    def access(where: Any, mode: int) -> bool:
        which = "file" if pathlib.Path(where) == path else "dir"
        return not mode & denied.get(which, 0) and real_access(where, mode)

    monkeypatch.setattr("trio_agents._store._errors.os.access", access)
    exc = sqlite3.OperationalError("unable to open database file")
    exc.sqlite_errorcode = sqlite3.SQLITE_CANTOPEN
    message = str(file_error(path, exc, "open", reading=reading))
    assert message.startswith(f"cannot open {path}: "), message
    assert cause in message, message
    assert hint in message, message
    assert "open it read-only" not in message
