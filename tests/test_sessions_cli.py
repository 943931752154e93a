"""`trio-agents sessions list|show` over a SQLite store file.

Sync tests: each builds its store file with `trio.run` on the real clock (SQLite works in
worker threads) and then runs the command, which calls `trio.run` itself.
"""

from __future__ import annotations

import json
import sqlite3
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
    assert lines[0].split() == ["SESSION", "CREATED", "(UTC)", "RECORDS", "TURNS", "LAST", "END"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert list(rows) == ["done", "open-turn"]  # oldest first
    sid, created, records, turns, last_end = rows["done"]
    assert (sid, records, turns, last_end) == ("done", str(len(done_records)), "2", "completed")
    assert created.endswith("+00:00")  # ISO, UTC
    assert rows["open-turn"][3:] == ["1", "closed"]


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
