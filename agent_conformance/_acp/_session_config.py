"""The ACP machine's switches of a session's settings (rule P19): `session/set_config_option`
and `session/set_mode`, with values the session offered and with ones it did not.

A value it offered is answered with every option, that one at that value. A mode, option
or value it did not offer changes nothing: the rule then sets an option to the value it
already has, whose answer must show every option as the client knew it. What the client
knows comes from the answers of `session/new`, `session/load` and `set_config_option`, and
from `config_option_update` notifications. A model option switched is switched back at once:
the session's model must stay the scripted endpoint's for the other rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from .._machine import ConformanceMachine, rule
from . import _wire as wire
from ._client import AgentProcess, Answer
from ._config_state import ConfigState, Option, modes_of, options_of
from ._properties import CONFIG_REFUSED_UNCHANGED, CONFIG_SWITCHED

__all__ = ["SWITCHES", "SessionConfig", "Switch"]

Switch = Literal["value", "mode", "unknown-value", "unknown-option", "unknown-mode"]
SWITCHES: tuple[Switch, ...] = get_args(Switch)


class SessionConfig(ConformanceMachine):
    """The P19 rule of `AcpMachine`, whose state it uses: `agent`, `sessions`, `log`."""

    config: dict[str, ConfigState]
    """By session id: what the client knows of its settings."""

    if TYPE_CHECKING:  # of `AcpMachine`
        agent: AgentProcess
        tokens: itertools.count[int]
        log: list[str]

        def _live(self) -> list[Any]: ...

        def _ask(
            self, agent: AgentProcess, method: str, params: Mapping[str, Any], what: str = ""
        ) -> Answer: ...

    def _note_config(self, session_id: str, answer: Answer) -> None:
        """Read what a session/new or session/load answer says the session offers."""
        result = answer.result
        if wire.dig(result, "configOptions") or wire.dig(result, "modes"):
            type(self).stats["offered settings"] = 1  # P19 applies
        self.config[session_id] = ConfigState(
            options_of(wire.dig(result, "configOptions")),
            modes_of(wire.dig(result, "modes")),
            set(),
            answer.seq,
        )

    def _switchable(self) -> list[str]:
        return [
            s.id
            for s in self._live()
            if (state := self.config.get(s.id)) is not None and (state.options or state.modes)
        ]

    @precondition(lambda self: bool(self._switchable()))
    @rule(session=st.integers(0, 2), pick=st.integers(0, 15), switch=st.sampled_from(SWITCHES))
    def switch_config(self, session: int, pick: int, switch: Switch) -> None:
        """set_config_option or set_mode, with a value the session offered or not."""
        ids = self._switchable()
        session_id = ids[session % len(ids)]
        state = self.config[session_id]
        self._fold_notifications(session_id, state)
        options = list((state.options or {}).values())
        if switch in ("value", "unknown-value", "unknown-option") and not options:
            switch = "mode" if switch == "value" else "unknown-mode"
        if switch in ("mode", "unknown-mode") and not state.modes:
            switch = "value" if switch == "mode" else "unknown-value"
        unknown = f"no-such-{next(self.tokens)}"
        if switch == "value":
            option = options[pick % len(options)]
            if option.values:
                value = option.values[(pick // len(options)) % len(option.values)]
                self._set_offered(session_id, state, option, value)
                if option.category == "model" and value != option.current:
                    self._set_offered(session_id, state, option, option.current)
        elif switch == "mode":
            self._set_mode(session_id, state, state.modes[pick % len(state.modes)])
        else:
            self._refused(session_id, state, switch, unknown, options, pick)
        self.log.append(f"config-{switch}")

    def _set_offered(self, session_id: str, state: ConfigState, option: Option, value: str) -> None:
        params = {"sessionId": session_id, "configId": option.id, "value": value}
        answer = self._ask(self.agent, "session/set_config_option", params)
        shown = _answered_options(answer)
        now = (shown or {}).get(option.id)
        CONFIG_SWITCHED.check(
            now is not None and now.current == value,
            lambda: (
                f"session/set_config_option {option.id!r} = {value!r} (an offered value) of "
                f"session {session_id} was answered "
                + (f"{answer.error}" if answer.error is not None else f"{answer.result}")
            ),
        )
        state.refresh(shown, answer.seq)

    def _set_mode(self, session_id: str, state: ConfigState, mode: str) -> None:
        params = {"sessionId": session_id, "modeId": mode}
        answer = self._ask(self.agent, "session/set_mode", params)
        CONFIG_SWITCHED.check(
            answer.error is None,
            lambda: (
                f"session/set_mode {mode!r} (an offered mode) of session {session_id} was "
                f"answered {answer.error}"
            ),
        )
        # An option of category mode may follow the mode, told or not.
        state.stale |= {o.id for o in (state.options or {}).values() if o.category == "mode"}

    def _refused(
        self,
        session_id: str,
        state: ConfigState,
        switch: Switch,
        unknown: str,
        options: list[Option],
        pick: int,
    ) -> None:
        agent = self.agent
        start = agent.mark()
        if switch == "unknown-mode":
            what = f"session/set_mode {unknown!r}"
            params: dict[str, Any] = {"sessionId": session_id, "modeId": unknown}
            self._ask(agent, "session/set_mode", params)
        else:
            option = options[pick % len(options)]
            config_id = option.id if switch == "unknown-value" else unknown
            value = unknown if switch == "unknown-value" else option.current
            what = f"session/set_config_option {config_id!r} = {value!r}"
            params = {"sessionId": session_id, "configId": config_id, "value": value}
            self._ask(agent, "session/set_config_option", params)
        for update in agent.updates:
            if update.seq > start and update.session_id == session_id:
                body = update.update
                if body.get("currentModeId") == unknown:
                    CONFIG_REFUSED_UNCHANGED.fail(
                        f"{what}, never offered, switched the mode: {body}"
                    )
        self._fold_notifications(session_id, state)
        if not options:
            return
        # Read the options back: set one to the value it has.
        probe = options[(pick + 1) % len(options)]
        known = (state.options or {}).get(probe.id, probe)
        params = {"sessionId": session_id, "configId": probe.id, "value": known.current}
        answer = self._ask(agent, "session/set_config_option", params)
        shown = _answered_options(answer)
        CONFIG_SWITCHED.check(
            shown is not None,
            lambda: (
                f"session/set_config_option {probe.id!r} = {known.current!r} (its value now) "
                f"of session {session_id} was answered {answer.error or answer.result}"
            ),
        )
        assert shown is not None
        moved = state.differences(shown)
        CONFIG_REFUSED_UNCHANGED.check(
            not moved,
            lambda: f"after {what} (never offered) to session {session_id}: " + "; ".join(moved),
        )
        state.refresh(shown, answer.seq)

    def _fold_notifications(self, session_id: str, state: ConfigState) -> None:
        """Take in the `config_option_update`s of the session sent since the options were
        last read."""
        for update in self.agent.updates:
            if update.session_id != session_id or update.seq <= state.seq:
                continue
            if update.update.get("sessionUpdate") == "config_option_update":
                state.refresh(options_of(update.update.get("configOptions")), update.seq)


def _answered_options(answer: Answer) -> dict[str, Option] | None:
    """The options a set_config_option answer holds; None for an error or none."""
    if answer.error is not None:
        return None
    return options_of(wire.dig(answer.result, "configOptions"))
