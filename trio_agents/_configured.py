"""Agents declared in configuration, created by a plugin and owned by that plugin's fiber.

Configuration describes agents that should exist for as long as a plugin is loaded; nobody
holds their handles. Ownership is therefore the plugin fiber's (rule F2): closing or
reloading the plugin closes every agent it created, each with its closing turn/end made
durable (rule L1), and applying it again resumes the same sessions, so a reload continues a
conversation instead of starting a new one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from ._agent._agent import Agent
from ._agent._options import AgentOptions
from ._errors import AlreadyLoadedError, LabelNotFoundError
from ._model._seam import Model
from ._tool._seam import Tool

if TYPE_CHECKING:
    from ._fiber import Fiber

__all__ = ["AgentConfig", "ConfiguredAgents"]


@dataclass(frozen=True)
class AgentConfig:
    """One agent as configuration declares it.

    label: names the agent within its `ConfiguredAgents`; it is how code without a handle
        finds the agent again (`ConfiguredAgents.agent(label)`), across reloads.
    session_id: the session to resume or create. Without one, a fresh id is minted on the
        first apply and kept by the plugin, so a reload resumes that session.
    model: the agent's model.
    tools: the agent's tools.
    options: the agent's options (None: the defaults).

    Raises ValueError for an empty label, or a `session_id` that is not a non-empty str.
    """

    label: str
    model: Model
    tools: Sequence[Tool] = ()
    session_id: str | None = None
    options: AgentOptions | None = None

    def __post_init__(self) -> None:
        # Checked here so a bad configuration fails when it is read, not when it is loaded.
        if not isinstance(self.label, str) or not self.label:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"an agent label must be a non-empty str, got {self.label!r}")
        if self.session_id is not None and (
            not isinstance(self.session_id, str) or not self.session_id  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise ValueError(
                f"agent {self.label!r}: session_id must be a non-empty str or None, "
                f"got {self.session_id!r}"
            )


class ConfiguredAgents:
    """A plugin that creates (or resumes) one agent per `AgentConfig` in the fiber it is
    applied to, and owns them there.

    Load it with `await rt.load(plugin)`. The handles stay inside the fiber: close the agents
    by closing or reloading the plugin, and find them with `agent(label)`, which always
    answers with the agent that is live now, whichever apply created it.

    name: the plugin's name; `Runtime.load` names the plugin's fiber after it.

    Raises ValueError if two configs have the same label.
    """

    name = "configured-agents"

    def __init__(self, *configs: AgentConfig) -> None:
        seen: set[str] = set()
        for config in configs:
            if config.label in seen:
                raise ValueError(f"two agents are labelled {config.label!r}; labels must be unique")
            seen.add(config.label)
        self._configs: tuple[AgentConfig, ...] = configs
        # Ids minted for configs without one: kept across applies so a reload resumes them.
        self._minted: dict[str, str] = {}
        # The fiber of the latest apply and the agents it published, to tell our live agent
        # from an agent that merely has the same id.
        self._fiber: Fiber | None = None
        self._agents: dict[str, Agent] = {}

    def __repr__(self) -> str:
        return f"<ConfiguredAgents {', '.join(c.label for c in self._configs) or 'empty'}>"

    @property
    def configs(self) -> tuple[AgentConfig, ...]:
        """The configs, in the order given."""
        return self._configs

    async def apply(self, fiber: Fiber) -> None:
        """Resume each config's session if it is stored, else create it, in config order;
        every agent is owned by `fiber`.

        If a create or resume fails (the id is live elsewhere, say), the error propagates and
        `Runtime.load` closes the fiber, which closes the agents created before it.

        Always a checkpoint. Raises
        ValueError if the plugin is applied to another fiber that is still open, and what
        `AgentRegistry.create` and `resume` raise (DuplicateSessionError, FiberClosedError).
        """
        if self._fiber is not None and self._fiber is not fiber and self._fiber.state == "open":
            # Two fibers would race for the same session ids and `agent()` could not say
            # which agent is meant.
            raise AlreadyLoadedError(
                f"{self!r} is already applied to the open fiber {self._fiber.name!r}; "
                "close or reload it there instead of applying it twice"
            )
        self._fiber = fiber
        self._agents = {}
        if not self._configs:
            await trio.lowlevel.checkpoint()  # nothing to create, still a checkpoint
        store = fiber.runtime.sessions
        for config in self._configs:
            sid = config.session_id or self._minted.get(config.label)
            if sid is not None and await store.exists(sid):
                handle = await fiber.agents.resume(
                    sid, model=config.model, tools=config.tools, options=config.options
                )
            else:
                if sid is None:
                    sid = self._minted[config.label] = f"{config.label}-{uuid.uuid4()}"
                handle = await fiber.agents.create(
                    model=config.model,
                    tools=config.tools,
                    session_id=sid,
                    options=config.options,
                    meta={"label": config.label},
                )
            self._agents[config.label] = handle.agent

    def agent(self, label: str) -> Agent | None:
        """The live agent for `label`, or None while the plugin is not loaded (or is being
        closed). Raises LabelNotFoundError (a KeyError) for a label no config has, so a typo
        is not mistaken for an agent that is merely down."""
        sid = self.session_id(label)
        fiber = self._fiber
        if sid is None or fiber is None or fiber.state != "open":
            return None
        live = fiber.runtime.agents.get(sid)
        return live if live is not None and live is self._agents.get(label) else None

    def session_id(self, label: str) -> str | None:
        """The session id of `label`: the configured one, or the one minted on the first
        apply (None before it). Raises LabelNotFoundError for a label no config has."""
        for config in self._configs:
            if config.label == label:
                return config.session_id or self._minted.get(label)
        known = ", ".join(repr(c.label) for c in self._configs) or "none"
        raise LabelNotFoundError(f"no agent is labelled {label!r}; the labels are: {known}")
