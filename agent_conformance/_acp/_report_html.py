"""The HTML report of an ACP run: one self-contained page (no script, no fetch), a table of
the requirements with their outcome, and per failure the program that shows it, the wire
transcript and the end of the agent's stderr (D471).

A pure module: no trio, no Hypothesis.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from .._verdicts import Finding, Verdict
from ._report import Summary
from ._requirements import by_property

__all__ = ["html_report"]

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em; color: #1d1d1f; }
h1 { font-size: 1.4em; margin-bottom: .2em; }
.verdict { font-size: 1.15em; font-weight: 600; padding: .5em .8em; border-radius: 4px; }
.yes { background: #e3f6e8; } .no { background: #fde4e4; }
table { border-collapse: collapse; margin: 1em 0; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: .35em .6em; text-align: left;
  vertical-align: top; }
th { background: #f4f4f6; }
td.o { font-weight: 600; white-space: nowrap; }
tr.failed td.o { color: #b00020; } tr.passed td.o { color: #17803d; }
tr.expected td.o { color: #a15c00; }
td.o a { color: inherit; }
td.o, td.id, td.tier { font-family: ui-monospace, monospace; }
pre { background: #f6f6f8; padding: .6em; overflow-x: auto; white-space: pre-wrap;
  word-break: break-all; font-size: 12px; }
.meta { color: #555; }
"""


def _e(text: object) -> str:
    # An agent's stderr may hold terminal escapes and NULs: shown as U+FFFD.
    shown = "".join(ch if ch >= " " or ch in "\t\n\r" else "\ufffd" for ch in str(text))
    return html.escape(shown, quote=True)


def _finding(index: int, name: str, finding: Finding) -> list[str]:
    parts = [
        f'<section id="f-{_e(name)}"><h3>{index}. {_e(finding.headline)}</h3>',
        f"<pre>{_e(finding.message)}</pre>",
        f'<p class="meta">{_e(finding.shrunk)}'
        + ("" if finding.replayed else "; it did not replay")
        + "</p>",
    ]
    if finding.script:
        parts.append(f"<h4>Reproduction</h4><pre>{_e(finding.script)}</pre>")
    elif finding.steps:
        parts.append(f"<h4>Program</h4><pre>{_e(chr(10).join(finding.steps))}</pre>")
    if finding.transcript:
        parts.append(
            "<h4>The wire, its last frames (&gt; sent, &lt; received)</h4>"
            f"<pre>{_e(chr(10).join(finding.transcript))}</pre>"
        )
    if finding.stderr:
        parts.append(f"<h4>The agent's stderr, its end</h4><pre>{_e(finding.stderr)}</pre>")
    parts.append("</section>")
    return parts


def html_report(
    verdicts: Sequence[Verdict],
    summary: Summary,
    run: Mapping[str, Any],
    crash: Finding | None = None,
) -> str:
    """The page, as text."""
    reqs = by_property()
    agent: Mapping[str, Any] = run.get("agent_info") or {}
    who = " ".join(str(agent.get(k, "")) for k in ("name", "version")).strip() or "the agent"
    command = " ".join(str(part) for part in run.get("agent_command", ()))
    rows: list[str] = []
    failures: list[str] = []
    expected = set(summary.expected)
    found = 0
    for v in verdicts:
        req = reqs[v.property.name]
        outcome: str = v.outcome
        css = outcome.replace(" ", "-")
        if outcome == "failed" and v.property.name in expected:
            outcome, css = "failed (expected)", "expected"
        shown = _e(outcome)
        if v.finding is not None:
            shown = f'<a href="#f-{_e(v.property.name)}">{shown}</a>'
            found += 1
            failures += _finding(found, v.property.name, v.finding)
        source = " (JSON-RPC)" if req.source == "json-rpc" else ""
        rows.append(
            f'<tr class="{css}"><td class="id">{_e(req.id)}</td>'
            f'<td class="tier">{_e(req.tier)}{source}</td>'
            f"<td>{_e(v.property.name)} ({_e(v.property.rule)})<br>"
            f'<span class="meta">{_e(v.property.says)}</span></td>'
            f'<td>{_e(req.clause)}<br><span class="meta">{_e(req.quote)}</span></td>'
            f'<td class="o">{shown}</td><td>{v.checks}</td><td>{_e(v.why)}</td></tr>'
        )
    crashed = _finding(0, "crash", crash)[1:-1] if crash is not None else []
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>ACP conformance: {_e(who)}</title>",
            f"<style>{_STYLE}</style></head><body>",
            f"<h1>ACP conformance: {_e(who)}</h1>",
            f'<p class="meta">{_e(command)}<br>seed {_e(run.get("seed"))}, profile '
            f"{_e(run.get('profile'))}, {_e(run.get('examples'))} examples, "
            f"{float(run.get('seconds', 0.0)):.1f} s; trio-agents {_e(run.get('version'))}</p>",
            f'<p class="verdict {"yes" if summary.conformant else "no"}">'
            f"{_e(summary.headline)}</p>",
            *(["<h2>The run ended early</h2>", *crashed] if crashed else []),
            '<table id="requirements"><thead><tr><th>Requirement</th><th>Tier</th>'
            "<th>Property</th><th>Clause</th><th>Outcome</th><th>Checks</th><th>Why</th>"
            "</tr></thead><tbody>",
            *rows,
            "</tbody></table>",
            *(["<h2>Failures</h2>", *failures] if failures else []),
            "</body></html>",
            "",
        ]
    )
