"""Which failed bad starts of the MCP machine's M5 rule a loaded machine explains, and are
tried again with twice the time (D425, D435, D502), and which are the opener's finding."""

from __future__ import annotations

import pytest

from agent_conformance._mcp_launch import BESIDE, BROKEN, BadStart
from agent_conformance._mcp_machine import starved_start
from trio_agents import McpServerError


def _error(server: str, answer: str) -> McpServerError:
    return McpServerError(f"MCP server {server!r}: no answer to {answer} within 1 s", server=server)


@pytest.mark.parametrize("kind", ["silent", "list-silent"])
def test_the_good_server_missing_the_short_timeout_is_a_slow_start(kind: BadStart) -> None:
    assert starved_start(kind, _error(BESIDE, "initialize"))
    assert starved_start(kind, _error(BESIDE, "tools/list"))


def test_the_server_that_answers_initialize_not_answering_it_in_time_is_a_slow_start() -> None:
    # CI's loaded cores: a Python server did not answer initialize within the 1 s timeout.
    assert starved_start("list-silent", _error(BROKEN, "initialize"))


def test_the_findings_a_slow_start_does_not_explain_are_judged() -> None:
    assert not starved_start("list-silent", _error(BROKEN, "tools/list"))  # the right error
    assert not starved_start("silent", _error(BROKEN, "initialize"))  # the right error
    assert not starved_start("list-silent", "hung")  # a block that never ended
    assert not starved_start("list-silent", None)  # a tool set given
    # Without the short timeout of a silent server, the good one has all the time it needs.
    assert not starved_start("exits", _error(BESIDE, "initialize"))
    assert not starved_start("missing", McpServerError("cannot start", server=BESIDE))
