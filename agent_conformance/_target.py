"""Whether a target is something the agent machine can drive at all: a factory it can call
as the suite does, yielding an object with the Agent's methods. A target that is not is
told so in one line naming what is missing, instead of failing a property."""

from __future__ import annotations

import inspect
from typing import Any

from ._features import Features

__all__ = ["TargetShapeError", "check_agent_shape", "check_factory_call"]

# What the machine calls on every agent, whatever it declares.
_ALWAYS = ("send", "cancel", "wait_idle", "status", "session")
# What it calls only on an agent that has the feature (`Features(<name>=False)` waives it).
_BY_FEATURE = ("steer", "inject")


class TargetShapeError(TypeError):
    """The target cannot be driven by the agent machine: its factory cannot be called as
    `factory(model, tools, events, options)`, or what it yields lacks Agent methods. The
    message names what is missing and what to do; it is not a contract violation."""


def check_factory_call(factory: Any, *args: Any, **kwargs: Any) -> None:
    """Raise TargetShapeError if `factory` cannot be called with these arguments."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # a builtin or C callable: let the call itself say
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        name = getattr(factory, "__qualname__", type(factory).__name__)
        raise TargetShapeError(
            f"the factory {name} cannot be called as factory(model, tools, events, options) "
            f"({exc}); see docs/conformance.md, 'Checking your own agent'"
        ) from None


def check_agent_shape(agent: object, features: Features) -> None:
    """Raise TargetShapeError naming the Agent members `agent` lacks."""
    wanted = [*_ALWAYS, *(name for name in _BY_FEATURE if getattr(features, name))]
    missing = [name for name in wanted if not hasattr(agent, name)]
    if not missing:
        return
    waivable = [name for name in missing if name in _BY_FEATURE]
    hint = (
        " (an agent without " + " or ".join(waivable) + " declares it: conformance_features = "
        "Features(" + ", ".join(f"{name}=False" for name in waivable) + "))"
        if waivable
        else ""
    )
    raise TargetShapeError(
        f"the factory yielded a {type(agent).__name__}, which lacks "
        f"{', '.join(missing)}: an agent needs the methods of trio_agents.Agent{hint}"
    )
