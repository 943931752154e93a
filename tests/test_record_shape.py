"""Rule L12, the pure half: which stored records are damage. Every key the contract's
Records table gives a kind (a whole number for `turn` and `step`; text for `id`, `content`,
`call_id` and `name`; true or false for `is_error`; an object with a `kind` for `reason`)
is checked on every record type that carries it, and a gap names the missing record."""

from __future__ import annotations

import pytest

from trio_agents import CorruptSessionError
from trio_agents._store._record_shape import shape_problem
from trio_agents._store._repair import validate

GOOD: dict[str, dict[str, object]] = {
    "turn/start": {"turn": 1},
    "user/message": {"id": "m1", "content": "hi"},
    "steering/message": {"id": "m2", "content": "hi"},
    "context/message": {"id": "m3", "content": "hi"},
    "prompt/queued": {"id": "m4", "content": "hi"},
    "step/start": {"turn": 1, "step": 1},
    "step/end": {"turn": 1, "step": 1},
    "assistant/message": {"content": "ok", "finish": "stop"},
    "tool/call": {"call_id": "c1", "name": "bash", "arguments": {}},
    "tool/result": {"call_id": "c1", "content": "done", "is_error": False},
    "turn/end": {"turn": 1, "reason": {"kind": "completed"}},
}
WRONG: dict[str, object] = {
    "turn": "1",
    "step": 1.5,
    "id": 7,
    "content": None,
    "call_id": ["c"],
    "name": 3,
    "is_error": "false",
    "reason": "completed",
}


def test_the_good_records_have_no_problem() -> None:
    assert {kind: shape_problem(kind, data) for kind, data in GOOD.items()} == dict.fromkeys(GOOD)


@pytest.mark.parametrize(
    ("kind", "key"), [(kind, key) for kind, data in GOOD.items() for key in data if key in WRONG]
)
def test_a_key_missing_or_of_the_wrong_kind_is_named(kind: str, key: str) -> None:
    missing = {k: v for k, v in GOOD[kind].items() if k != key}
    assert shape_problem(kind, missing) == f"it has no {key!r}"
    wrong = {**GOOD[kind], key: WRONG[key]}
    assert shape_problem(kind, wrong) == f"its {key!r} is not " + {
        "turn": "a whole number", "step": "a whole number", "is_error": "true or false",
        "reason": "an object",
    }.get(key, "text")  # fmt: skip


def test_true_is_not_a_whole_number_and_a_reason_needs_a_kind() -> None:
    assert shape_problem("turn/start", {"turn": True}) == "its 'turn' is not a whole number"
    assert shape_problem("turn/end", {"turn": 1, "reason": {}}) == "its 'reason' has no 'kind' text"


def test_a_gap_names_the_session_and_the_missing_record() -> None:
    with pytest.raises(CorruptSessionError, match=r"session 's' .* record 2 is missing") as info:
        validate("s", [0, 1, 3])
    assert (info.value.session_id, info.value.seq) == ("s", 2)
