"""Sessions an editor can manage, driven by the official Python ACP client over real stdio
against `trio-agents acp` processes running this checkout (issue 17, items 4 to 6): a session
stored when it is created, `session/list` across processes, resources in prompts, the
offline model's commands, and params checked against the schema. The SDK client parses
every update and answer into `acp.schema` models, so each new message is validated too."""

from __future__ import annotations

import asyncio
import os
import pathlib
from datetime import datetime
from typing import Any, cast

import pydantic
import pytest
from acp import RequestError, schema, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AvailableCommandsUpdate,
    EmbeddedResourceContentBlock,
    ResourceContentBlock,
    TextResourceContents,
)

from agent_conformance._acp._wire import check_from_agent_message
from trio_agents.acp._resources import MAX_BYTES

from .support.acp_process import AcpProcess
from .support.acp_sdk import RecordingClient, guarded, new_session, prompt, server

pytestmark = pytest.mark.subprocess

OFFLINE_COMMANDS = ["output", "kill", "tool", "tools", "system", "hold", "loop", "fail"]


def commands(client: RecordingClient, sid: str) -> list[list[str]]:
    return [
        [command.name for command in update.available_commands]
        for update in client.of(sid)
        if isinstance(update, AvailableCommandsUpdate)
    ]


async def raw_error(conn: ClientSideConnection, method: str, params: Any) -> RequestError:
    """The error answering a request the SDK's own models would not let us send."""
    with pytest.raises(RequestError) as info:
        await conn._conn.send_request(method, params)  # pyright: ignore[reportPrivateUsage]
    return info.value


async def all_pages(conn: ClientSideConnection, cwd: str | None = None) -> list[list[Any]]:
    pages: list[list[Any]] = []
    cursor: str | None = None
    while True:
        answer = await conn.list_sessions(cwd=cwd, cursor=cursor)
        pages.append(answer.sessions)
        if answer.next_cursor is None:
            return pages
        cursor = answer.next_cursor


def test_P11_sessions_are_listed_and_paged_across_processes_with_titles_and_update_times(
    tmp_path: pathlib.Path,
) -> None:
    store = tmp_path / "s.sqlite3"
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    long_prompt = "please fix\nthe failing test in " + "module " * 20

    async def first() -> list[str]:
        client = RecordingClient()
        async with server(client, store) as (conn, _process):
            caps = client.init.agent_capabilities
            assert caps.session_capabilities.list is not None
            assert caps.prompt_capabilities.embedded_context is True
            made = [await new_session(conn, here) for _ in range(52)]
            made.append(await new_session(conn, there))
            # The first session is prompted last: written after every other was created.
            await conn.prompt(session_id=made[0], prompt=prompt(long_prompt))
            assert commands(client, made[0]) == [OFFLINE_COMMANDS]
        return made

    async def second(made: list[str]) -> None:
        client = RecordingClient()
        async with server(client, store) as (conn, _process):
            pages = await all_pages(conn)
            assert [len(page) for page in pages] == [50, 3]
            listed = [info for page in pages for info in page]
            # Newest first, every session once.
            assert [info.session_id for info in listed] == made[::-1]
            by_id = {info.session_id: info for info in listed}
            assert by_id[made[-1]].cwd == str(there)
            title = by_id[made[0]].title
            assert title is not None
            assert title.startswith("please fix the failing test in module module")
            assert title.endswith("\u2026")
            assert len(title) <= 80
            assert all(by_id[sid].title is None for sid in made[1:])
            times = {sid: datetime.fromisoformat(by_id[sid].updated_at) for sid in made}
            assert times[made[0]] > max(times[sid] for sid in made[1:])
            assert times[made[1]] <= times[made[51]]  # created in that order, never written

            filtered = await all_pages(conn, cwd=str(here))
            assert [info.session_id for page in filtered for info in page] == made[-2::-1]
            assert (await conn.list_sessions(cwd=str(tmp_path))).sessions == []

            # Paging is stable: a session created, and an old one written, between two
            # pages neither repeat nor skip anything on the next page.
            page_one = await conn.list_sessions()
            assert page_one.next_cursor is not None
            newer = await new_session(conn, here)
            await conn.load_session(cwd=str(here), session_id=made[1], mcp_servers=[])
            await conn.prompt(session_id=made[1], prompt=prompt("written now"))
            page_two = await conn.list_sessions(cursor=page_one.next_cursor)
            assert [info.session_id for info in page_two.sessions] == made[2::-1]
            assert page_two.next_cursor is None
            assert (await conn.list_sessions()).sessions[0].session_id == newer

            bad = await raw_error(conn, "session/list", {"cursor": "not-ours"})
            assert bad.code == -32602
            assert "cursor 'not-ours'" in str(bad.data)
            relative = await raw_error(conn, "session/list", {"cwd": "here"})
            assert relative.code == -32602
            assert "cwd must be an absolute path" in str(relative.data)

    async def both() -> None:
        await second(await first())

    asyncio.run(guarded(both()))


def test_P12_a_session_loads_in_a_new_process_before_its_first_prompt(
    tmp_path: pathlib.Path,
) -> None:
    store = tmp_path / "s.sqlite3"

    async def create() -> str:
        client = RecordingClient()
        async with server(client, store) as (conn, _process):
            sid = await new_session(conn, tmp_path)
            await conn.list_sessions()  # a round trip: what was written before it arrived
            assert commands(client, sid) == [OFFLINE_COMMANDS]
        return sid

    async def load(sid: str) -> None:
        client = RecordingClient()
        async with server(client, store) as (conn, _process):
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            await conn.list_sessions()
            # Nothing to replay; the commands are advertised again, after the answer.
            assert [type(u) for u in client.of(sid)] == [AvailableCommandsUpdate]
            answer = await conn.prompt(session_id=sid, prompt=prompt("first words"))
            assert answer.stop_reason == "end_turn"
            assert client.text(sid).endswith("echo: first words")
            (info,) = (await conn.list_sessions()).sessions
            assert (info.session_id, info.title) == (sid, "first words")

    async def both() -> None:
        await load(await create())

    asyncio.run(guarded(both()))


def test_resources_in_a_prompt_reach_the_model(
    tmp_path: pathlib.Path,
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "notes.txt").write_text("inside the project\n")
    (cwd / "blob.bin").write_bytes(b"\x00\x01\x02")
    (cwd / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (cwd / "big.txt").write_text("x" * (MAX_BYTES + 1))
    (tmp_path / "secret.txt").write_text("outside the project")
    (cwd / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (cwd / "sub").mkdir()
    os.mkfifo(cwd / "pipe")  # opening it for reading would wait for a writer for ever

    def link(name: str, uri: str | None = None) -> ResourceContentBlock:
        uri = uri if uri is not None else (cwd / name).as_uri()
        return ResourceContentBlock(type="resource_link", name=name, uri=uri)

    blocks: list[Any] = [
        text_block("look:"),
        link("notes.txt"),
        link("missing.txt"),
        link("blob.bin"),
        link("latin1.txt"),
        link("big.txt"),
        link("secret", (tmp_path / "secret.txt").as_uri()),
        link("escape.txt"),
        link("sub"),
        link("pipe"),
        link("web", "https://example.com/x"),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="zed:///selection", text="embedded words"),
        ),
    ]

    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, _process):
            sid = await new_session(conn, cwd)
            answer = await conn.prompt(session_id=sid, prompt=blocks)
            assert answer.stop_reason == "end_turn"
            seen = client.text(sid)
            assert f'<resource uri="{(cwd / "notes.txt").as_uri()}">\ninside the project\n' in seen
            assert "outside the project" not in seen
            assert '<resource uri="zed:///selection">\nembedded words\n</resource>' in seen

            def note(name: str) -> str:
                start = seen.index(f'<resource uri="{(cwd / name).as_uri()}" unread="')
                return seen[start : seen.index("/>", start)]

            assert "no such file" in note("missing.txt")
            assert "binary" in note("blob.bin")
            assert "not UTF-8" in note("latin1.txt")
            assert f"more than the {MAX_BYTES}" in note("big.txt")
            assert "outside the session's directory" in note("escape.txt")
            assert "not a regular file" in note("sub")
            assert "not a regular file" in note("pipe")
            assert "outside the session's directory" in seen.split("secret.txt", 1)[1]
            assert 'uri="https://example.com/x" unread="only file: links are read"' in seen
            (info,) = (await conn.list_sessions()).sessions
            assert info.title is not None
            assert info.title.startswith("look: @notes.txt @missing.txt @blob.bin")

            again = await conn.prompt(session_id=sid, prompt=prompt("still here"))
            assert again.stop_reason == "end_turn"

    asyncio.run(guarded(scenario()))


def test_a_client_that_reads_files_is_asked_for_a_links_text(tmp_path: pathlib.Path) -> None:
    """A client offering `fs.readTextFile` is asked for the text of a link inside the
    session's directory (its editor may hold unsaved changes); a link outside it is refused
    without asking, and an error the client answers becomes a note (D230)."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "open.py").write_text("as saved on disk\n")
    (tmp_path / "secret.txt").write_text("outside")

    class ReadingClient(RecordingClient):
        def __init__(self) -> None:
            super().__init__()
            self.capabilities = schema.ClientCapabilities(
                fs=schema.FileSystemCapabilities(read_text_file=True)
            )
            self.asked: list[tuple[str, str]] = []

        async def read_text_file(
            self, session_id: str, path: str, **kwargs: Any
        ) -> schema.ReadTextFileResponse:
            self.asked.append((session_id, path))
            if path.endswith("gone.py"):
                raise RequestError(-32002, "no buffer for it")
            return schema.ReadTextFileResponse(content="as the editor holds it, unsaved\n")

    def link(path: pathlib.Path) -> ResourceContentBlock:
        return ResourceContentBlock(type="resource_link", name=path.name, uri=path.as_uri())

    async def scenario() -> None:
        client = ReadingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, _process):
            sid = await new_session(conn, cwd)
            blocks: list[Any] = [
                text_block("look:"),
                link(cwd / "open.py"),
                link(cwd / "gone.py"),
                link(tmp_path / "secret.txt"),
            ]
            answer = await conn.prompt(session_id=sid, prompt=blocks)
            assert answer.stop_reason == "end_turn"
            seen = client.text(sid)
            assert "as the editor holds it, unsaved" in seen
            assert "as saved on disk" not in seen
            assert "the client could not read it" in seen
            assert "outside" not in seen.replace("outside the session's directory", "")
            assert client.asked == [(sid, str(cwd / "open.py")), (sid, str(cwd / "gone.py"))]

    asyncio.run(guarded(scenario()))


def test_P13_params_that_do_not_match_the_schema_are_refused_naming_the_field(
    tmp_path: pathlib.Path,
) -> None:
    cwd = tmp_path

    async def scenario() -> None:
        client = RecordingClient()
        async with server(client, tmp_path / "s.sqlite3") as (conn, _process):
            sid = await new_session(conn, cwd)
            # Params that do not match the schema: -32602, naming the field.
            cases: list[tuple[str, dict[str, Any], str]] = [
                ("initialize", {"protocolVersion": "x"}, "protocolVersion must be an integer"),
                ("initialize", {"protocolVersion": 1.5}, "protocolVersion must be an integer"),
                ("session/new", {"cwd": 5, "mcpServers": []}, "cwd must be a string, got 5"),
                ("session/new", {"cwd": str(cwd)}, "mcpServers is required"),
                ("session/prompt", {"sessionId": sid, "prompt": [{}]}, "prompt[0].type must"),
                (
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "resource", "resource": {"uri": "u"}}]},
                    "prompt[0].resource.text or prompt[0].resource.blob is required",
                ),
                ("session/load", {"sessionId": 7, "cwd": "/", "mcpServers": []}, "sessionId"),
            ]
            for method, params, named in cases:
                error = await raw_error(conn, method, params)
                assert error.code == -32602, (method, params)
                assert str(error.data).startswith(named), (error.data, named)
            # A broken cancel (a notification) is not answered, and nothing was lost.
            await conn._conn.send_notification("session/cancel", {"sessionId": 5})  # pyright: ignore[reportPrivateUsage]
            again = await conn.prompt(session_id=sid, prompt=prompt("still here"))
            assert again.stop_reason == "end_turn"

    asyncio.run(guarded(scenario()))


def test_every_new_message_is_valid_acp_and_loses_nothing_in_the_sdk(
    tmp_path: pathlib.Path,
) -> None:
    """The raw frames, checked as the ACP machine checks them (P7), and the new ones read
    back through the SDK's models unchanged: the SDK salvages what it cannot read (drops a
    bad field or list item), so validating alone could hide a field it dropped."""
    (tmp_path / "a.txt").write_text("A\n")
    server = AcpProcess(tmp_path / "s.sqlite3")
    methods: dict[int, str] = {}

    def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = server.send(method, params)
        methods[request_id] = method
        return server.answer(request_id)

    try:
        init = ask("initialize", {"protocolVersion": 1})["result"]
        sid = ask("session/new", {"cwd": str(tmp_path), "mcpServers": []})["result"]["sessionId"]
        link = {"type": "resource_link", "uri": (tmp_path / "a.txt").as_uri(), "name": "a.txt"}
        embedded = {"type": "resource", "resource": {"uri": "m:b", "text": "B"}}
        blocks = [{"type": "text", "text": "see"}, link, embedded]
        assert ask("session/prompt", {"sessionId": sid, "prompt": blocks})["result"] == {
            "stopReason": "end_turn"
        }
        listing = ask("session/list", {"cwd": str(tmp_path)})["result"]
        error = ask("session/list", {"cursor": "x"})
        for frame in server.frames:
            answers = methods.get(frame["id"]) if "method" not in frame else None
            assert check_from_agent_message(frame, answers) is None, frame
        assert "error" in error
        (commands,) = [
            f["params"]
            for f in server.frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "available_commands_update"
        ]
        models: list[tuple[type[pydantic.BaseModel], dict[str, Any]]] = [
            (schema.InitializeResponse, init),
            (schema.ListSessionsResponse, listing),
            (schema.SessionNotification, commands),
        ]
        for model, value in models:
            read = model.model_validate(value).model_dump(by_alias=True, exclude_none=True)
            assert kept(value, read), (value, read)
    finally:
        server.close()


def kept(sent: Any, read: Any) -> bool:
    """Whether everything `sent` holds is in `read` (which may add the model's defaults)."""
    if isinstance(sent, dict):
        fields = cast("dict[str, Any]", sent)
        return isinstance(read, dict) and all(
            key in read and kept(value, read[key]) for key, value in fields.items()
        )
    if isinstance(sent, list):
        items: list[Any] = sent  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(read, list):
            return False
        back: list[Any] = read  # pyright: ignore[reportUnknownVariableType]
        return len(items) == len(back) and all(map(kept, items, back))
    return bool(sent == read)
