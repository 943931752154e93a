"""The command line on a PostgreSQL store (rule L16): `trio-agents acp --store
postgresql://...` in two real server processes on one database, `sessions list` on it, a
chat resumed by a second chat in a pseudo-terminal, `sessions` on a database without the
tables (listed as empty, nothing created: design D363), and a database that cannot be
reached (one line, exit 2, no password).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
import trio

from trio_agents import PostgresStore, open_runtime
from trio_agents._cli._main import main
from trio_agents.testing import ScriptedModel, reply

from .support.acp_process import AcpProcess
from .support.chat import TIMEOUT
from .support.postgres import user_tables

pytestmark = pytest.mark.subprocess


def test_two_acp_servers_on_one_database_share_sessions_but_not_live_ones(
    postgres_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = AcpProcess(postgres_dsn), AcpProcess(postgres_dsn)
    try:
        first.initialize()
        second.initialize()
        sid = first.new_session(tmp_path)
        answer = first.answer(first.prompt(sid, "hello from the first host"))
        assert answer["result"]["stopReason"] == "end_turn"
        load: dict[str, object] = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        refused = second.answer(second.send("session/load", load))
        assert "error" in refused, refused
        assert sid in refused["error"]["message"]
        assert "live" in refused["error"]["message"]
        # End of input: the first server closes its agents, releases its claims, exits 0.
        assert first.process.stdin is not None
        first.process.stdin.close()
        assert first.process.wait(timeout=30) == 0
        second.result("session/load", load)
        answer = second.answer(second.prompt(sid, "and from the second"))
        assert answer["result"]["stopReason"] == "end_turn"
    finally:
        first.close()
        second.close()
    assert main(["sessions", "list", "--store", postgres_dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:]] == [sid]
    assert out[1].split(maxsplit=5)[3:] == ["2", "completed", "hello from the first host"]
    assert main(["sessions", "show", sid, "--store", postgres_dsn]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].split()[:2] == ["0", "turn/start"]


def test_sessions_on_a_database_without_the_tables_lists_none_and_creates_nothing(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = PostgresStore(postgres_dsn).where
    assert main(["sessions", "list", "--store", postgres_dsn]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"no sessions in {where}" in captured.err
    assert main(["sessions", "show", "nope", "--store", postgres_dsn]) == 1
    assert f"no session 'nope' in {where}" in capsys.readouterr().err
    assert user_tables(postgres_dsn) == []

    async def one_session() -> None:
        with trio.fail_after(60):
            async with open_runtime(postgres_dsn) as rt:
                handle = await rt.agents.create(model=ScriptedModel([reply("ok")]), session_id="s1")
                handle.agent.send("hello")
                await handle.agent.wait_idle()
                await handle.aclose()

    trio.run(one_session)
    assert main(["sessions", "list", "--store", postgres_dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:]] == ["s1"]
    assert out[1].split(maxsplit=5)[3:] == ["1", "completed", "hello"]


@pytest.mark.parametrize("password", ["s3cret-pw", "e"])
def test_a_database_that_cannot_be_reached_is_one_line_without_the_password(
    password: str,
) -> None:
    # A one-letter password was once masked wherever its letter stood in the driver's
    # message ("conn***ction r***fus***d"), which mangled it and told what the password was.
    url = f"postgresql://agent:{password}@127.0.0.1:1/agents?connect_timeout=2"
    for command in (["acp", "--store", url], ["sessions", "list", "--store", url]):
        done = subprocess.run(
            [sys.executable, "-m", "trio_agents._cli", *command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert done.returncode in (1, 2)
        assert f":{password}@" not in done.stderr
        assert "***" not in done.stderr  # the message never held it: nothing to mask
        assert "connection" in done.stderr
        assert "postgresql://agent@127.0.0.1:1/agents" in lines[0]


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("invalid dsn postgresql://u:pw@h:1/d", "invalid dsn postgresql://u@h:1/d"),
        ("at postgresql://v:x%40y@other:2/e failed", "at postgresql://v:***@other:2/e failed"),
        ("bad: host=h password='a b' port=x", "bad: host=h password=*** port=x"),
        ("bad: PASSWORD = pw2 port=x", "bad: PASSWORD = *** port=x"),
        ("refused; the password longsecret9 is wrong", "refused; the password *** is wrong"),
        ("connection refused at e", "connection refused at e"),  # a short password: as is
    ],
)
def test_a_drivers_message_loses_the_password_and_nothing_else(text: str, masked: str) -> None:
    from trio_agents._store._pg_connect import without_password

    password = "longsecret9" if "longsecret9" in text else "e"
    dsn = "postgresql://u:pw@h:1/d"
    assert without_password(text, dsn, "postgresql://u@h:1/d", password) == masked


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "command", [["sessions", "list"], ["sessions", "show", "x"], ["chat"], ["acp"]]
)
def test_without_the_driver_a_database_store_is_one_line(
    command: list[str], tmp_path: Path
) -> None:
    # `psycopg` is an extra: a plain install has no driver. This was a traceback in
    # `sessions` and `chat`, since they made the store before their error handling.
    blocked = (
        "import sys; sys.modules['psycopg'] = None; "
        "from trio_agents._cli._main import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked, *command, "--store", "postgresql://u:pw@127.0.0.1:1/x"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
        env=_offline_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    (line,) = done.stderr.splitlines()
    assert "needs the psycopg driver" in line
    assert "pip install 'trio-agents[postgres]'" in line
    assert done.returncode == 2


def test_a_chat_on_the_database_is_resumed_by_a_second_chat(
    postgres_dsn: str, tmp_path: Path
) -> None:
    first: pexpect.spawn[str] = pexpect.spawn(
        sys.executable,  # with PYTHONPATH inherited: this checkout's code
        ["-m", "trio_agents._cli", "chat", "--store", postgres_dsn],
        cwd=str(tmp_path),
        env=_offline_env(tmp_path),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )
    try:
        first.expect(r"session (\S+) \(resume with: trio-agents chat --store (\S+)")
        match = first.match
        assert isinstance(match, re.Match)
        sid, named = str(match.group(1)), str(match.group(2))
        assert named.startswith("postgresql://postgres@")  # the database, no password
        first.expect_exact("\r\n> ")
        first.sendline("hello from a chat")
        first.expect_exact("echo: hello from a chat\r\n> ")
        first.sendeof()
        first.expect(pexpect.EOF)
    finally:
        first.close()
    assert first.exitstatus == 0
    second: pexpect.spawn[str] = pexpect.spawn(
        sys.executable,
        ["-m", "trio_agents._cli", "chat", "--store", postgres_dsn, "--session", sid],
        cwd=str(tmp_path),
        env=_offline_env(tmp_path),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )
    try:
        second.expect_exact("\r\n> ")
        second.sendline("and again")
        second.expect_exact("echo: and again\r\n> ")
        second.sendeof()
        second.expect(pexpect.EOF)
    finally:
        second.close()
    assert second.exitstatus == 0

    async def prompts() -> list[str]:
        store = PostgresStore(postgres_dsn)
        async with store.running():
            records = (await store.load(sid)).records
        return [str(r.data["content"]) for r in records if r.type == "user/message"]

    assert trio.run(prompts) == ["hello from a chat", "and again"]


def _offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return env


def test_acp_names_a_postgres_store_on_stderr_without_its_password(postgres_dsn: str) -> None:
    # The test server trusts its socket, so a password in the URL is accepted and unused.
    dsn = postgres_dsn.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    done = subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", "acp", "--store", dsn],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert "; store " in first
    assert "s3cret" not in done.stderr
    assert postgres_dsn.rsplit("/", 1)[-1].split("?")[0] in first  # the database's name
