"""Issue 3 acceptance 4: the lifecycle Hypothesis state machine."""

from __future__ import annotations

from trio_agents.testing._lifecycle_machine import LifecycleMachine

TestLifecycleMachine = LifecycleMachine.TestCase
