"""Issue 3 acceptance 4: the lifecycle Hypothesis state machine."""

from __future__ import annotations

from agent_conformance._lifecycle_machine import LifecycleMachine

TestLifecycleMachine = LifecycleMachine.TestCase
