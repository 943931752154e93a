"""The contract lives in the repository.

Every rule id cited anywhere (A1-A11, F1-F3, L1-L6, S1-S5, also inside test names such as
`test_A6_...`) is defined in docs/contract.md, every decision cited (D14, D24a) exists in
docs/design.md, every `contract.md#anchor` names a heading there, and no file points at a
document outside the repository.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "contract.md"
DESIGN = ROOT / "docs" / "design.md"
THIS = pathlib.Path(__file__).resolve()

# A rule id is a group letter and a number standing alone: not part of a word, a number or
# a name ("SHA1", "0xA6", "A6b", "S3_BUCKET"); in a test name it sits between underscores
# (`test_S4_a_...`).
RULE = re.compile(
    r"(?<![A-Za-z0-9_])([AFLMOPSV])([1-9][0-9]*)(?![A-Za-z0-9_])|(?<=test_)([AFLMOPSV])([1-9][0-9]*)(?=_)"
)
DECISION = re.compile(r"(?<![A-Za-z0-9])D([1-9][0-9]*)([a-z]?)(?![A-Za-z0-9])")
# "A1-A11", "S2-S5", "D22-D28": a range cites every id in it.
RANGE = re.compile(
    r"(?<![A-Za-z0-9])([AFLMOPSVD])([1-9][0-9]*)\s*[-\u2013]\s*\1?([1-9][0-9]*)(?![A-Za-z0-9])"
)
RULE_DEFINITION = re.compile(r"^- \*\*([AFLMOPSV][1-9][0-9]*)\.\*\*", re.M)
DECISION_DEFINITION = re.compile(r"^\*\*(D[1-9][0-9]*[a-z]?)\.", re.M)
ANCHOR = re.compile(r"contract\.md#([A-Za-z0-9_-]+)")

# What points outside the repository: the shared directory the project was started from,
# the contract's first draft there, the upstream spec and the original design documents,
# and the ids those documents define (requirements R1.., invariants G1..).
OUTSIDE = [
    (re.compile(r"\.\./shared|/work/shared|shared/(?:design|spec|seeds|hooks)"), "a path"),
    (re.compile(r"\bAPI\.md\b"), "the first draft of the contract"),
    (re.compile(r"(?<![\w./-])(?:spec|seeds)/"), "a directory"),
    (re.compile(r"\b(?:agent-core|ecosystem|shell-and-acp|style-anchors)\.md\b"), "the spec"),
    (re.compile(r"\bseed \d{3}\b"), "an original design document"),
    (re.compile(r"(?<![A-Za-z0-9])[RG][1-9][0-9]?(?![A-Za-z0-9])"), "an id of the spec"),
]


def text_files() -> list[pathlib.Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for top in ("trio_agents", "tests", "examples", "benchmarks"):
        files += sorted(p for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".mjs"})
    # This file's own examples of what the patterns must and must not match are not
    # citations.
    return [path for path in files if path.resolve() != THIS]


def lines() -> Iterator[tuple[str, int, str]]:
    for path in text_files():
        where = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text().splitlines(), 1):
            yield where, number, line


def cited(line: str) -> set[str]:
    """The rule and decision ids a line cites, ranges expanded."""
    ids = {"".join(groups) for groups in RULE.findall(line)}
    ids |= {f"D{number}{suffix}" for number, suffix in DECISION.findall(line)}
    for letter, first, last in RANGE.findall(line):
        ids |= {f"{letter}{n}" for n in range(int(first), int(last) + 1)}
    return ids


def defined(pattern: re.Pattern[str], path: pathlib.Path) -> set[str]:
    ids = pattern.findall(path.read_text())
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"{path.relative_to(ROOT)} defines {', '.join(duplicates)} twice"
    return set(ids)


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s", "-", text)


def test_every_cited_rule_and_decision_is_defined() -> None:
    rules = defined(RULE_DEFINITION, CONTRACT)
    decisions = defined(DECISION_DEFINITION, DESIGN)
    assert rules, "docs/contract.md defines no rule (a line starting `- **A1.**`)"
    problems: list[str] = []
    for where, number, line in lines():
        for rule in sorted(cited(line)):
            if rule.startswith("D"):
                if rule not in decisions:
                    problems.append(f"{where}:{number}: {rule} is not a decision in design.md")
            elif rule not in rules:
                problems.append(f"{where}:{number}: rule {rule} is not defined in contract.md")
    assert not problems, "\n".join(problems)


def test_every_anchor_into_the_contract_names_one_of_its_headings() -> None:
    headings = {
        slug(line.lstrip("#"))
        for line in CONTRACT.read_text().splitlines()
        if re.match(r"#{1,6} ", line)
    }
    problems = [
        f"{where}:{number}: contract.md#{anchor} is not a heading of docs/contract.md"
        for where, number, line in lines()
        for anchor in ANCHOR.findall(line)
        if anchor not in headings
    ]
    assert not problems, "\n".join(problems)


def test_nothing_points_outside_the_repository() -> None:
    problems = [
        f"{where}:{number}: {match.group(0)!r} refers to {what} outside the repository; "
        "cite docs/contract.md (a rule id or a section) instead"
        for where, number, line in lines()
        for pattern, what in OUTSIDE
        for match in pattern.finditer(line)
    ]
    assert not problems, "\n".join(problems)


NO_IDS: set[str] = set()


@pytest.mark.parametrize(
    ("line", "ids"),
    [
        ("async def test_S4_a_notice_for_an_owner_that_is_gone() -> None:", {"S4"}),
        ("def test_A10_delivery_to_a_closed_agent_raises():", {"A10"}),
        ("rules L1-L6 of the contract", {f"L{n}" for n in range(1, 7)}),
        ("(A5, A6) and D22-D28, D24a", {"A5", "A6", "D24a", *(f"D{n}" for n in range(22, 29))}),
        ("sha1 0xA6 SHA1 S1x A6b UTF8 utf-8 F1F2 mode 0700 bash-1 m1 call-1", NO_IDS),
        ("a1b2c3d4 DEADBEEF XDG_DATA_HOME SIGKILL S3_BUCKET", NO_IDS),
    ],
)
def test_the_id_pattern_finds_citations_and_nothing_else(line: str, ids: set[str]) -> None:
    assert cited(line) == ids


def test_the_contract_is_binding_and_says_how_it_changes() -> None:
    head = CONTRACT.read_text()[:1500]
    assert "binding" in head
    assert "docs/design.md" in head
    assert "new id" in head


def test_the_contract_names_every_public_name() -> None:
    """What is public is what the contract names (D50): every name a namespace exports."""
    import agent_conformance
    import trio_agents
    import trio_agents.acp
    import trio_agents.testing

    text = (ROOT / "docs" / "contract.md").read_text()
    unnamed = [
        f"{module.__name__}.{name}"
        for module in (trio_agents, trio_agents.acp, trio_agents.testing, agent_conformance)
        for name in module.__all__
        if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text)
    ]
    assert unnamed == [], "name these in docs/contract.md"


def test_the_design_opens_with_a_topic_index_that_reaches_every_decision() -> None:
    """docs/design.md is read by topic (issue 33): its index links to headings that exist,
    and names every decision, so each can be found from the index."""
    text = DESIGN.read_text()
    index = re.search(r"^## Topic index\n(.*?)^## ", text, re.S | re.M)
    assert index, "docs/design.md has no '## Topic index' section"
    headings = {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}
    broken = [a for a in re.findall(r"\]\(#([^)]+)\)", index.group(1)) if a not in headings]
    assert broken == []
    listed = {i for line in index.group(1).splitlines() for i in cited(line) if i[0] == "D"}
    assert defined(DECISION_DEFINITION, DESIGN) - listed == set(), "add these to the index"
