"""The file tools in ACP sessions (issue 37, item 1), in process over memory streams: calls
shown with kind `read`/`edit`, `diff` content and `locations`, live and in a replay alike
(D520); files read and written through the client's `fs/*` when it offers them, the disk
otherwise (D521); asked like commands in `ask`, refused in `read-only` (D522). Every update
and request is validated against `acp.schema`."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import trio
import trio.testing
from acp import schema

from trio_agents import Record, SqliteStore
from trio_agents.acp._mapping import updates_for_record
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.acp_peer import AcpPeer, acp_peer

# The tools resolve paths and touch files in worker threads: a real clock (conftest).
pytestmark = pytest.mark.realtime


def validate(update: dict[str, Any]) -> None:
    schema.SessionNotification.model_validate({"sessionId": "s", "update": update})


# -- the mapping (pure) ----------------------------------------------------------------------


def call_record(name: str, **arguments: Any) -> Record:
    return Record.of("tool/call", {"call_id": "c1", "name": name, "arguments": arguments})


def test_a_file_tools_call_shows_its_file_and_the_change_it_asks_for() -> None:
    (edit,) = updates_for_record(
        call_record("edit", path="src/a.py", old_string="x = 1", new_string="x = 2"),
        replay=False,
        cwd="/p",
    )
    validate(edit)
    assert edit["kind"] == "edit"
    assert edit["title"] == "edit: src/a.py"
    assert edit["locations"] == [{"path": "/p/src/a.py"}]
    assert edit["content"] == [
        {"type": "diff", "path": "/p/src/a.py", "oldText": "x = 1", "newText": "x = 2"}
    ]
    (write,) = updates_for_record(
        call_record("write", path="/p/new.txt", content="hi\n"), replay=True, cwd="/p"
    )
    validate(write)
    assert write["kind"] == "edit"
    assert write["content"] == [{"type": "diff", "path": "/p/new.txt", "newText": "hi\n"}]
    (read,) = updates_for_record(call_record("read", path="a.txt"), replay=False, cwd="/p")
    validate(read)
    assert read["kind"] == "read"
    assert read["locations"] == [{"path": "/p/a.txt"}]
    assert "content" not in read
    # Without a cwd a relative path has no absolute form; a bad path shows nothing.
    for record, cwd in [
        (call_record("read", path="a.txt"), None),
        (call_record("edit", path="a\0b", old_string="a", new_string="b"), "/p"),
        (call_record("bash", path="/p/a", command="ls"), "/p"),
    ]:
        (update,) = updates_for_record(record, replay=False, cwd=cwd)
        assert "locations" not in update
        assert "content" not in update


def test_a_results_details_are_its_diff_and_locations_and_bad_ones_are_left_out() -> None:
    details = {
        "locations": [{"path": "/p/a.py", "line": 4}, {"path": "relative"}, "junk"],
        "diff": {"path": "/p/a.py", "old_text": "a\n", "new_text": "b\n"},
    }
    result = Record.of(
        "tool/result",
        {"call_id": "c1", "content": "edited", "is_error": False, **{"details": details}},
    )
    (update,) = updates_for_record(result, replay=True)
    validate(update)
    assert update["content"] == [
        {"type": "diff", "path": "/p/a.py", "newText": "b\n", "oldText": "a\n"},
        {"type": "content", "content": {"type": "text", "text": "edited"}},
    ]
    assert update["locations"] == [{"path": "/p/a.py", "line": 4}]
    new_file = {"diff": {"path": "/p/n", "old_text": None, "new_text": "x"}}
    (made,) = updates_for_record(
        Record.of(
            "tool/result", {"call_id": "c1", "content": "", "is_error": False, "details": new_file}
        ),
        replay=False,
    )
    validate(made)
    assert made["content"][0] == {"type": "diff", "path": "/p/n", "newText": "x"}
    for bad in [
        5,
        {"diff": {"path": "rel", "new_text": "x"}},
        {"diff": {"path": "/a"}},
        {"locations": 3},
    ]:
        (plain,) = updates_for_record(
            Record.of(
                "tool/result", {"call_id": "c1", "content": "t", "is_error": False, "details": bad}
            ),
            replay=False,
        )
        validate(plain)
        assert [c["type"] for c in plain["content"]] == ["content"]
        assert "locations" not in plain


# -- a session on the wire ---------------------------------------------------------------------


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


class Editor:
    """The client side a test plays: it answers the server's `fs/*` requests from `buffers`
    (absolute path to text) and permission requests with `allow-once`, and records them."""

    def __init__(self, peer: AcpPeer, buffers: dict[str, str] | None = None) -> None:
        self.peer = peer
        self.buffers = buffers if buffers is not None else {}
        self.requests: list[dict[str, Any]] = []

    async def _answer(self, frame: dict[str, Any]) -> None:
        method, params = frame["method"], frame["params"]
        body: dict[str, Any]
        if method == "fs/read_text_file":
            schema.ReadTextFileRequest.model_validate(params)
            if params["path"] in self.buffers:
                body = {"result": {"content": self.buffers[params["path"]]}}
            else:
                body = {"error": {"code": -32002, "message": "Resource not found"}}
        elif method == "fs/write_text_file":
            schema.WriteTextFileRequest.model_validate(params)
            self.buffers[params["path"]] = params["content"]
            body = {"result": None}
        else:
            schema.RequestPermissionRequest.model_validate(params)
            body = {"result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}
        frame = {"jsonrpc": "2.0", "id": frame["id"], **body}
        await self.peer.send_raw(json.dumps(frame).encode() + b"\n")

    async def prompt(self, sid: str, words: str) -> dict[str, Any]:
        """Send a prompt and answer the server's requests until the prompt is answered."""
        prompt = await self.peer.start_request(
            "session/prompt", {"sessionId": sid, "prompt": text(words)}
        )
        with trio.fail_after(30):
            while True:
                for frame in self.peer.frames:
                    if "method" in frame and "id" in frame and frame not in self.requests:
                        self.requests.append(frame)
                        await self._answer(frame)
                for frame in self.peer.frames:
                    if frame.get("id") == prompt and "method" not in frame:
                        return frame
                await trio.testing.wait_all_tasks_blocked()

    def asked(self, method: str) -> list[dict[str, Any]]:
        return [f["params"] for f in self.requests if f["method"] == method]


async def open_session(peer: AcpPeer, cwd: pathlib.Path, *, fs: dict[str, bool] | None) -> str:
    capabilities = {"fs": {"readTextFile": False, "writeTextFile": False, **(fs or {})}}
    await peer.result("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    result = await peer.result("session/new", {"cwd": str(cwd), "mcpServers": []})
    return str(result["sessionId"])


def tool_updates(peer: AcpPeer, sid: str, start: int = 0) -> list[dict[str, Any]]:
    updates = peer.updates(sid)[start:]
    for update in updates:
        validate(update)
    return [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def last_update(updates: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return [u for u in updates if u["toolCallId"] == call_id][-1]


EDITS = [
    tool_step(("write", {"path": "src/mod.py", "content": "a = 1\nb = 2\n"})),
    tool_step(("edit", {"path": "src/mod.py", "old_string": "b = 2", "new_string": "b = 3"})),
    tool_step(("read", {"path": "src/mod.py", "offset": 2})),
    reply("done"),
]


async def test_changes_show_their_diff_and_locations_live_and_in_a_replay(
    tmp_path: pathlib.Path,
) -> None:
    model = ScriptedModel(EDITS)
    path = str(tmp_path / "src" / "mod.py")
    async with acp_peer(lambda: model) as peer:
        sid = await open_session(peer, tmp_path, fs=None)
        editor = Editor(peer)
        assert (await editor.prompt(sid, "go"))["result"] == {"stopReason": "end_turn"}
        assert editor.requests == []  # no fs/* asked: the client offered none
        assert (tmp_path / "src" / "mod.py").read_text() == "a = 1\nb = 3\n"
        live = tool_updates(peer, sid)
        write_call, edit_call, read_call = [u for u in live if u["sessionUpdate"] == "tool_call"]
        assert (write_call["kind"], edit_call["kind"], read_call["kind"]) == (
            "edit",
            "edit",
            "read",
        )
        assert edit_call["content"] == [
            {"type": "diff", "path": path, "oldText": "b = 2", "newText": "b = 3"}
        ]
        written = last_update(live, write_call["toolCallId"])
        assert written["status"] == "completed"
        assert written["content"][0] == {"type": "diff", "path": path, "newText": "a = 1\nb = 2\n"}
        assert written["locations"] == [{"path": path, "line": 1}]
        edited = last_update(live, edit_call["toolCallId"])
        assert edited["content"][0] == {
            "type": "diff",
            "path": path,
            "oldText": "a = 1\nb = 2\n",
            "newText": "a = 1\nb = 3\n",
        }
        assert edited["content"][1]["content"]["text"].startswith(f"edited {path}: ")
        assert edited["locations"] == [{"path": path, "line": 2}]
        read = last_update(live, read_call["toolCallId"])
        assert read["locations"] == [{"path": path, "line": 2}]
        assert read["content"][0]["content"]["text"].startswith("     2\tb = 3\n")

        # Loaded again (D505): the replay shows the same, from the records.
        before = len(peer.updates(sid))
        await peer.result(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        replayed = tool_updates(peer, sid, before)
        assert replayed == [u for u in live if u.get("status") != "in_progress"]


async def test_a_client_that_offers_fs_is_read_and_written_and_the_disk_is_not(
    tmp_path: pathlib.Path,
) -> None:
    disk = tmp_path / "open.py"
    disk.write_text("as saved = 0\n")
    buffers = {str(disk): "unsaved = 1\n"}
    model = ScriptedModel(
        [
            tool_step(("edit", {"path": "open.py", "old_string": "= 1", "new_string": "= 2"})),
            tool_step(("write", {"path": "new.txt", "content": "fresh\n"})),
            tool_step(("read", {"path": "open.py"})),
            tool_step(("edit", {"path": "../outside.py", "old_string": "a", "new_string": "b"})),
            reply("done"),
        ]
    )
    async with acp_peer(lambda: model) as peer:
        sid = await open_session(peer, tmp_path, fs={"readTextFile": True, "writeTextFile": True})
        editor = Editor(peer, buffers)
        assert (await editor.prompt(sid, "go"))["result"] == {"stopReason": "end_turn"}
        assert buffers == {str(disk): "unsaved = 2\n", str(tmp_path / "new.txt"): "fresh\n"}
        assert disk.read_text() == "as saved = 0\n"
        assert not (tmp_path / "new.txt").exists()
        assert [p["path"] for p in editor.asked("fs/read_text_file")] == [
            str(disk), str(tmp_path / "new.txt"), str(disk)
        ]  # fmt: skip
        assert {f["params"]["sessionId"] for f in editor.requests} == {sid}
        updates = tool_updates(peer, sid)
        calls = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
        edited, made, read, outside = (last_update(updates, c) for c in calls)
        assert edited["content"][0]["oldText"] == "unsaved = 1\n"
        assert made["content"][0] == {
            "type": "diff", "path": str(tmp_path / "new.txt"), "newText": "fresh\n"
        }  # fmt: skip
        assert "unsaved = 2" in read["content"][0]["content"]["text"]
        assert outside["status"] == "failed"
        assert "outside the working directory" in outside["content"][-1]["content"]["text"]


async def test_a_client_that_only_reads_has_its_buffer_read_and_the_disk_written(
    tmp_path: pathlib.Path,
) -> None:
    disk = tmp_path / "f.txt"
    disk.write_text("disk\n")
    buffers = {str(disk): "buffer\n"}
    model = ScriptedModel(
        [
            tool_step(("edit", {"path": "f.txt", "old_string": "buffer", "new_string": "b2"})),
            reply("ok"),
        ]
    )
    async with acp_peer(lambda: model) as peer:
        sid = await open_session(peer, tmp_path, fs={"readTextFile": True})
        editor = Editor(peer, buffers)
        await editor.prompt(sid, "go")
        assert disk.read_text() == "b2\n"
        assert editor.asked("fs/write_text_file") == []


async def test_in_ask_mode_an_edit_asks_with_its_diff_and_a_read_does_not(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "f.txt").write_text("one\n")
    model = ScriptedModel(
        [
            tool_step(("read", {"path": "f.txt"})),
            tool_step(("edit", {"path": "f.txt", "old_string": "one", "new_string": "two"})),
            tool_step(("write", {"path": "g.txt", "content": "new\n"})),
            reply("ok"),
        ]
    )
    async with acp_peer(lambda: model, mode="ask") as peer:
        sid = await open_session(peer, tmp_path, fs=None)
        editor = Editor(peer)
        await editor.prompt(sid, "go")
        asked = [p["toolCall"] for p in editor.asked("session/request_permission")]
        assert [(a["kind"], a["title"]) for a in asked] == [
            ("edit", "edit: f.txt"), ("edit", "write: g.txt")
        ]  # fmt: skip
        path = str(tmp_path / "f.txt")
        assert asked[0]["content"] == [
            {"type": "diff", "path": path, "oldText": "one", "newText": "two"}
        ]
        assert asked[0]["locations"] == [{"path": path}]
        assert (tmp_path / "f.txt").read_text() == "two\n"
        assert (tmp_path / "g.txt").read_text() == "new\n"


async def test_read_only_rejects_edit_and_write_and_reads(tmp_path: pathlib.Path) -> None:
    (tmp_path / "f.txt").write_text("one\n")
    model = ScriptedModel(
        [
            tool_step(
                ("edit", {"path": "f.txt", "old_string": "one", "new_string": "two"}),
                ("write", {"path": "g.txt", "content": "x"}),
                ("read", {"path": "f.txt"}),
            ),
            reply("ok"),
        ]
    )
    async with acp_peer(lambda: model, mode="read-only") as peer:
        sid = await open_session(peer, tmp_path, fs=None)
        editor = Editor(peer)
        await editor.prompt(sid, "go")
        assert editor.requests == []
        updates = tool_updates(peer, sid)
        calls = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
        edit, write, read = (last_update(updates, c) for c in calls)
        for refused, name in [(edit, "edit"), (write, "write")]:
            assert refused["status"] == "failed"
            said = refused["content"][-1]["content"]["text"]
            assert f"the session is in read-only mode, where {name!r} does not run" in said
        assert read["status"] == "completed"
        assert (tmp_path / "f.txt").read_text() == "one\n"
        assert not (tmp_path / "g.txt").exists()


async def test_a_sessions_tools_refuse_what_its_commands_cannot_see(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session whose working directory is the home: a credential file, and the session
    # store, are as hidden from its file tools as from its commands (D516).
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (tmp_path / "store").mkdir()
    store = SqliteStore(tmp_path / "store" / "sessions.sqlite3")
    steps = [
        tool_step(("read", {"path": ".ssh/id_ed25519"})),
        tool_step(("write", {"path": "store/sessions.sqlite3", "content": "gone"})),
        tool_step(("read", {"path": "notes.txt"})),
        reply("done"),
    ]
    (tmp_path / "notes.txt").write_text("mine to read")
    async with acp_peer(lambda: ScriptedModel(steps), store=store) as peer:
        sid = await open_session(peer, tmp_path, fs=None)
        assert (await peer.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "look"}
        ]}))["result"] == {"stopReason": "end_turn"}  # fmt: skip
        updates = tool_updates(peer, sid)
        calls = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
        results = [last_update(updates, call) for call in calls]
    secret, store_file, mine = (r["rawOutput"] for r in results)
    assert secret["is_error"] is True
    assert "hidden from this session's tools" in secret["output"]
    assert "PRIVATE KEY" not in json.dumps(results)
    assert store_file["is_error"] is True
    assert "hidden from this session's tools" in store_file["output"]
    assert mine["is_error"] is False
    assert "mine to read" in mine["output"]
