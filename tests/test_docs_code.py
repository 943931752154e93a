"""Every Python block in the README and the docs runs as written (issue 19): a ```python
block is a whole program, run here as a script in an empty directory, and must exit 0. An
API listing or a sketch is fenced ```text instead; a block marked
`<!-- excerpt: PATH -->` is a verbatim excerpt of that file, checked to be in it."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from typing import NamedTuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```$", re.S | re.M)
_EXCERPT = re.compile(r"<!-- excerpt: (?P<path>\S+) -->\n$")


class Block(NamedTuple):
    where: str
    code: str
    excerpt_of: str | None


def blocks() -> list[Block]:
    found: list[Block] = []
    for name in DOCS:
        text = (ROOT / name).read_text()
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[: match.start()]
            marker = _EXCERPT.search(before[-200:])
            found.append(Block(f"{name}:{line}", match["code"], marker["path"] if marker else None))
    return found


def test_every_doc_has_its_blocks_found() -> None:
    where = {block.where.split(":")[0] for block in blocks()}
    assert {"README.md", "docs/contract.md", "docs/conformance.md"} <= where


@pytest.mark.subprocess
@pytest.mark.parametrize("block", blocks(), ids=lambda block: block.where)
def test_the_block_runs_as_written(
    block: Block, tmp_path: pathlib.Path, bwrap: tuple[str | None, str]
) -> None:
    if block.excerpt_of is not None:
        source = (ROOT / block.excerpt_of).read_text()
        assert block.code in source, f"{block.where} is no longer an excerpt of {block.excerpt_of}"
        return
    script = tmp_path / "block.py"
    script.write_text(block.code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
