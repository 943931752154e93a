"""Per-agent options, validated at construction so a bad value fails before anything runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["AgentOptions"]


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """Frozen options of one agent.

    max_steps: a turn that would start step `max_steps + 1` ends `max_steps` instead.
    step_timeout: seconds one step (model call plus its tools) may take; past it the step is
        aborted and the turn ends `aborted` with reason `step-timeout`.
    system_prompt: sent as the first message of every request.
    close_grace: seconds `aclose` waits for the loop to unwind before giving up on it.

    Raises ValueError unless `max_steps` is a positive int or None, `step_timeout` a
    positive finite number or None, and `close_grace` a positive finite number.
    """

    max_steps: int | None = None
    step_timeout: float | None = None
    system_prompt: str | None = None
    close_grace: float = 5.0

    def __post_init__(self) -> None:
        if self.max_steps is not None and not _is_positive_int(self.max_steps):
            raise ValueError(f"max_steps must be a positive int or None, got {self.max_steps!r}")
        for name in ("step_timeout", "close_grace"):
            value: object = getattr(self, name)
            if value is None and name == "step_timeout":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (0 < value < math.inf)
            ):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _is_positive_int(value: object) -> bool:
    # Checked at run time: the annotation does not stop a caller passing 2.5 or True.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
