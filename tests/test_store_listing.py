"""A session stored before its first record (`SessionStore.persist`), and what a listing
says of each session (title, update time, cwd): MemoryStore and SqliteStore agree."""

from __future__ import annotations

import pathlib
import sqlite3
from collections.abc import Callable

import pytest

from trio_agents import MemoryStore, SessionStore, SqliteStore, open_runtime
from trio_agents._store._base import title_of
from trio_agents._store._session import Session
from trio_agents.acp._prompt import resource_note, resource_text
from trio_agents.testing import ScriptedModel

pytestmark = pytest.mark.realtime

STORES: dict[str, Callable[[pathlib.Path], SessionStore]] = {
    "memory": lambda _: MemoryStore(),
    "sqlite": lambda path: SqliteStore(path / "s.sqlite3"),
}


@pytest.mark.parametrize("kind", sorted(STORES))
async def test_a_persisted_session_is_listed_resumed_and_written_once(
    kind: str, tmp_path: pathlib.Path
) -> None:
    store = STORES[kind](tmp_path)
    async with open_runtime(store) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="s", meta={"cwd": "/w"})
        with pytest.raises(ValueError, match="not live"):
            await store.persist(Session("other"))
        await store.persist(handle.agent.session)
        await store.persist(handle.agent.session)  # already stored: nothing more
        assert await store.exists("s")
        (info,) = await store.list_sessions()
        assert (info.id, info.records, info.title, info.cwd) == ("s", 0, None, "/w")
        assert info.updated_at >= info.created_at
        created = info.updated_at
        await handle.aclose()

        # Resumed with no records, then written: its header row is not written twice.
        resumed = await rt.agents.resume("s", model=ScriptedModel())
        resumed.agent.send("  the first\n prompt ")
        await resumed.agent.wait_idle()
        await store.flush(resumed.agent.session)
        await resumed.aclose()
        (info,) = await store.list_sessions()
        assert info.title == "the first prompt"
        assert info.updated_at > created
        assert info.records > 0


async def test_a_persisted_session_resumes_from_a_new_store_object(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.sqlite3"
    async with open_runtime(SqliteStore(path)) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="s")
        await rt.sessions.persist(handle.agent.session)
    async with open_runtime(SqliteStore(path)) as rt:
        resumed = await rt.agents.resume("s", model=ScriptedModel())
        resumed.agent.send("hello")
        await resumed.agent.wait_idle()
    async with open_runtime(SqliteStore(path, readonly=True)) as rt:
        (info,) = await rt.sessions.list_sessions()
        assert info.title == "hello"


async def test_a_store_written_before_update_times_lists_its_creation_time(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    async with open_runtime(SqliteStore(path)) as rt:
        handle = await rt.agents.create(model=ScriptedModel(), session_id="s")
        handle.agent.send("hi")
        await handle.agent.wait_idle()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE updates")  # as the previous version left its files
    conn.close()
    async with open_runtime(SqliteStore(path, readonly=True)) as rt:
        (info,) = await rt.sessions.list_sessions()
        assert info.updated_at == info.created_at
        assert info.title == "hi"
    async with open_runtime(SqliteStore(path)) as rt:  # writable: the table is made again
        resumed = await rt.agents.resume("s", model=ScriptedModel())
        resumed.agent.send("again")
        await resumed.agent.wait_idle()
        await rt.sessions.flush(resumed.agent.session)
        (info,) = await rt.sessions.list_sessions()
        assert info.updated_at > info.created_at


def test_a_title_is_one_shortened_line_naming_resources_by_file() -> None:
    assert title_of("fix\n\tthis  bug") == "fix this bug"
    long = title_of("word " * 40)
    assert long.endswith("\u2026")
    assert len(long) <= 80
    assert not long[:-1].endswith(" ")
    assert title_of("x" * 200) == "x" * 79 + "\u2026"
    # The ACP server's resource markers (their format is pinned here) show as file names.
    attached = resource_text("file:///w/a.py", "body </x>\n")
    noted = resource_note("file:///w/b%20c.txt", 'no "such" file')
    assert title_of("see" + attached + "and" + noted) == "see @a.py and @b%20c.txt"
