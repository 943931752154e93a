"""What a session offers to switch (rule P19), read from the wire: its `configOptions` (as
`session/new`, `session/load` and `session/set_config_option` answer them, and as a
`config_option_update` sends them) and its `modes`. Pure: no trio."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["ConfigState", "Option", "modes_of", "options_of"]


@dataclass(frozen=True)
class Option:
    """One select option: its id, category (None if it names none), current value and the
    values it offers (its groups' values flattened)."""

    id: str
    category: str | None
    current: str
    values: tuple[str, ...]


@dataclass
class ConfigState:
    """What the client knows of one session's settings.

    options: by id, in the order the agent listed them; None before any answer held them.
    modes: the mode ids the session offered (empty when it answered no `modes`).
    stale: ids of options that may have moved without the client being told (a mode
        switched by session/set_mode moves a mode option on some agents): not compared
        until the next answer that holds every option.
    seq: the wire sequence number of the last message the options were read from.
    """

    options: dict[str, Option] | None
    modes: tuple[str, ...]
    stale: set[str]
    seq: int

    def refresh(self, options: dict[str, Option] | None, seq: int) -> None:
        if options is not None:
            self.options, self.stale, self.seq = options, set(), seq

    def differences(self, now: Mapping[str, Option]) -> list[str]:
        """How `now` differs from what the client knows, option by option (stale ones
        left out): a current value that moved, an option gone."""
        known = self.options or {}
        found: list[str] = []
        for option_id, option in known.items():
            if option_id in self.stale:
                continue
            other = now.get(option_id)
            if other is None:
                found.append(f"option {option_id!r} is gone")
            elif other.current != option.current:
                found.append(f"{option_id!r} is {other.current!r}, was {option.current!r}")
        return found


def options_of(value: object) -> dict[str, Option] | None:
    """The select options of a `configOptions` list; None if `value` is not a list."""
    if not isinstance(value, list):
        return None
    found: dict[str, Option] = {}
    for item in cast("list[object]", value):
        if not isinstance(item, dict):
            continue
        entry = cast("dict[str, Any]", item)
        option_id, current = entry.get("id"), entry.get("currentValue")
        if not isinstance(option_id, str) or not isinstance(current, str):
            continue  # not a select option: a boolean one has no value to pick from
        category = entry.get("category")
        found[option_id] = Option(
            option_id,
            category if isinstance(category, str) else None,
            current,
            _values(entry.get("options")),
        )
    return found


def _values(options: object) -> tuple[str, ...]:
    if not isinstance(options, list):
        return ()
    values: list[str] = []
    for item in cast("list[object]", options):
        if not isinstance(item, dict):
            continue
        entry = cast("dict[str, Any]", item)
        if isinstance(entry.get("value"), str):
            values.append(entry["value"])
        else:  # a group: {"group", "name", "options": [...]}
            values.extend(_values(entry.get("options")))
    return tuple(values)


def modes_of(value: object) -> tuple[str, ...]:
    """The ids of a `modes` state's `availableModes` (empty when there is none)."""
    available: object = (
        cast("dict[str, Any]", value).get("availableModes") if isinstance(value, dict) else None
    )
    if not isinstance(available, list):
        return ()
    ids: Sequence[object] = [
        cast("dict[str, Any]", m).get("id")
        for m in cast("list[object]", available)
        if isinstance(m, dict)
    ]
    return tuple(i for i in ids if isinstance(i, str))
