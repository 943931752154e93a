"""The durable machine's damaged copies (rule L12): a copy of the store's file with one
session damaged the way a disk, an editor or another program damages it, read by the
runtime under test.

A store reads a session whole and checks it. So on the copy, `exists` and `load` of the
damaged session, and a `resume` of it through the runtime, must raise
`CorruptSessionError` naming the session and the record (or its header); the listing must
give it with its `damage` and every other session without; and a failed resume must leave
no claim file in `<store>.live/`, so a second one fails for the same reason; so must a
resume of a session the store does not hold (SessionNotFoundError).

The damage is drawn from what the contract's Records table and L12 name: a record that is
not JSON, one that is not an object, a key the table gives its type that is missing or of
the wrong kind, a gap in the numbering, a header that is not JSON.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from trio_agents import CorruptSessionError, Record, SessionNotFoundError, SqliteStore
from trio_agents.testing import ScriptedModel

from ._durable_properties import (
    CLOSED_SESSION_IN_FILE,
    CRASH_KEEPS_FLUSHED,
    DAMAGE_NAMED,
    show,
)
from ._machine import ConformanceMachine, rule
from ._targets import RuntimeFactory, RuntimeSurface

__all__ = ["DAMAGES", "Damage", "DamagedCopies"]

Damage = Literal["not-json", "not-object", "wrong-kind", "missing-key", "gap", "header"]
DAMAGES: tuple[Damage, ...] = (
    "not-json",
    "not-object",
    "wrong-kind",
    "missing-key",
    "gap",
    "header",
)

MISSING = "never-stored"  # an id no session of the machine has (its ids are "a" and "b")

# The keys rule L12 names, by the kind it gives them, and the record types that carry each
# (the contract's Records table). Only these: a key the table lists that L12 does not name
# a kind for is left alone.
WHOLE, TEXT, FLAG, REASON = "a whole number", "text", "true or false", "an object with a kind"
KEYS: dict[str, dict[str, str]] = {
    "turn/start": {"turn": WHOLE},
    "user/message": {"id": TEXT, "content": TEXT},
    "steering/message": {"id": TEXT, "content": TEXT},
    "context/message": {"id": TEXT, "content": TEXT},
    "prompt/queued": {"id": TEXT, "content": TEXT},
    "step/start": {"turn": WHOLE, "step": WHOLE},
    "step/end": {"turn": WHOLE, "step": WHOLE},
    "assistant/message": {"content": TEXT},
    "tool/call": {"call_id": TEXT, "name": TEXT},
    "tool/result": {"call_id": TEXT, "content": TEXT, "is_error": FLAG},
    "turn/end": {"turn": WHOLE, "reason": REASON},
}
# JSON values of the wrong kind for each (true is no whole number: JSON has no int/bool
# kinship).
WRONG: dict[str, tuple[Any, ...]] = {
    WHOLE: ("1", 1.5, None, True),
    TEXT: (7, None, ["text"]),
    FLAG: ("false", 0, None),
    REASON: ("cancelled", {}, {"kind": 3}),
}


def _keyed(records: Sequence[Record]) -> list[tuple[int, str]]:
    return [(seq, key) for seq, r in enumerate(records) for key in KEYS.get(r.type, {})]


class DamagedCopies(ConformanceMachine):
    """The durable machine's rule that reads a damaged copy of its file.

    What it uses of the machine: `host`, `path` (the store's file), `expected` (what each
    stored session that is not live holds), `rt`, `trace`, and `factory`.
    """

    path: Path
    expected: dict[str, tuple[Record, ...]]
    cleanly_closed: set[str]
    trace: list[str]
    rt: RuntimeSurface | None
    factory: ClassVar[RuntimeFactory]
    _copies: ClassVar[int] = 0

    def _stored(self) -> list[str]:
        return sorted(sid for sid, records in self.expected.items() if records)

    @precondition(lambda self: bool(self._stored()) and self.rt is not None)
    @rule(damage=st.sampled_from(DAMAGES), data=st.data())
    def read_damaged_copy(self, damage: Damage, data: st.DataObject) -> None:
        """Copy the store's file, damage one stored session in the copy, and read the copy
        through a new runtime of the target: L12's errors, listing and claims."""
        sid = data.draw(st.sampled_from(self._stored()), label="sid")
        records = self.expected[sid]
        if damage == "gap" and len(records) < 3:
            damage = "not-json"  # a gap needs a record with one on each side
        seq: int | None
        values: tuple[Any, ...] = (None,)
        if damage in ("wrong-kind", "missing-key"):
            keyed = _keyed(records)
            seq, key = data.draw(st.sampled_from(keyed), label="record and key")
            wrong = WRONG[KEYS[records[seq].type][key]]
            # Drawn as it always was (the programs stay as they were), then every other
            # value of a wrong kind, each in a copy of its own: the near misses (`true`
            # for a number, `0` for a flag) are where a check goes wrong.
            value = data.draw(st.sampled_from(wrong), label="value")
            if damage == "wrong-kind":
                values = (value, *(v for v in wrong if v is not value))
        elif damage == "header":
            seq, key = None, ""
        else:
            low = 1 if damage == "gap" else 0
            high = len(records) - 2 if damage == "gap" else len(records) - 1
            seq = data.draw(st.integers(low, high), label="seq")
            key = ""
        for value in values:
            self._read_damaged(sid, records, seq, damage, key, value)
        self.trace.append(f"damaged copy {damage}")

    def _read_damaged(
        self,
        sid: str,
        records: Sequence[Record],
        seq: int | None,
        damage: Damage,
        key: str,
        value: Any,
    ) -> None:
        """Damage `sid` in a new copy of the store's file and read the copy (L12)."""
        DamagedCopies._copies += 1
        copy = self.path.with_name(f"damaged-{DamagedCopies._copies}.sqlite3")
        what = _damage_copy(self.path, copy, sid, seq, damage, key, value)
        if what is None:
            # A store that lost what it said it stored: that is the finding, not the damage.
            closed = sid in self.cleanly_closed
            (CLOSED_SESSION_IN_FILE if closed else CRASH_KEEPS_FLUSHED).fail(
                f"session {sid!r} was {'closed' if closed else 'flushed'} holding "
                f"{show(records)}; the store's file lacks its record {seq}"
            )
        told = f"in a copy of the store where session {sid!r} {what}"
        self.host.call(self._read_copy, copy, sid, seq, told)
        live = Path(f"{copy}.live")
        left = sorted(p.name for p in live.iterdir()) if live.is_dir() else []
        DAMAGE_NAMED.check(
            not left,
            lambda: (
                f"{told}, after the failed resumes (and one of {MISSING!r}, which it does not "
                f"hold) {live} still holds claim files {left}"
            ),
        )

    async def _read_copy(self, copy: Path, sid: str, seq: int | None, told: str) -> None:
        async with type(self).factory(SqliteStore(copy)) as rt:
            store = rt.sessions
            for name, call in (("exists", store.exists), ("load", store.load)):
                try:
                    got = await call(sid)
                except CorruptSessionError as exc:
                    _check_named(exc, f"{name}({sid!r})", sid, seq, told)
                else:
                    DAMAGE_NAMED.fail(f"{told}, {name}({sid!r}) returned {_brief(got)}")
            listed = await store.list_sessions()
            damaged = [(i.id, i.damage) for i in listed if i.damage]
            DAMAGE_NAMED.check(
                [i for i, _ in damaged] == [sid],
                lambda: (
                    f"{told}, list_sessions() gives the damage {damaged}; only {sid!r} "
                    f"is damaged, and every session is listed ({[i.id for i in listed]})"
                ),
            )
            for attempt in ("a resume", "a second resume"):
                await self._resume_damaged(rt, sid, seq, f"{told}, {attempt}")
            await self._resume_missing(rt, told)

    @staticmethod
    async def _resume_missing(rt: RuntimeSurface, told: str) -> None:
        """A restore of a session the store does not hold ends without it going live too:
        SessionNotFoundError, and its claim released (checked with the rest, after)."""
        try:
            handle = await rt.agents.resume(MISSING, model=ScriptedModel(hold_all=True))
        except SessionNotFoundError:
            return
        except Exception as exc:  # what it raised instead is the finding
            DAMAGE_NAMED.fail(
                f"{told}, a resume of {MISSING!r}, which it does not hold, raised "
                f"{type(exc).__name__}: {exc}, not SessionNotFoundError"
            )
        await handle.aclose()
        DAMAGE_NAMED.fail(f"{told}, a resume of {MISSING!r}, which it does not hold, succeeded")

    @staticmethod
    async def _resume_damaged(rt: RuntimeSurface, sid: str, seq: int | None, told: str) -> None:
        try:
            handle = await rt.agents.resume(sid, model=ScriptedModel(hold_all=True))
        except CorruptSessionError as exc:
            _check_named(exc, f"resume({sid!r})", sid, seq, told)
            return
        except Exception as exc:  # what it raised instead is the finding
            DAMAGE_NAMED.fail(f"{told} raised {type(exc).__name__}: {exc}")
        await handle.aclose()
        DAMAGE_NAMED.fail(f"{told} succeeded")


def _check_named(exc: CorruptSessionError, call: str, sid: str, seq: int | None, told: str) -> None:
    text = str(exc)
    where = "its header" if seq is None else f"record {seq}"
    DAMAGE_NAMED.check(
        repr(sid) in text and where in text,
        lambda: (
            f"{told}, {call} raised CorruptSessionError({text!r}), which does not name "
            f"{sid!r} and {where}"
        ),
    )
    DAMAGE_NAMED.check(
        (exc.session_id, exc.seq) == (sid, seq),
        lambda: (
            f"{told}, {call} raised a CorruptSessionError whose (session_id, seq) is "
            f"{(exc.session_id, exc.seq)!r}, not {(sid, seq)!r}"
        ),
    )


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."


def _damage_copy(
    source: Path, copy: Path, sid: str, seq: int | None, damage: Damage, key: str, value: Any
) -> str | None:
    """Copy `source` (a consistent snapshot, through SQLite's backup) to `copy` and damage
    `sid` there; what was done, for the messages (None: the file lacks record `seq`)."""
    with sqlite3.connect(source) as reader, sqlite3.connect(copy) as writer:
        reader.backup(writer)
        if damage == "header":
            writer.execute("UPDATE sessions SET header = ? WHERE id = ?", ("{", sid))
            return "has a header that is not JSON"
        if damage == "gap":
            writer.execute("DELETE FROM records WHERE session_id = ? AND seq = ?", (sid, seq))
            return f"lost record {seq} of the middle"
        row = writer.execute(
            "SELECT data FROM records WHERE session_id = ? AND seq = ?", (sid, seq)
        ).fetchone()
        if row is None:
            return None  # the file lacks a record the session had when last stored
        (text,) = row
        if damage == "not-json":
            new, what = text[: max(1, len(text) // 2)], "is cut short"
        elif damage == "not-object":
            new, what = json.dumps([json.loads(text)]), "is a list"
        else:
            data = json.loads(text)
            if damage == "missing-key":
                del data[key]
                what = f"has no {key!r}"
            else:
                data[key] = value
                what = f"has {key!r} = {json.dumps(value)}"
            new = json.dumps(data)
        writer.execute(
            "UPDATE records SET data = ? WHERE session_id = ? AND seq = ?", (new, sid, seq)
        )
    writer.close()
    reader.close()
    return f"has a record {seq} that {what}"
