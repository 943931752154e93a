"""`Record.data_json` encodes a record's data as `json.dumps` encodes its plain copy: the
stores write it instead of the copy (D367)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agents import Record

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_VALUES: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), _VALUES, max_size=6))
def test_data_json_is_what_json_dumps_makes_of_the_plain_copy(data: dict[str, Any]) -> None:
    record = Record.of("context/message", data)
    assert record.data_json() == json.dumps(record.to_json()["data"])


def test_data_json_refuses_what_json_dumps_refuses() -> None:
    # `Record.of` refuses such a value at once (D383); a record built directly still
    # cannot be encoded.
    with pytest.raises(TypeError, match=r"set \{1, 2\} cannot be stored"):
        Record.of("context/message", {"value": {1, 2}})
    record = Record("context/message", {"value": {1, 2}})
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        json.dumps(record.to_json()["data"])
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        record.data_json()
