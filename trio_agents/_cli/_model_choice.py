"""The models the command-line front ends (`trio-agents acp`, `trio-agents chat`) offer by
name, and which of them `--model auto` prefers.

Factories, not instances: each session gets its own model. The OpenAI-compatible model reads
its endpoint from the environment when a session is made, so a missing `OPENAI_MODEL` is an
error that says which variable to set, at the moment it matters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .._model._offline import OfflineModel
from .._model._openai import OpenAICompatibleModel
from .._model._seam import Model

__all__ = ["AUTO_MODELS", "MODELS", "offered_models"]

MODELS: dict[str, Callable[[], Model]] = {
    "offline": OfflineModel,
    "openai": OpenAICompatibleModel.from_env,
}
"""Model names `--model` accepts, each with the factory that makes one model per session."""

AUTO_MODELS: list[tuple[str, Callable[[], bool]]] = [
    ("openai", OpenAICompatibleModel.is_configured),
]
"""The models `--model auto` prefers, in order, each with a check of whether its endpoint is
configured; the first configured one is used, else `offline`."""


def offered_models(
    first: str, env: Mapping[str, str] | None = None
) -> dict[str, Callable[[], Model]]:
    """The models an editor may switch a session among: `first` (the one `--model` named,
    each session's model until switched), then `offline`, then `openai` when its endpoint
    is configured in `env` (None: this process's environment)."""
    offered = {first: MODELS[first]}
    offered.setdefault("offline", MODELS["offline"])
    if OpenAICompatibleModel.is_configured(env):
        offered.setdefault("openai", MODELS["openai"])
    return offered
