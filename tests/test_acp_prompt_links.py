"""A prompt whose resource links are still being read (in process, over memory streams):
a `session/cancel` or the end of input meanwhile answers it `cancelled`, and it never
reaches the agent (design D204)."""

from __future__ import annotations

import pathlib

import pytest
import trio

from trio_agents.acp._resources import ClientRead, ResourceScope

from .support.acp_peer import acp_peer


class HeldRead:
    """Stands in for `read_resource`: each read waits until the test releases it."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.release = trio.Event()

    async def __call__(
        self, session: ResourceScope, uri: str, *, through_client: ClientRead | None = None
    ) -> str:
        self.entered.set()
        await self.release.wait()
        return f"[read {uri}]"


@pytest.mark.parametrize("how", ["session/cancel", "end of input"])
async def test_a_prompt_cancelled_while_its_links_are_read_never_reaches_the_agent(
    how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    held = HeldRead()
    monkeypatch.setattr("trio_agents.acp._prompt_turn.read_resource", held)
    link = {"type": "resource_link", "uri": (tmp_path / "a.txt").as_uri(), "name": "a.txt"}
    async with acp_peer() as peer:
        sid = (await peer.result("session/new", {"cwd": str(tmp_path), "mcpServers": []}))[
            "sessionId"
        ]
        agent = peer.runtime.agents.get(sid)
        assert agent is not None
        prompt = await peer.start_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}, link]}
        )
        await held.entered.wait()
        # Its slot is taken while the link is read: a second prompt is refused.
        second = await peer.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "y"}]}
        )
        assert second["error"]["code"] == -32602
        if how == "session/cancel":
            await peer.notify("session/cancel", {"sessionId": sid})
        else:
            await peer.close_input()
        await trio.testing.wait_all_tasks_blocked()
        held.release.set()
        assert (await peer.answer(prompt))["result"] == {"stopReason": "cancelled"}
        assert [r for r in agent.session.records if r.type == "user/message"] == []
        if how == "session/cancel":
            # The session goes on: the next prompt with a link is read and runs.
            after = await peer.result(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "z"}, link]},
            )
            assert after == {"stopReason": "end_turn"}
            (user,) = [r for r in agent.session.records if r.type == "user/message"]
            assert f"[read {link['uri']}]" in user.data["content"]


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/%00", "NUL"),  # a percent escape that decodes to NUL
        ("/a.txt%00.md", "NUL"),
        ("/\ud800", "lone surrogate"),  # valid in a JSON string, in no file name
    ],
)
@pytest.mark.parametrize("host", ["", "localhost"])
async def test_a_link_no_file_name_can_hold_is_a_note_and_the_prompt_runs(
    path: str, why: str, host: str, tmp_path: pathlib.Path
) -> None:
    # These once raised out of the directory test (realpath) and ended the whole server,
    # every other session's prompt with it (D381).
    uri = f"file://{host}{tmp_path}{path}"
    link = {"type": "resource_link", "uri": uri, "name": "x"}
    async with acp_peer() as peer:
        sid = (await peer.result("session/new", {"cwd": str(tmp_path), "mcpServers": []}))[
            "sessionId"
        ]
        agent = peer.runtime.agents.get(sid)
        assert agent is not None
        prompt = [{"type": "text", "text": "read"}, link]
        answer = await peer.result("session/prompt", {"sessionId": sid, "prompt": prompt})
        assert answer == {"stopReason": "end_turn"}
        (user,) = [r for r in agent.session.records if r.type == "user/message"]
        assert why in user.data["content"], user.data["content"]
        # The server is still serving: the session takes its next prompt.
        again = [{"type": "text", "text": "again"}]
        assert await peer.result("session/prompt", {"sessionId": sid, "prompt": again}) == {
            "stopReason": "end_turn"
        }
