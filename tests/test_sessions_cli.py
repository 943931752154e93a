"""`trio-agents sessions list|show` over a SQLite store file.

Sync tests: each builds its store file with `trio.run` on the real clock (SQLite works in
worker threads) and then runs the command, which calls `trio.run` itself.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agents import open_runtime
from trio_agents._cli._main import main
from trio_agents.testing import EchoTool, ScriptedModel, reply, tool_step


def build_store(path: Path) -> list[dict[str, object]]:
    """A store with session 'done' (a tool turn then a text turn, both completed) and
    session 'open-turn' (its turn closed by the runtime's close); returns the records of
    'done' as JSON."""

    async def build() -> list[dict[str, object]]:
        with trio.fail_after(60):
            async with open_runtime(path) as rt:
                done = await rt.agents.create(
                    model=ScriptedModel([tool_step(("echo", {"text": "é"})), reply("ok")]),
                    tools=[EchoTool()],
                    session_id="done",
                )
                done.agent.send("hi")
                await done.agent.wait_idle()
                done.agent.send("again")
                await done.agent.wait_idle()
                records = [record.to_json() for record in done.agent.session.records]
                await done.aclose()
                closing = await rt.agents.create(
                    model=ScriptedModel([reply("x", hold=True)]), session_id="open-turn"
                )
                closing.agent.send("go")
                await trio.testing.wait_all_tasks_blocked()
            return records

    return trio.run(build)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[dict[str, object]]]:
    path = tmp_path / "sessions.sqlite3"
    return path, build_store(path)


def test_list_shows_each_session_with_its_counts(
    store: tuple[Path, list[dict[str, object]]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, done_records = store
    assert main(["sessions", "list", "--store", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.splitlines()
    assert lines[0].split() == [
        "SESSION", "CREATED", "(UTC)", "RECORDS", "TURNS", "LAST", "END", "TITLE"
    ]  # fmt: skip
    rows = {line.split()[0]: line.split(maxsplit=5) for line in lines[1:]}
    assert list(rows) == ["done", "open-turn"]  # oldest first
    sid, created, records, turns, last_end, title = rows["done"]
    assert (sid, records, turns, last_end) == ("done", str(len(done_records)), "2", "completed")
    assert title == "hi"  # its first prompt
    assert created.endswith("+00:00")  # ISO, UTC
    assert rows["open-turn"][3:] == ["1", "closed", "go"]


def test_show_prints_the_records_in_order(
    store: tuple[Path, list[dict[str, object]]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, done_records = store
    assert main(["sessions", "show", "done", "--store", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(done_records)
    for seq, (line, record) in enumerate(zip(lines, done_records, strict=True)):
        compact = json.dumps(record["data"], separators=(",", ":"), ensure_ascii=False)
        assert line == f"{seq}  {record['type']}  {compact}"
    assert lines[0] == '0  turn/start  {"turn":1}'
    assert any('"content":"é"' in line for line in lines)


def test_show_json_prints_one_object_per_record(
    store: tuple[Path, list[dict[str, object]]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, done_records = store
    assert main(["sessions", "show", "done", "--store", str(path), "--json"]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert objects == [{"seq": seq, **record} for seq, record in enumerate(done_records)]


def test_show_does_not_repair_a_session_it_only_looks_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A crash left turn 1 open; resuming would close it, looking must not.
    path = tmp_path / "crashed.sqlite3"
    build_store(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO sessions VALUES ('crashed', '{\"created_at\": 1}', 1)")
    conn.execute("INSERT INTO records VALUES ('crashed', 0, 'turn/start', '{\"turn\": 1}')")
    conn.commit()
    conn.close()
    assert main(["sessions", "show", "crashed", "--store", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == ['0  turn/start  {"turn":1}']
    conn = sqlite3.connect(path)
    count = conn.execute("SELECT COUNT(*) FROM records WHERE session_id='crashed'").fetchone()
    conn.close()
    assert count == (1,)


def test_show_of_an_unknown_session_names_it_and_the_store(
    store: tuple[Path, list[dict[str, object]]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = store
    assert main(["sessions", "show", "nope", "--store", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no session 'nope'" in captured.err
    assert str(path) in captured.err


@pytest.mark.parametrize("action", [["list"], ["show", "any"]])
def test_a_missing_store_file_is_an_error_and_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    path = tmp_path / "typo" / "sessions.sqlite3"
    assert main(["sessions", *action, "--store", str(path)]) == 1
    captured = capsys.readouterr()
    assert f"no store at {path}" in captured.err
    assert captured.out == ""
    assert not path.parent.exists()


def test_the_default_store_path_is_used_without_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    default = tmp_path / "trio-agents" / "sessions.sqlite3"
    assert main(["sessions", "list"]) == 1
    assert f"no store at {default}" in capsys.readouterr().err
    build_store(default)
    assert main(["sessions", "list"]) == 0
    assert "done" in capsys.readouterr().out


def test_an_empty_store_lists_nothing_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.sqlite3"

    async def create_schema() -> None:
        async with open_runtime(path):
            pass

    trio.run(create_schema)
    assert main(["sessions", "list", "--store", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"no sessions in {path}" in captured.err


def test_a_file_that_is_not_a_store_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, just some text that is long enough " * 20)
    assert main(["sessions", "list", "--store", str(path)]) == 1
    assert f"cannot read {path}" in capsys.readouterr().err


# -- damage, odd strings and closed pipes (issue 16) ---------------------------------------


def build_sessions(path: Path, ids: list[str], prompt: str = "hi") -> None:
    async def build() -> None:
        with trio.fail_after(60):
            async with open_runtime(path) as rt:
                for sid in ids:
                    handle = await rt.agents.create(
                        model=ScriptedModel([reply("ok")]), session_id=sid
                    )
                    handle.agent.send(prompt)
                    await handle.agent.wait_idle()
                    await handle.aclose()

    trio.run(build)


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", *args],
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_list_shows_every_readable_session_and_marks_the_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite3"
    ids = [f"s{index:02}" for index in range(50)]
    build_sessions(path, ids)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET data = '{\"turn\": ' WHERE session_id = 's17' AND seq = 0")
    conn.commit()
    conn.close()
    assert main(["sessions", "list", "--store", str(path)]) == 1
    captured = capsys.readouterr()
    rows = {line.split()[0]: line.split() for line in captured.out.splitlines()[1:]}
    assert list(rows) == ids
    assert rows["s17"][4] == "damaged"  # LAST END; a damaged session has no title
    assert all(row[4] == "completed" for sid, row in rows.items() if sid != "s17")
    (line,) = captured.err.splitlines()
    assert "session 's17' is damaged: record 0 cannot be read" in line
    # `show` of the damaged session says so in one line; the others still show.
    assert main(["sessions", "show", "s17", "--store", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert "record 0" in captured.err
    assert main(["sessions", "show", "s18", "--store", str(path)]) == 0


@pytest.mark.subprocess
@pytest.mark.parametrize("as_json", [False, True])
def test_show_prints_a_lone_surrogate_as_its_escape(tmp_path: Path, as_json: bool) -> None:
    # JSON (and so ACP) accepts "\ud800"; it has no UTF-8 encoding.
    path = tmp_path / "s.sqlite3"
    text = "lone \ud800 surrogate"
    build_sessions(path, ["odd"], prompt=text)
    result = cli("sessions", "show", "odd", "--store", str(path), *(["--json"] if as_json else []))
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    lines = result.stdout.decode("utf-8").splitlines()
    assert "lone \\ud800 surrogate" in lines[1]
    if as_json:
        assert json.loads(lines[1])["data"]["content"] == text  # the escape reads back


@pytest.mark.subprocess
def test_show_into_a_pipe_closed_early_exits_quietly(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    build_sessions(path, ["big"], prompt="x" * 400_000)  # more than a pipe holds
    shown = subprocess.Popen(
        [sys.executable, "-m", "trio_agents._cli", "sessions", "show", "big", "--store", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert shown.stdout is not None
    assert shown.stderr is not None
    assert shown.stdout.readline() == b'0  turn/start  {"turn":1}\n'
    shown.stdout.close()  # what `| head -1` does once it has its line
    assert shown.wait(timeout=60) == 141  # 128 + SIGPIPE, as a shell reports it
    assert shown.stderr.read() == b""
    shown.stderr.close()
