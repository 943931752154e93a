"""The catalogue in docs/conformance.md ties every rule of docs/contract.md to the named
properties that check it and to the seeded defects that prove those properties can fail."""

from __future__ import annotations

import pathlib
import re

from agent_conformance import PROPERTIES
from agent_conformance._properties import catalogue_problems

from .support.acp_defects import ACP_SEEDED, AcpSeeded
from .support.chat_defects import CHAT_SEEDED, ChatSeeded
from .support.known_bad import SEEDED as _MACHINE_SEEDED
from .support.known_bad import Seeded

# The ACP and chat machines' seeded defects are commands (tests/test_acp_conformance.py,
# tests/test_chat_machine.py).
SEEDED: tuple[Seeded | AcpSeeded | ChatSeeded, ...] = (*_MACHINE_SEEDED, *ACP_SEEDED, *CHAT_SEEDED)

DOCS = pathlib.Path(__file__).parent.parent / "docs"
RULE = re.compile(r"^- \*\*([A-Z][0-9]+)\.\*\*", re.MULTILINE)
HEADER = "| Rule | Property | Machine | Seeded defect |"
PROCESS_HEADER = "| Rule | Checked by |"
ROOT = DOCS.parent


def process_checked() -> dict[str, str]:
    """The rules docs/conformance.md says process tests check instead of a machine (D172):
    rule -> the test (`path::function`)."""
    found: dict[str, str] = {}
    in_table = False
    for line in (DOCS / "conformance.md").read_text().splitlines():
        if line.strip() == PROCESS_HEADER:
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if in_table and not line.startswith("|---"):
            rule, test = (cell.strip().strip("`") for cell in line.strip().strip("|").split("|"))
            found[rule] = test
    return found


def contract_rules() -> list[str]:
    """The rules a machine must check: every rule but those process tests check."""
    rules = RULE.findall((DOCS / "contract.md").read_text())
    return [rule for rule in rules if rule not in process_checked()]


def test_every_rule_checked_by_process_tests_names_a_test_that_exists() -> None:
    every = set(RULE.findall((DOCS / "contract.md").read_text()))
    checked = process_checked()
    assert len(checked) >= 8
    machine_rules = {p.rule for p in PROPERTIES}
    for rule, test in checked.items():
        assert rule in every, f"{rule} is not a rule of the contract"
        assert rule not in machine_rules, f"{rule} has a property: list it in the catalogue"
        path, _, function = test.partition("::")
        source = (ROOT / path).read_text()
        assert re.search(rf"^(async )?def {function}\(", source, re.M), test


def catalogue_rows() -> list[tuple[str, str, str, frozenset[str]]]:
    """The rows of every catalogue table: (rule, property, machine, seeded defects)."""
    text = (DOCS / "conformance.md").read_text()
    rows: list[tuple[str, str, str, frozenset[str]]] = []
    in_table = False
    for line in text.splitlines():
        if line.strip() == HEADER:
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if set(cells[0]) <= {"-", ":"}:
            continue
        rule, name, machine, defects = cells[:4]
        seeded = frozenset(d.strip().strip("`") for d in defects.split(",")) - {"—", ""}
        rows.append((rule, name, machine, seeded))
    return rows


def test_the_contract_has_rules() -> None:
    assert len(contract_rules()) >= 25


def test_every_rule_has_a_property_and_names_are_unique() -> None:
    assert catalogue_problems(PROPERTIES, contract_rules()) == []


def test_the_documented_catalogue_is_the_machines_catalogue() -> None:
    documented = {(rule, name, machine) for rule, name, machine, _ in catalogue_rows()}
    checked = {(p.rule, p.name, p.machine) for p in PROPERTIES}
    assert documented - checked == set(), "documented but no machine checks it"
    assert checked - documented == set(), "checked but not in docs/conformance.md"


def test_every_seeded_defect_names_a_property_of_its_machine() -> None:
    by_name = {p.name: p for p in PROPERTIES}
    for seeded in SEEDED:
        prop = by_name.get(seeded.property)
        assert prop is not None, f"{seeded.name}: no property {seeded.property!r}"
        assert prop.machine == seeded.machine, f"{seeded.name}: {prop} is not of {seeded.machine}"
        for other in seeded.also:
            assert other in by_name, f"{seeded.name}: no property {other!r}"
            assert by_name[other].machine == prop.machine, f"{seeded.name}: {other} is elsewhere"
    assert len({s.name for s in SEEDED}) == len(SEEDED), "a seeded defect's name is used twice"


def test_the_documented_defects_are_the_seeded_defects() -> None:
    documented = {(name, defect) for _, name, _, defects in catalogue_rows() for defect in defects}
    seeded = {(s.property, s.name) for s in SEEDED}
    assert documented == seeded


def test_every_rule_has_a_seeded_defect() -> None:
    rule_of = {p.name: p.rule for p in PROPERTIES}
    proven = {rule_of[s.property] for s in SEEDED if s.property in rule_of}
    assert [rule for rule in contract_rules() if rule not in proven] == []
