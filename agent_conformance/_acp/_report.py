"""What an ACP run's reports say, as data: the verdict (conformant or not, by tier), the
JSON report, the JUnit XML and the expected-failure baseline (D471). The HTML report is in
`_report_html`.

A baseline lists the requirements an agent is known to fail, one per line (a requirement
id, a property name or a rule id; `#` starts a comment). A listed failure does not fail the
run; a listed requirement that now passes makes the baseline stale, which does: the list is
kept true, as MCP's conformance suite keeps its own.

A pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from .._properties import Property
from .._verdicts import Finding, Verdict
from ._requirements import Requirement, by_property

__all__ = [
    "Baseline",
    "Summary",
    "json_report",
    "junit_xml",
    "read_baseline",
    "summarize",
]


@dataclass(frozen=True)
class Baseline:
    """An expected-failure list, read from `path`.

    entries: each line's selector, as written (a requirement id, property name or rule).
    properties: the property names they name.
    """

    path: str
    entries: tuple[str, ...]
    properties: frozenset[str]


def read_baseline(path: str, text: str, properties: Sequence[Property]) -> Baseline:
    """Parse a baseline file's `text`; raises ValueError naming the line of an entry that
    names no requirement of the suite."""
    reqs = by_property()
    entries: list[str] = []
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        found = {
            prop.name
            for prop in properties
            if entry in (prop.name, prop.rule)
            or (prop.name in reqs and entry.upper() == reqs[prop.name].id)
        }
        if not found:
            raise ValueError(
                f"{path}:{number}: {entry!r} names no requirement of the ACP suite; write a "
                "requirement id (TA-RPC-003), a property name (malformed-answered) or a rule "
                "id (P5), one per line"
            )
        entries.append(entry)
        names |= found
    return Baseline(path, tuple(entries), frozenset(names))


@dataclass(frozen=True)
class Summary:
    """The run's verdict.

    conformant: every applicable MUST of the ACP spec held (none failed).
    counts: outcome -> how many properties.
    failed_by_tier: tier -> the requirement ids that failed (ACP-sourced).
    json_rpc_failed: the requirement ids of JSON-RPC-only strictness that failed.
    must_unreached: the ids of MUST requirements no example reached.
    expected: failures the baseline lists.
    unexpected: failures it does not list.
    stale: baseline entries (property names) that passed.
    """

    conformant: bool
    counts: Mapping[str, int]
    failed_by_tier: Mapping[str, tuple[str, ...]]
    json_rpc_failed: tuple[str, ...]
    must_unreached: tuple[str, ...]
    expected: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()

    @property
    def headline(self) -> str:
        """One line: CONFORMANT or NOT CONFORMANT, and why."""
        must = self.failed_by_tier.get("MUST", ())
        if not self.conformant:
            return f"NOT CONFORMANT: {len(must)} MUST requirement(s) failed ({', '.join(must)})"
        extra: list[str] = []
        for tier in ("SHOULD", "INFO"):
            ids = self.failed_by_tier.get(tier, ())
            if ids:
                extra.append(f"{len(ids)} {tier} failed ({', '.join(ids)})")
        if self.json_rpc_failed:
            extra.append(f"JSON-RPC strictness failed ({', '.join(self.json_rpc_failed)})")
        if self.must_unreached:
            extra.append(f"{len(self.must_unreached)} MUST not reached")
        return "CONFORMANT" + (f"; {'; '.join(extra)}" if extra else "")


def summarize(verdicts: Sequence[Verdict], baseline: Baseline | None = None) -> Summary:
    """The verdict of a run from its properties' verdicts (and the baseline, if any)."""
    reqs = by_property()
    counts = Counter[str](v.outcome for v in verdicts)
    failed: dict[str, list[str]] = {}
    json_rpc: list[str] = []
    unreached: list[str] = []
    for v in verdicts:
        req = reqs[v.property.name]
        if v.outcome == "failed":
            if req.source == "json-rpc":
                json_rpc.append(req.id)
            else:
                failed.setdefault(req.tier, []).append(req.id)
        elif v.outcome == "not reached" and req.tier == "MUST" and req.source == "acp":
            unreached.append(req.id)
    expected: list[str] = []
    unexpected: list[str] = []
    stale: list[str] = []
    listed = baseline.properties if baseline is not None else frozenset[str]()
    for v in verdicts:
        if v.outcome == "failed":
            (expected if v.property.name in listed else unexpected).append(v.property.name)
        elif v.outcome == "passed" and v.property.name in listed:
            stale.append(v.property.name)
    return Summary(
        not failed.get("MUST"),
        dict(counts),
        {tier: tuple(ids) for tier, ids in failed.items()},
        tuple(json_rpc),
        tuple(unreached),
        tuple(expected),
        tuple(unexpected),
        tuple(stale),
    )


def _finding(finding: Finding) -> dict[str, Any]:
    return {
        "message": finding.message,
        "steps": list(finding.steps),
        "script": finding.script,
        "transcript": list(finding.transcript),
        "stderr": finding.stderr,
        "shrunk": finding.shrunk,
        "replayed": finding.replayed,
    }


def _requirement(req: Requirement) -> dict[str, Any]:
    return {
        "id": req.id,
        "tier": req.tier,
        "source": req.source,
        "clause": req.clause,
        "quote": req.quote,
        "capability": req.capability or None,
        "acp_tck": list(req.tck),
    }


def json_report(
    verdicts: Sequence[Verdict],
    summary: Summary,
    run: Mapping[str, Any],
    crash: Finding | None = None,
) -> str:
    """The JSON report: `run` (the command, agent, seed, profile, times, examples) and, per
    requirement, its outcome and any finding; `crash`: a failure that is no property's (the
    agent could not be started or configured)."""
    reqs = by_property()
    rows: list[dict[str, Any]] = []
    for v in verdicts:
        row = _requirement(reqs[v.property.name])
        row.update(
            property=v.property.name,
            rule=v.property.rule,
            says=v.property.says,
            outcome=v.outcome,
            checks=v.checks,
            again=v.again,
            why=v.why or None,
            finding=_finding(v.finding) if v.finding is not None else None,
        )
        rows.append(row)
    document = {
        "format": "trio-agents-acp-report/1",
        **run,
        "verdict": {
            "conformant": summary.conformant,
            "headline": summary.headline,
            "counts": dict(summary.counts),
            "failed_by_tier": {k: list(v) for k, v in summary.failed_by_tier.items()},
            "json_rpc_failed": list(summary.json_rpc_failed),
            "must_not_reached": list(summary.must_unreached),
            "baseline": {
                "expected": list(summary.expected),
                "unexpected": list(summary.unexpected),
                "stale": list(summary.stale),
            },
        },
        "crash": _finding(crash) if crash is not None else None,
        "requirements": rows,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _details(finding: Finding) -> str:
    parts = [finding.message]
    if finding.script:
        parts += ["", "reproduction:", finding.script]
    if finding.transcript:
        parts += ["", "the wire, its last frames:", *finding.transcript]
    if finding.stderr:
        parts += ["", "the agent's stderr, its end:", finding.stderr]
    parts += ["", finding.shrunk + ("" if finding.replayed else "; did not replay")]
    return _xml_text("\n".join(parts))


def _xml_text(text: str) -> str:
    # XML 1.0 cannot carry most control characters, even escaped: an agent's stderr may.
    return "".join(
        ch if ch in "\t\n\r" or (" " <= ch <= "\ud7ff") or ("\ue000" <= ch <= "\ufffd") else "?"
        for ch in text
    )


def junit_xml(
    verdicts: Sequence[Verdict], seconds: float, name: str = "acp", expected: Iterable[str] = ()
) -> str:
    """JUnit XML: one testsuite, a testcase per requirement (classname: the tier), a
    `failure` for each failed one not `expected` by the baseline, `skipped` for the rest
    that did not pass (with why)."""
    reqs = by_property()
    allowed = set(expected)
    failures = sum(1 for v in verdicts if v.outcome == "failed" and v.property.name not in allowed)
    skipped = sum(
        1
        for v in verdicts
        if v.outcome != "passed" and not (v.outcome == "failed" and v.property.name not in allowed)
    )
    suites = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(len(verdicts)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{seconds:.3f}",
    )
    for v in verdicts:
        req = reqs[v.property.name]
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=f"{name}.{req.tier}" + (".json-rpc" if req.source == "json-rpc" else ""),
            name=f"{req.id} {v.property.name} ({v.property.rule})",
            time="0",
        )
        if v.outcome == "failed" and v.finding is not None:
            if v.property.name in allowed:
                ElementTree.SubElement(case, "skipped", message="expected: in the baseline")
            else:
                failure = ElementTree.SubElement(
                    case, "failure", message=_xml_text(v.finding.headline), type="violation"
                )
                failure.text = _details(v.finding)
        elif v.outcome != "passed":
            ElementTree.SubElement(case, "skipped", message=f"{v.outcome}: {v.why}")
    ElementTree.indent(suites)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
