"""`FileTools` on the local file system (issue 37, item 1): `read`, `edit` and `write`, confined
to the working directory as the `bash` tool's workdir is; their results' details for front
ends, recorded in `tool/result` and never sent to the model; the file-access seam."""

from __future__ import annotations

import errno
import os
import pathlib
from typing import Any

import pytest
import trio

from trio_agents import FileAccess, FileTools, Tool, ToolContext, ToolResult, open_agent
from trio_agents._tool._file_access import LocalFiles
from trio_agents.testing import ScriptedModel, reply, tool_step

# The tools resolve paths and touch files in worker threads: a real clock (conftest).
pytestmark = pytest.mark.realtime

CONTEXT = ToolContext("agent", "call-1", 1, 1)


def tool(files: FileTools, name: str) -> Tool:
    return next(t for t in files.tools if t.name == name)


async def call(files: FileTools, name: str, **arguments: Any) -> ToolResult:
    result = await tool(files, name)(arguments, CONTEXT)
    assert isinstance(result, ToolResult)
    return result


def test_the_three_tools_are_read_edit_write_with_json_schemas() -> None:
    files = FileTools("/somewhere")
    assert [t.name for t in files.tools] == ["read", "edit", "write"]
    for t in files.tools:
        assert t.parameters["type"] == "object"
        assert set(t.parameters["required"]) <= set(t.parameters["properties"])
        assert t.description
    assert tool(files, "edit").parameters["required"] == ["path", "old_string", "new_string"]
    assert files.cwd == "/somewhere"
    with pytest.raises(ValueError, match="FileTools cwd must be a directory path, got ''"):
        FileTools("")


async def test_write_read_and_edit_a_file_with_their_details(tmp_path: pathlib.Path) -> None:
    files = FileTools(tmp_path)
    target = str(tmp_path / "pkg" / "mod.py")

    made = await call(files, "write", path="pkg/mod.py", content="a = 1\nb = 2\n")
    assert made == ToolResult(
        f"wrote {target} (2 lines, a new file)",
        details={
            "locations": [{"path": target, "line": 1}],
            "diff": {"path": target, "old_text": None, "new_text": "a = 1\nb = 2\n"},
        },
    )
    read = await call(files, "read", path=target)
    assert read == ToolResult(
        "     1\ta = 1\n     2\tb = 2", details={"locations": [{"path": target, "line": 1}]}
    )
    edited = await call(files, "edit", path="pkg/mod.py", old_string="b = 2", new_string="b = 3")
    assert edited.content == f"edited {target}: replaced 1 occurrence, the first at line 2"
    assert edited.details == {
        "locations": [{"path": target, "line": 2}],
        "diff": {"path": target, "old_text": "a = 1\nb = 2\n", "new_text": "a = 1\nb = 3\n"},
    }
    assert (tmp_path / "pkg" / "mod.py").read_text() == "a = 1\nb = 3\n"

    again = await call(files, "write", path="pkg/mod.py", content="a = 1\n")
    assert again.content == f"wrote {target} (1 line, replacing what it held)"
    assert again.details is not None
    assert again.details["diff"]["old_text"] == "a = 1\nb = 3\n"


async def test_read_pages_through_a_long_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 2501)))
    files = FileTools(tmp_path)
    first = await call(files, "read", path="long.txt")
    assert first.content.endswith("[lines 1-2000 of 2500; read on with offset 2001]")
    rest = await call(files, "read", path="long.txt", offset=2001, limit=1000)
    assert rest.content.startswith("  2001\tline 2001\n")
    assert rest.content.endswith("[lines 2001-2500 of 2500]")
    assert rest.details == {"locations": [{"path": str(tmp_path / "long.txt"), "line": 2001}]}
    past = await call(files, "read", path="long.txt", offset=3000)
    assert past.is_error
    assert past.content.endswith("it has 2500 lines")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert (await call(files, "read", path="empty.txt")).content == f"{empty} is empty"


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("read", {"path": ""}, "invalid path '': give a file path inside the working directory"),
        ("read", {"path": "a\0b"}, "invalid path 'a\\x00b'"),
        ("read", {"path": "x", "offset": 0}, "invalid offset 0: give a whole number of 1"),
        ("read", {"path": "x", "limit": True}, "invalid limit True"),
        ("edit", {"path": "x", "new_string": "y"}, "invalid old_string None"),
        ("edit", {"path": "x", "old_string": "y"}, "invalid new_string None"),
        ("edit", {"path": "x", "old_string": "a", "new_string": "b", "replace_all": 1}, "invalid"),
        ("write", {"path": "x"}, "invalid content None: give the file's whole text"),
    ],
)
async def test_bad_arguments_are_one_line_error_results(
    tmp_path: pathlib.Path, name: str, arguments: dict[str, Any], said: str
) -> None:
    (tmp_path / "x").write_text("a\n")
    result = await call(FileTools(tmp_path), name, **arguments)
    assert result.is_error
    assert result.content.startswith(said), result.content
    assert "\n" not in result.content
    assert (tmp_path / "x").read_text() == "a\n"


async def test_files_the_tools_cannot_take_are_error_results(tmp_path: pathlib.Path) -> None:
    files = FileTools(tmp_path)
    (tmp_path / "twice.txt").write_text("x x\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01")
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    (tmp_path / "big.txt").write_bytes(b"x" * (1024 * 1024 + 1))
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    cases = [
        ("edit", {"path": "twice.txt", "old_string": "x", "new_string": "y"}, "occurs 2 times"),
        ("edit", {"path": "missing.txt", "old_string": "x", "new_string": "y"}, "no such file"),
        ("read", {"path": "blob.bin"}, "not UTF-8 text"),
        ("read", {"path": "latin.txt"}, "not UTF-8 text"),
        ("read", {"path": "big.txt"}, "larger than the 1048576 bytes"),
        ("read", {"path": "dir"}, "not a regular file"),
        ("write", {"path": "dir", "content": "x"}, "directory"),
        ("read", {"path": "fifo"}, "not a regular file"),  # never waits for a writer
    ]
    for name, arguments, said in cases:
        result = await call(files, name, **arguments)
        assert result.is_error, (name, arguments)
        assert said in result.content, (said, result.content)
    assert (tmp_path / "twice.txt").read_text() == "x x\n"
    everywhere = await call(
        files, "edit", path="twice.txt", old_string="x", new_string="y", replace_all=True
    )
    assert everywhere.content.endswith("replaced 2 occurrences, the first at line 1")
    assert (tmp_path / "twice.txt").read_text() == "y y\n"


async def test_a_path_outside_the_working_directory_is_refused_and_nothing_is_touched(
    tmp_path: pathlib.Path,
) -> None:
    cwd = tmp_path / "project"
    (cwd / "src").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (cwd / "out").symlink_to(tmp_path)  # a directory inside that leads outside
    (cwd / "leak.txt").symlink_to(secret)
    (cwd / "alias.txt").symlink_to(cwd / "src" / "real.txt")  # inside: allowed
    (cwd / "src" / "real.txt").write_text("real\n")
    files = FileTools(cwd)
    for name, path in [
        ("read", str(secret)),
        ("read", "../secret.txt"),
        ("read", "leak.txt"),
        ("write", "out/secret.txt"),
        ("write", "out/new.txt"),
        ("edit", "src/../../secret.txt"),
    ]:
        arguments = {"path": path, "content": "x", "old_string": "secret", "new_string": "x"}
        if name != "write":
            del arguments["content"]
        if name != "edit":
            del arguments["old_string"], arguments["new_string"]
        result = await call(files, name, **arguments)
        assert result.is_error
        assert result.content == (
            f"path {path!r} is outside the working directory {cwd}: give a path inside it, "
            "or relative to it"
        )
    assert secret.read_text() == "secret\n"
    assert not (tmp_path / "new.txt").exists()
    through = await call(files, "edit", path="alias.txt", old_string="real", new_string="yes")
    assert not through.is_error
    assert through.content.startswith(f"edited {cwd / 'src' / 'real.txt'}:")  # resolved
    assert (cwd / "src" / "real.txt").read_text() == "yes\n"


async def test_edits_of_one_step_do_not_lose_each_other(tmp_path: pathlib.Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"{n}\n" for n in range(20)))
    files = FileTools(tmp_path)

    async def mark(n: int) -> None:
        await call(files, "edit", path="f.txt", old_string=f"\n{n}\n", new_string=f"\n{n}!\n")

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(mark, n)
    assert (tmp_path / "f.txt").read_text().count("!") == 19  # line "0" has no "\n" before it


class MemoryFiles:
    """A `FileAccess` over a dict: the seam a front end fills (an editor's buffers)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    async def read_text(self, path: str) -> str:
        await trio.lowlevel.checkpoint()
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    async def write_text(self, path: str, text: str) -> None:
        await trio.lowlevel.checkpoint()
        self.files[path] = text


async def test_the_access_seam_reads_and_writes_instead_of_the_disk(
    tmp_path: pathlib.Path,
) -> None:
    path = str(tmp_path / "open.py")
    buffers = MemoryFiles({path: "unsaved = True\n"})
    access: FileAccess = buffers
    files = FileTools(tmp_path, access=access)
    assert files.access is access
    assert (await call(files, "read", path="open.py")).content == "     1\tunsaved = True"
    await call(files, "edit", path="open.py", old_string="True", new_string="False")
    assert buffers.files[path] == "unsaved = False\n"
    assert not (tmp_path / "open.py").exists()


async def test_open_agent_gets_the_tools_and_the_details_are_recorded_not_sent(
    tmp_path: pathlib.Path,
) -> None:
    files = FileTools(tmp_path)
    model = ScriptedModel(
        [
            tool_step(("write", {"path": "a.txt", "content": "hello\n"})),
            tool_step(("edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"})),
            reply("done"),
        ]
    )
    async with open_agent(model, tools=files.tools) as agent:
        async with agent.stream("go") as turn:
            await turn.result()
        results = [r.data for r in agent.session.records if r.type == "tool/result"]
    assert (tmp_path / "a.txt").read_text() == "bye\n"
    assert [r["details"]["diff"]["new_text"] for r in results] == ["hello\n", "bye\n"]
    sent = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert [m.content for m in sent] == [r["content"] for r in results]
    assert all("diff" not in m.content for m in sent)


@pytest.mark.parametrize(
    "details",
    [["not", "a", "mapping"], {"x": float("nan")}, {"x": object()}, {1: "int key"}],
)
def test_details_that_are_not_json_data_are_refused_where_the_result_is_made(
    details: Any,
) -> None:
    with pytest.raises(TypeError, match="ToolResult details must be a mapping of JSON data"):
        ToolResult("x", details=details)


async def test_a_directory_swapped_for_a_link_after_the_check_is_not_followed(
    tmp_path: pathlib.Path,
) -> None:
    # The race a command of the session could run: the tools checked `cwd/sub/note.txt`
    # (no link in it), then `sub` became a link to a directory outside before the open.
    cwd, outside = tmp_path / "cwd", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    (outside / "note.txt").write_text("secret")
    (cwd / "sub").symlink_to(outside)
    checked = str(cwd / "sub" / "note.txt")  # what the check resolved, before the swap
    access = LocalFiles()
    followed = r"symbolic links|Not a directory"  # ELOOP or ENOTDIR: the link not followed
    with pytest.raises(OSError, match=followed) as refused:
        await access.read_text(checked)
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
    with pytest.raises(OSError, match=followed):
        await access.write_text(checked, "overwritten")
    with pytest.raises(OSError, match=followed):
        await access.write_text(str(cwd / "sub" / "new" / "made.txt"), "x")
    assert (outside / "note.txt").read_text() == "secret"
    assert sorted(p.name for p in outside.iterdir()) == ["note.txt"]
    # A path with no link in it opens as before, missing directories made on the way.
    await access.write_text(str(cwd / "a" / "b" / "c.txt"), "made")
    assert await access.read_text(str(cwd / "a" / "b" / "c.txt")) == "made"


async def test_hidden_paths_are_refused_and_by_default_the_users_credentials(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("KEY")
    (tmp_path / "private").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / ".aws")  # hidden through a link too
    context = ToolContext("a", "c1", 1, 1)
    read, _, write = FileTools(tmp_path).tools
    for path in (".aws/credentials", "link/credentials"):
        result = await read({"path": path}, context)
        assert isinstance(result, ToolResult)
        assert result.is_error
        assert "hidden from this session's tools" in result.content
    read, _, write = FileTools(tmp_path, hidden=lambda: [str(tmp_path / "private")]).tools
    result = await write({"path": "private/x.txt", "content": "no"}, context)
    assert isinstance(result, ToolResult)
    assert result.is_error
    assert not (tmp_path / "private" / "x.txt").exists()
    # Given its own list, the default's credentials are not in it.
    result = await read({"path": ".aws/credentials"}, context)
    assert isinstance(result, ToolResult)
    assert not result.is_error
