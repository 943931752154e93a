"""Every property the machines check: the catalogue `docs/conformance.md` lists, rule by
rule (tests/test_conformance_catalogue.py ties the two together)."""

from __future__ import annotations

from ._acp._properties import PROPERTIES as _ACP
from ._agent_machine import PROPERTIES as _AGENT
from ._chat._properties import PROPERTIES as _CHAT
from ._durable_machine import PROPERTIES as _DURABLE
from ._function_properties import PROPERTIES as _FUNCTION
from ._lifecycle_machine import PROPERTIES as _LIFECYCLE
from ._mcp_properties import PROPERTIES as _MCP
from ._model_properties import PROPERTIES as _MODEL
from ._properties import Property
from ._shell_machine import PROPERTIES as _SHELL

__all__ = ["PROPERTIES"]

PROPERTIES: tuple[Property, ...] = (
    *_AGENT,
    *_LIFECYCLE,
    *_DURABLE,
    *_SHELL,
    *_MCP,
    *_FUNCTION,
    *_MODEL,
    *_ACP,
    *_CHAT,
)
"""Every `Property` of every machine, machine by machine."""
