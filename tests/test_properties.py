"""Properties and the violations they raise: the rule id first, then what happened, then
what the contract says."""

from __future__ import annotations

import pickle

import pytest

from agent_conformance import ContractViolation, Property
from agent_conformance._properties import catalogue_problems

ORDER = Property(
    "A6",
    "cancel-order",
    "agent",
    "an effective cancel first emits CancelRequested, then clears the queued prompts",
)


def test_a_violation_names_the_rule_the_property_what_happened_and_the_contract() -> None:
    with pytest.raises(ContractViolation) as info:
        ORDER.check(False, "a listener of CancelRequested saw pending=()")
    assert str(info.value) == (
        "A6 (cancel-order): a listener of CancelRequested saw pending=()\n"
        "  the contract: an effective cancel first emits CancelRequested, then clears the "
        "queued prompts"
    )
    assert info.value.rule == "A6"
    assert info.value.property is ORDER
    assert isinstance(info.value, AssertionError)  # Hypothesis shrinks it as a failed check


def test_a_holding_check_does_not_build_its_message() -> None:
    def costly() -> str:
        raise AssertionError("built")

    ORDER.check(True, costly)
    with pytest.raises(ContractViolation, match="built lazily"):
        ORDER.check(False, lambda: "built lazily")


def test_a_violation_survives_pickling() -> None:
    violation = ContractViolation(ORDER, "seen")
    again = pickle.loads(pickle.dumps(violation))
    assert (again.property, again.happened, str(again)) == (ORDER, "seen", str(violation))


@pytest.mark.parametrize(
    ("rule", "name", "message"),
    [
        ("a6", "cancel-order", "rule id 'a6' is not a letter and a number, like 'A6'"),
        ("A6", "Cancel_Order", "property name 'Cancel_Order' is not kebab-case"),
    ],
)
def test_a_malformed_property_says_what_is_wrong(rule: str, name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Property(rule, name, "agent", "says")


def test_catalogue_problems_finds_unchecked_rules_unknown_rules_and_reused_names() -> None:
    other = Property("A9", "cancel-order", "agent", "something else")
    stray = Property("Z1", "stray", "agent", "x")
    assert catalogue_problems([ORDER, other, stray], ["A6", "A7", "A9"]) == [
        "property name 'cancel-order' is used twice",
        "property 'stray' checks Z1, which the contract lacks",
        "rule A7 has no property",
    ]
    assert catalogue_problems([ORDER], ["A6"]) == []


def test_each_property_raises_a_type_of_its_own() -> None:
    # Hypothesis tells bugs apart by type and place: one property's failure is one bug.
    other = Property("A5", "idle-cancel", "agent", "nothing to cancel returns False")
    caught: list[type[BaseException]] = []
    for prop in (ORDER, other, ORDER):
        with pytest.raises(ContractViolation) as info:
            prop.fail("seen")
        caught.append(type(info.value))
    assert caught[0] is caught[2]
    assert caught[0] is not caught[1]
    assert caught[0].__name__ == "ContractViolation"
