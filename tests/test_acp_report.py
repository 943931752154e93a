"""The ACP suite's verdicts, requirements and reports, as data (D469-D471): every property
has one requirement of one tier; the verdict is conformant exactly when no ACP MUST failed;
the JSON report holds every requirement; the JUnit report is valid JUnit; the baseline
tells expected failures from stale entries."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
import xmlschema
from PIL import Image

from agent_conformance._acp._properties import (
    ANSWER_UNIQUE,
    EXITS_AT_EOF,
    NO_ORPHANS,
    PROPERTIES,
    QUIET_AFTER_CANCEL,
    SCHEMA_VALID,
    SESSIONS_LISTED,
)
from agent_conformance._acp._report import (
    json_report,
    junit_xml,
    read_baseline,
    summarize,
)
from agent_conformance._acp._report_html import html_report
from agent_conformance._acp._requirements import (
    REQUIREMENTS,
    TIERS,
    by_property,
    select,
    selector_problem,
)
from agent_conformance._properties import Property
from agent_conformance._verdicts import Finding, Verdict, decide
from tests.support.browser import screenshot
from tests.support.junit_schema import junit_schema_path


def _finding(prop: Property | None, text: str = "what happened") -> Finding:
    label = f"{prop.rule} ({prop.name})" if prop is not None else "crash"
    return Finding(
        prop,
        f"{label}: {text}\n  the contract: ...",
        ("state.new_session()", "state.check()"),
        "state = ...\n",
        ('> {"jsonrpc":"2.0","id":1}', '< {"jsonrpc":"2.0","id":1,"result":{}}'),
        "Traceback: \x1b[31mred\x00 and a NUL",
    )


def _verdicts(failed: Sequence[Property] = (), **kw: object) -> tuple[Verdict, ...]:
    checks = {p.name: 3 for p in PROPERTIES}
    return decide(
        PROPERTIES,
        checks=checks,
        findings=[_finding(p) for p in failed],
        **kw,  # type: ignore[arg-type]
    )


def test_every_property_has_one_requirement_with_a_tier_and_a_clause() -> None:
    reqs = by_property()
    assert set(reqs) == {p.name for p in PROPERTIES}
    assert len(REQUIREMENTS) == len(PROPERTIES)
    ids = [r.id for r in REQUIREMENTS]
    assert len(set(ids)) == len(ids)
    for req in REQUIREMENTS:
        assert re.fullmatch(r"TA-[A-Z][A-Z0-9]*-\d{3}", req.id), req.id
        assert req.tier in TIERS
        assert req.clause
        assert req.quote
        for tck in req.tck:
            assert re.fullmatch(r"ACP-[A-Z]+(-[A-Z]+)?-\d{3}", tck), tck
    # Each tier is used; what only JSON-RPC asks for is set apart.
    assert {r.tier for r in REQUIREMENTS} == set(TIERS)
    assert {r.property for r in REQUIREMENTS if r.source == "json-rpc"} == {
        "answer-unique",
        "malformed-answered",
    }


def test_outcomes_from_what_a_run_counted() -> None:
    verdicts = decide(
        [SCHEMA_VALID, EXITS_AT_EOF, NO_ORPHANS, SESSIONS_LISTED, QUIET_AFTER_CANCEL],
        checks={SCHEMA_VALID.name: 5, EXITS_AT_EOF.name: 2, QUIET_AFTER_CANCEL.name: 1},
        findings=[_finding(EXITS_AT_EOF)],
        again={EXITS_AT_EOF.name: 4},
        inapplicable={SESSIONS_LISTED.name: "sessionCapabilities.list not advertised"},
        skipped={QUIET_AFTER_CANCEL.name},
    )
    got = {v.property.name: (v.outcome, v.checks, v.again) for v in verdicts}
    assert got == {
        "schema-valid": ("passed", 5, 0),
        "exits-at-eof": ("failed", 2, 4),
        "no-orphans": ("not reached", 0, 0),
        "sessions-listed-once": ("not applicable", 0, 0),
        "quiet-after-cancel": ("skipped", 1, 0),
    }


def test_conformant_exactly_when_no_acp_must_failed() -> None:
    # SHOULD, INFO and JSON-RPC-only failures leave the agent conformant, and say so.
    mild = summarize(_verdicts([EXITS_AT_EOF, NO_ORPHANS, ANSWER_UNIQUE]))
    assert mild.conformant
    assert mild.failed_by_tier == {"SHOULD": ("TA-PROC-001",), "INFO": ("TA-PROC-002",)}
    assert mild.json_rpc_failed == ("TA-RPC-002",)
    assert mild.headline.startswith("CONFORMANT; 1 SHOULD failed (TA-PROC-001)")
    assert "JSON-RPC strictness failed (TA-RPC-002)" in mild.headline
    bad = summarize(_verdicts([SCHEMA_VALID, EXITS_AT_EOF]))
    assert not bad.conformant
    assert bad.headline == "NOT CONFORMANT: 1 MUST requirement(s) failed (TA-TRANSPORT-001)"


def test_a_baseline_expects_failures_and_goes_stale_when_one_passes() -> None:
    text = "# known\nTA-TRANSPORT-001   # the banner\nexits-at-eof\n\nP13\n"
    with pytest.raises(ValueError, match=r"base\.txt:5: 'P13' names no requirement"):
        read_baseline("base.txt", text, PROPERTIES)
    baseline = read_baseline("base.txt", text.replace("P13", "P6"), PROPERTIES)
    # P6 names both exits-at-eof and no-orphans.
    assert baseline.properties == {"schema-valid", "exits-at-eof", "no-orphans"}
    summary = summarize(_verdicts([SCHEMA_VALID, EXITS_AT_EOF, QUIET_AFTER_CANCEL]), baseline)
    assert set(summary.expected) == {"schema-valid", "exits-at-eof"}
    assert summary.unexpected == ("quiet-after-cancel",)
    assert summary.stale == ("no-orphans",)  # listed, and it passed
    fresh = summarize(_verdicts([SCHEMA_VALID, EXITS_AT_EOF, NO_ORPHANS]), baseline)
    assert not fresh.stale
    assert not fresh.unexpected


def test_selectors_name_properties_rules_requirements_and_tiers() -> None:
    assert select(["P6"], PROPERTIES) == {"exits-at-eof", "no-orphans"}
    assert select(["ta-proc-001", "schema-valid"], PROPERTIES) == {"exits-at-eof", "schema-valid"}
    assert select(["info"], PROPERTIES) == {r.property for r in REQUIREMENTS if r.tier == "INFO"}
    problem = selector_problem(["P6", "nonsense"], PROPERTIES)
    assert problem is not None
    assert problem.startswith("'nonsense' names no property")


def test_the_json_report_holds_every_requirement_and_each_finding() -> None:
    verdicts = _verdicts([SCHEMA_VALID])
    doc = json.loads(
        json_report(verdicts, summarize(verdicts), {"seed": 1, "agent_command": ["x"]})
    )
    assert doc["format"] == "trio-agents-acp-report/1"
    assert doc["seed"] == 1
    assert doc["verdict"]["conformant"] is False
    rows = {row["id"]: row for row in doc["requirements"]}
    assert set(rows) == {r.id for r in REQUIREMENTS}
    failed = rows["TA-TRANSPORT-001"]
    assert failed["outcome"] == "failed"
    assert failed["tier"] == "MUST"
    assert failed["finding"]["transcript"][0].startswith("> ")
    assert failed["finding"]["steps"] == ["state.new_session()", "state.check()"]
    assert rows["TA-PROC-001"]["outcome"] == "passed"
    assert rows["TA-PROC-001"]["finding"] is None


def test_the_junit_report_is_valid_junit() -> None:
    schema = xmlschema.XMLSchema(str(junit_schema_path()))
    verdicts = decide(
        PROPERTIES,
        checks={p.name: 1 for p in PROPERTIES if p is not NO_ORPHANS},
        findings=[_finding(SCHEMA_VALID), _finding(EXITS_AT_EOF)],
        inapplicable={SESSIONS_LISTED.name: "not advertised"},
    )
    text = junit_xml(verdicts, 12.5, expected=["exits-at-eof"])
    schema.validate(text)  # raises on an invalid document
    assert 'failures="1"' in text
    assert f'tests="{len(PROPERTIES)}"' in text
    assert "\x00" not in text
    assert "\x1b" not in text
    assert text.count("<failure ") == 1
    assert "expected: in the baseline" in text
    # A report with nothing failed is valid too.
    schema.validate(junit_xml(_verdicts(), 1.0))


def test_the_html_report_is_one_page_with_the_table_and_each_failure() -> None:
    verdicts = _verdicts([SCHEMA_VALID, EXITS_AT_EOF])
    page = html_report(
        verdicts,
        summarize(verdicts),
        {"seed": 7, "agent_command": ["agent", "<x>"], "agent_info": {"name": "a&b"}},
    )
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page
    assert page.count("<tr class=") == len(PROPERTIES)
    assert "a&amp;b" in page
    assert "agent &lt;x&gt;" in page
    # Numbered in the table's order (the catalogue's).
    assert '<section id="f-exits-at-eof"><h3>1. ' in page
    assert '<section id="f-schema-valid"><h3>2. ' in page
    assert "\x00" not in page
    assert "\x1b" not in page
    assert "NOT CONFORMANT" in page


def test_a_headless_browser_shows_the_table_and_each_failure(tmp_path: Path) -> None:
    # As a person opens it: Chromium renders the page; the DOM it built holds the table
    # with a row per requirement, and the screenshot shows rows in the failed and the
    # passed colours (a page that did not render, or a table hidden by a style, does not).
    verdicts = _verdicts([SCHEMA_VALID, EXITS_AT_EOF])
    page = tmp_path / "report.html"
    page.write_text(
        html_report(
            verdicts,
            summarize(verdicts),
            {"seed": 7, "agent_command": ["agent"], "profile": "ci", "examples": 20},
        )
    )
    png = tmp_path / "report.png"
    dom = screenshot(page, png, size="1400,5000")  # the whole page, failures included
    rows = re.findall(r'<tr class="([a-z-]+)">', dom)
    assert len(rows) == len(PROPERTIES)
    assert rows.count("failed") == 2
    assert dom.count('<section id="f-') == 2
    with Image.open(png) as shot:
        rgb = shot.convert("RGB")
        pixels = Counter(
            rgb.getpixel((x, y)) for x in range(0, rgb.width, 2) for y in range(0, rgb.height, 2)
        )

    def near(colour: tuple[int, int, int]) -> int:
        total = 0
        for pixel, n in pixels.items():
            assert isinstance(pixel, tuple)
            if all(abs(int(a) - b) < 40 for a, b in zip(pixel, colour, strict=True)):
                total += n
        return total

    # Every second pixel each way: a quarter of the page's pixels.
    assert near((0xB0, 0x00, 0x20)) > 12, "no failed outcome drawn"  # td.o of a failed row
    assert near((0x17, 0x80, 0x3D)) > 12, "no passed outcome drawn"
    assert near((0xFD, 0xE4, 0xE4)) > 250, "no NOT CONFORMANT banner drawn"
