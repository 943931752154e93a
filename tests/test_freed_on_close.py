"""A closed agent's session is freed by reference counting, not left to the cycle collector
(D376): a server that opens and closes many sessions gives their memory back at once."""

from __future__ import annotations

import gc
import pathlib

import pytest

from trio_agents import MemoryStore, OfflineModel, Session, SessionStore, SqliteStore, open_runtime

pytestmark = pytest.mark.realtime  # SQLite runs a thread


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_closed_agents_session_is_in_no_reference_cycle(
    tmp_path: pathlib.Path, kind: str
) -> None:
    store: SessionStore = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "s.db")
    async with open_runtime(store) as rt:
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(5):
                handle = await rt.agents.create(model=OfflineModel())
                handle.agent.send("hi")
                await handle.agent.wait_idle()
                await handle.aclose()
                del handle
            gc.collect()
            in_cycles = [type(o).__qualname__ for o in gc.garbage if isinstance(o, Session)]
            entries = [o for o in gc.garbage if type(o).__qualname__.endswith("_LiveEntry")]
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
            gc.enable()
    assert in_cycles == []
    assert entries == []
