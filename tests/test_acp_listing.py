"""`session/list`'s pages (`trio_agents.acp._listing`, pure): however sessions are created
and written between two pages, one listing holds every session that existed when it began
exactly once, newest first (rule P11), and every answer is a valid ACP ListSessionsResponse."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from acp import schema
from hypothesis import given
from hypothesis import strategies as st

from trio_agents.acp import _jsonrpc as rpc
from trio_agents.acp._listing import iso_time, page


@dataclass(frozen=True)
class Info:
    id: str
    created_at: float
    updated_at: float
    title: str | None = None
    cwd: str | None = "/w"


# Coarse creation times, so that ties (broken by id) are common.
times = st.integers(0, 5).map(float)
infos = st.builds(
    Info,
    id=st.text("abc", min_size=1, max_size=3),
    created_at=times,
    updated_at=times,
    title=st.none() | st.text(max_size=5),
    cwd=st.sampled_from(["/w", "/v", None]),
)
# Between two pages: a session created (later than any), or an existing one written.
events = st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=6)


@given(st.lists(infos, max_size=12, unique_by=lambda i: i.id), st.integers(1, 4), events)
def test_a_listing_shows_each_session_once_newest_first_whatever_happens_between_pages(
    start: list[Info], size: int, between: list[tuple[bool, int]]
) -> None:
    sessions = list(start)
    expected = sorted(
        (s for s in start if s.cwd is not None), key=lambda s: (s.created_at, s.id), reverse=True
    )
    seen: list[str] = []
    cursor: str | None = None
    changes = iter(between)
    for _ in range(len(start) + len(between) + 2):  # a listing that never ends fails below
        params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
        answer = page(sessions, params, size)
        schema.ListSessionsResponse.model_validate(answer)
        assert len(answer["sessions"]) <= size
        seen += [info["sessionId"] for info in answer["sessions"]]
        cursor = answer.get("nextCursor")
        if cursor is None:
            break
        for create, which in changes:
            if create:
                sessions.append(Info(f"new{len(sessions)}", 10.0 + len(sessions), 10.0))
            elif sessions:
                index = which % len(sessions)
                sessions[index] = replace(sessions[index], updated_at=99.0, title="written")
            break
    assert cursor is None, "the listing did not end"
    assert seen == [s.id for s in expected]


def test_the_cwd_filter_and_the_fields() -> None:
    sessions = [Info("a", 1.0, 2.5, "first", "/w"), Info("b", 2.0, 2.0, None, "/v/")]
    answer = page(sessions, {"cwd": "/v"})
    assert answer == {"sessions": [{"sessionId": "b", "cwd": "/v/", "updatedAt": iso_time(2.0)}]}
    assert page(sessions, {"cwd": "/w/"})["sessions"][0]["title"] == "first"
    assert iso_time(2.5) == "1970-01-01T00:00:02.500Z"


@pytest.mark.parametrize("cursor", ["", "x", "W10", "WyJhIiwxXQ", "bm90IGpzb24"])
def test_a_cursor_this_agent_did_not_give_is_refused(cursor: str) -> None:
    with pytest.raises(rpc.JsonRpcError) as info:
        page([Info("a", 1.0, 1.0)], {"cursor": cursor})
    assert info.value.code == rpc.INVALID_PARAMS
    assert info.value.detail.startswith(f"cursor {cursor!r} is not one this agent gave")


def test_a_relative_cwd_is_refused() -> None:
    with pytest.raises(rpc.JsonRpcError, match="cwd must be an absolute path"):
        page([], {"cwd": "w"})
