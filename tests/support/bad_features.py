"""A target module whose feature declaration cannot be: importing it raises ValueError."""

from __future__ import annotations

from agent_conformance import Features

from .variants import NoSteer, factory_for

factory = factory_for(NoSteer, Features(steer="no"))  # type: ignore[arg-type]
