"""The file tools' pure core (issue 37, item 1): an exact replacement with a uniqueness check,
the region a change touched, and a file's lines as `read` shows them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agents._tool._edit import (
    MAX_LINE_CHARS,
    Region,
    Replaced,
    changed_region,
    numbered,
    replace,
)


def test_a_unique_old_string_is_replaced_and_its_line_reported() -> None:
    assert replace("a\nb\nc\n", "b", "B") == Replaced("a\nB\nc\n", 1, 2)


@pytest.mark.parametrize(
    ("text", "old", "new", "why"),
    [
        ("a b a", "a", "x", "old_string occurs 2 times: give more of the surrounding text"),
        ("abc", "z", "x", "old_string was not found: read the file"),
        ("abc", "", "x", "old_string is empty"),
        ("abc", "b", "b", "old_string and new_string are the same"),
    ],
)
def test_an_edit_that_names_no_single_place_is_refused_saying_why(
    text: str, old: str, new: str, why: str
) -> None:
    outcome = replace(text, old, new)
    assert isinstance(outcome, str)
    assert outcome.startswith(why)
    assert "\n" not in outcome


def test_replace_all_replaces_every_occurrence() -> None:
    assert replace("x\na a\na\n", "a", "b", replace_all=True) == Replaced("x\nb b\nb\n", 3, 2)


def test_a_crlf_file_is_matched_with_the_models_lf_text() -> None:
    outcome = replace("one\r\ntwo\r\nthree\r\n", "one\ntwo", "1\n2")
    assert outcome == Replaced("1\r\n2\r\nthree\r\n", 1, 1)


def test_a_new_file_has_no_old_text() -> None:
    assert changed_region(None, "x\n") == Region(1, None, "x\n", 1)


def test_the_region_is_the_changed_lines_with_three_lines_of_context() -> None:
    before = "".join(f"{n}\n" for n in range(1, 21))
    after = before.replace("10\n", "ten\n")
    region = changed_region(before, after)
    assert region == Region(7, "7\n8\n9\n10\n11\n12\n13\n", "7\n8\n9\nten\n11\n12\n13\n", 10)


def test_lines_added_at_the_end_and_removed_at_the_start() -> None:
    assert changed_region("a\nb\n", "a\nb\nc\n") == Region(1, "a\nb\n", "a\nb\nc\n", 3)
    assert changed_region("a\nb\nc\n", "c\n", context=0) == Region(1, "a\nb\n", "", 1)
    assert changed_region("same\n", "same\n") == Region(1, "", "", 1)


texts = st.lists(st.sampled_from(["a\n", "b\n", "c", "\r\n", "\n", "d\x0ce\n"]), max_size=12)


@given(texts.map("".join), texts.map("".join), st.integers(0, 4))
def test_the_region_put_back_in_its_place_makes_the_new_text(
    before: str, after: str, context: int
) -> None:
    region = changed_region(before, after, context=context)
    assert region.old_text is not None
    old_lines = before.split("\n")
    start = sum(len(line) + 1 for line in old_lines[: region.line - 1])
    assert before[start:].startswith(region.old_text)
    rebuilt = before[:start] + region.new_text + before[start + len(region.old_text) :]
    assert rebuilt == after
    assert region.line <= region.changed


def test_read_numbers_lines_pages_and_cuts_long_ones() -> None:
    text = "one\ntwo\r\nthree\nfour"
    assert numbered(text) == ("     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour", 4, 4)
    assert numbered(text, offset=2, limit=2) == ("     2\ttwo\n     3\tthree", 3, 4)
    assert numbered("x" * (MAX_LINE_CHARS + 5))[0].endswith("[line cut at 2000 characters]")
    body, last, total = numbered("a\nb\nc\n", max_chars=18)
    assert (body, last, total) == ("     1\ta\n     2\tb", 2, 3)
    assert numbered("", offset=1) == ("", 0, 0)
    assert numbered("a\f b\n") == ("     1\ta\f b", 1, 1)  # a form feed is not a line end
