"""What an editor switches in an ACP session: its mode (which tool calls ask first) and its
model, and their wire shapes (`modes`, `configOptions`). Pure; no trio import.

A session's mode is its approval policy (`ModePolicy`, from `_mode_policy`, which the chat
uses too), an object the server changes in place on `session/set_mode`: the agent consults
it before every call, so a switch applies from the next call on. Its model is a
`SwitchableModel` the server owns: a switch applies from the next model call on (a reply
being streamed finishes with the model it started on).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._agent._mode_policy import DEFAULT_MODE, MODES, ModePolicy
from .._model._seam import Model, ModelChunk, ModelRequest
from ._jsonrpc import JsonRpcError

__all__ = [
    "DEFAULT_MODE",
    "MODEL_CONFIG",
    "MODES",
    "MODE_CONFIG",
    "ModePolicy",
    "Settings",
    "SwitchableModel",
    "config_options",
    "mode_state",
]

MODE_CONFIG: Final = "mode"  # the config option ids
MODEL_CONFIG: Final = "model"


class SwitchableModel:
    """The model of one session, switched by the editor among `models` (a name to the
    factory that makes it; each is made once, when first used). Raises ValueError if
    `current` is not one of them."""

    def __init__(self, models: Mapping[str, Callable[[], Model]], current: str) -> None:
        if current not in models:
            raise ValueError(f"unknown model {current!r}; the models are {', '.join(models)}")
        self._factories = models
        self._made: dict[str, Model] = {}
        self._current = current

    @property
    def current(self) -> str:
        """The name of the model the next call uses."""
        return self._current

    def switch(self, name: str) -> None:
        """Use model `name` from the next model call on. Makes it now, so a model that cannot
        be made (an endpoint not configured) is refused here. Raises ValueError for an unknown
        name, or what its factory raises."""
        if name not in self._factories:
            known = ", ".join(self._factories)
            raise ValueError(f"unknown model {name!r}; the models are {known}")
        self._model(name)
        self._current = name

    def active(self) -> Model:
        """The model the session uses now (made at its first use)."""
        return self._model(self._current)

    def _model(self, name: str) -> Model:
        made = self._made.get(name)
        if made is None:
            made = self._made[name] = self._factories[name]()
        return made

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The current model's reply: its own stream, handed on rather than wrapped (a layer
        of async generator per chunk is a measurable part of a quick turn), so its
        checkpoints and its closing are `Model.stream`'s contract as that model keeps it."""
        return self._model(self._current).stream(request)


@dataclass(slots=True)
class Settings:
    """What the editor switches in one session: its mode (its approval policy) and model."""

    policy: ModePolicy
    model: SwitchableModel
    models: tuple[str, ...]

    @classmethod
    def make(cls, mode: str, models: Mapping[str, Callable[[], Model]]) -> Settings:
        """A session's settings: in `mode`, with the first of `models`."""
        first = next(iter(models))
        return cls(ModePolicy(mode), SwitchableModel(models, first), tuple(models))

    def advertised(self) -> dict[str, Any]:
        """What `session/new` and `session/load` answer about the settings."""
        return {"modes": mode_state(self.policy.mode), "configOptions": self.config_options()}

    def config_options(self) -> list[dict[str, Any]]:
        """The `configOptions` as they are now."""
        return config_options(self.policy.mode, self.model.current, self.models)

    def configure(self, method: str, params: Mapping[str, Any]) -> str:
        """Apply `session/set_mode` or `session/set_config_option`; returns the id of the
        option switched (`mode` or `model`). Raises JsonRpcError (invalid params) naming an
        unknown option or value, or a value that is not a string; nothing changes then."""
        option: object
        value: object
        if method == "session/set_mode":
            option, value, name = MODE_CONFIG, params.get("modeId"), "modeId"
        else:
            option, value, name = params.get("configId"), params.get("value"), "value"
        if option not in (MODE_CONFIG, MODEL_CONFIG):
            raise JsonRpcError.invalid_params(
                f"unknown config option {option!r}; the options are {MODE_CONFIG}, {MODEL_CONFIG}"
            )
        if not isinstance(value, str):
            raise JsonRpcError.invalid_params(f"{name} must be a string, got {value!r}")
        try:
            if option == MODE_CONFIG:
                self.policy.switch(value)
            else:
                self.model.switch(value)
        except ValueError as exc:
            raise JsonRpcError.invalid_params(str(exc)) from None
        return str(option)


# -- the wire ----------------------------------------------------------------------------


def mode_state(current: str) -> dict[str, Any]:
    """A `SessionModeState`: the current mode and the ones available."""
    return {
        "currentModeId": current,
        "availableModes": [
            {"id": mode, "name": name, "description": description}
            for mode, (name, description) in MODES.items()
        ],
    }


def config_options(mode: str, model: str, models: Iterable[str]) -> list[dict[str, Any]]:
    """The session's `configOptions`: its mode, and its model among `models` (names)."""
    return [
        {
            "type": "select",
            "id": MODE_CONFIG,
            "name": "Mode",
            "category": "mode",
            "description": "Which tool calls ask before they run",
            "currentValue": mode,
            "options": [
                {"value": value, "name": name, "description": description}
                for value, (name, description) in MODES.items()
            ],
        },
        {
            "type": "select",
            "id": MODEL_CONFIG,
            "name": "Model",
            "category": "model",
            "description": "The model the next step calls",
            "currentValue": model,
            "options": [{"value": name, "name": name} for name in models],
        },
    ]
