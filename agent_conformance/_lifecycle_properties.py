"""The properties of the lifecycle machine: rules L1-L5 (publication and teardown) and F1-F3
(fibers, plugins, services), and A11 on the runtime's own bus, each in the contract's words.
A pure module."""

from __future__ import annotations

from ._properties import Property

__all__ = ["PROPERTIES"]


def _lifecycle(rule: str, name: str, says: str) -> Property:
    return Property(rule, name, "lifecycle", says)


TEARDOWN_ORDER = _lifecycle(
    "L1",
    "teardown-order",
    "an agent's teardown stops the loop, waits for the loop's exit, flushes the session, "
    "then unregisters the agent, then detaches its session",
)
CLOSING_TURN_DURABLE = _lifecycle(
    "L1",
    "closing-turn-end-durable",
    "the session is flushed so the closing turn/end is durable in the store before aclose returns",
)
TEARDOWN_SHIELDED = _lifecycle(
    "L1",
    "teardown-shielded",
    "the teardown runs shielded: a closer that is cancelled still waits until it is complete",
)
OWNERS_JOIN = _lifecycle(
    "L2",
    "owners-join-one-teardown",
    "the handle's holder, the owning fiber and the runtime reach the same memoized "
    "teardown; any of them, in any order and at the same time, waits until that one "
    "teardown is complete",
)
FIBER_CLOSES_AGENTS = _lifecycle(
    "L2", "fiber-closes-its-agents", "closing a fiber f closes every agent created through f.agents"
)
CREATE_OUTCOME = _lifecycle(
    "L3",
    "create-outcome",
    "a create succeeds exactly when the id is neither live nor stored, and raises "
    "DuplicateSessionError otherwise",
)
RESUME_OUTCOME = _lifecycle(
    "L3",
    "resume-outcome",
    "a resume is refused (DuplicateSessionError) while the id is live and raises "
    "SessionNotFoundError unless it is stored; an id can be used again once its exact "
    "entry has detached",
)
RACE_ONE_WINNER = _lifecycle(
    "L3",
    "race-one-winner",
    "of a race for one free id exactly one create wins; the store rejects an id that is live",
)
RACE_LOSER_ROLLS_BACK = _lifecycle(
    "L3",
    "race-loser-rolls-back",
    "the loser of a race for one id rolls back all it prepared and raises "
    "DuplicateSessionError; the winner's agent is the one registered",
)
NOTHING_HALF_PUBLISHED = _lifecycle(
    "L3",
    "nothing-half-published",
    "publishing is a transaction: enter the session in the store, enter the agent in the "
    "registry, announce (SessionCreated, then AgentCreated); nothing half-published is ever "
    "observable",
)
CLOSE_RACE = _lifecycle(
    "L4",
    "close-race-leaves-nothing",
    "a create or resume that races its owner's close disposes of the handle it had not yet "
    "published and raises; it never leaves a registered agent or a store entry behind",
)
CLOSED_GONE = _lifecycle(
    "L5",
    "closed-agent-gone",
    "after a close by any path, registry.get(id) is None and the id is in neither "
    "registry.list() nor the store's live set",
)
CLOSE_EVENTS_ONCE = _lifecycle(
    "L5",
    "close-events-once",
    "each life of an id is announced SessionCreated, AgentCreated and, after a close by any "
    "path, AgentClosed and SessionClosed, each emitted exactly once",
)
UNWIND_ORDER = _lifecycle(
    "F1",
    "fiber-unwind-order",
    "closing a fiber closes its child fibers first, newest first; then it runs its own "
    "disposers strictly last-in first-out, one after another, carrying on when one raises; "
    "then the tasks left in its nursery are cancelled",
)
UNWIND_ERRORS = _lifecycle(
    "F1",
    "fiber-unwind-errors",
    "the errors of a fiber's disposers are raised together as one ExceptionGroup after the "
    "whole stack has unwound",
)
FIBER_CLOSE_SHIELDED = _lifecycle(
    "F1",
    "fiber-close-shielded",
    "a fiber's aclose() is memoized and shielded: every caller, also one that is cancelled, "
    "waits for the same unwinding",
)
PLUGIN_FAILED_APPLY = _lifecycle(
    "F2",
    "plugin-failed-apply-undone",
    "if a plugin's apply raises, its fiber is closed (undoing what apply did) and the error "
    "propagates",
)
PLUGIN_LOAD_REFUSED = _lifecycle(
    "F2", "plugin-load-refused", "loading a plugin that is loaded is refused (AlreadyLoadedError)"
)
PLUGIN_RELOAD_WAITS = _lifecycle(
    "F2",
    "plugin-reload-waits",
    "reload waits until the old fiber has closed completely before it applies the plugin again",
)
PLUGIN_FIBER_OWNS = _lifecycle(
    "F2",
    "plugin-fiber-owns",
    "everything a plugin's apply starts or registers through its fiber belongs to the fiber "
    "and goes away when it closes",
)
CONFIGURED_RESUMES = _lifecycle(
    "F2",
    "configured-resumes-sessions",
    "ConfiguredAgents applied again (a reload, or a new runtime over the same store) resumes "
    "the same sessions: a config without a session_id keeps the id minted at its first apply, "
    "and agent(label) is the live agent of that id, with its config's options",
)
SERVICES = _lifecycle(
    "F3",
    "services-are-attributes",
    "services are plain typed attributes (rt.agents, rt.sessions, rt.shell, rt.events, "
    "fiber.agents): the same objects every time, and the ones actually used",
)

BUS_SKIPS_RAISING = _lifecycle(
    "A11",
    "bus-skips-raising-listener",
    "a listener that raises is logged and skipped: every listener connected after it still "
    "receives the event, and every event after it",
)
PROPERTIES: tuple[Property, ...] = (
    BUS_SKIPS_RAISING,
    TEARDOWN_ORDER,
    CLOSING_TURN_DURABLE,
    TEARDOWN_SHIELDED,
    OWNERS_JOIN,
    FIBER_CLOSES_AGENTS,
    CREATE_OUTCOME,
    RESUME_OUTCOME,
    RACE_ONE_WINNER,
    RACE_LOSER_ROLLS_BACK,
    NOTHING_HALF_PUBLISHED,
    CLOSE_RACE,
    CLOSED_GONE,
    CLOSE_EVENTS_ONCE,
    UNWIND_ORDER,
    UNWIND_ERRORS,
    FIBER_CLOSE_SHIELDED,
    PLUGIN_FAILED_APPLY,
    PLUGIN_LOAD_REFUSED,
    PLUGIN_RELOAD_WAITS,
    PLUGIN_FIBER_OWNS,
    CONFIGURED_RESUMES,
    SERVICES,
)
"""The properties the lifecycle machine checks, in rule order."""
