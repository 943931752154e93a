"""Acceptance 5: the single-agent Hypothesis state machine, compared with the reference."""

from __future__ import annotations

from agent_conformance import AgentMachine, check_agent_conformance

TestAgentMachine = AgentMachine.TestCase


def test_check_agent_conformance_runs_against_the_builtin_agent() -> None:
    check_agent_conformance()
