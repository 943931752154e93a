"""The properties the function machine checks, rule by rule (F4-F7 of docs/contract.md).
Each says, in the contract's words, what a violation quotes. Pure: no trio, no Hypothesis."""

from __future__ import annotations

from ._properties import Property

__all__ = [
    "ARGUMENTS_CONVERTED",
    "INVALID_ARGUMENTS_REFUSED",
    "PROPERTIES",
    "RESULT_AS_RETURNED",
    "SCHEMA_FROM_SIGNATURE",
    "SIGNATURE_REFUSED",
    "SYNC_CALL_NOT_ABANDONED",
]


def _function(rule: str, name: str, says: str) -> Property:
    return Property(rule, name, "function", says)


SCHEMA_FROM_SIGNATURE = _function(
    "F4",
    "schema-from-signature",
    "`parameters` is the JSON schema of an object with one property per parameter (a "
    "ToolContext one is not in it), of its annotated type; a parameter with a default is "
    "optional and its default is in the schema; other properties are refused, also in "
    'nested dataclasses; a parameter is described by `Annotated[T, "text"]`, its `Args:` '
    "entry or its `:param name:` line; `name` and `description` are the function's name and "
    "docstring text unless `name=` or `description=` is given",
)
SIGNATURE_REFUSED = _function(
    "F4",
    "signature-refused-at-once",
    "a function whose signature cannot become a schema raises TypeError when `function_tool` "
    "is applied, one line starting `function_tool:` naming the function and the parameter; "
    "a name that is not 1 to 64 letters, digits, `_` or `-` raises ValueError",
)
ARGUMENTS_CONVERTED = _function(
    "F5",
    "arguments-converted",
    "valid arguments are converted to the parameters' types before the function runs (a "
    'JSON value that means the type is taken: `"3"` for an int is 3, `"red"` for an '
    "Enum is its member, an object for a dataclass is an instance of it), and a parameter "
    "left out gets its default",
)
INVALID_ARGUMENTS_REFUSED = _function(
    "F5",
    "invalid-arguments-refused",
    "invalid arguments (a wrong type or value, a missing required argument, an argument the "
    "function does not have, arguments that are not a JSON object) answer an error result "
    "whose content is one line, `invalid arguments for NAME (it was not run): ` and each "
    "problem naming its argument; the function is not called",
)
RESULT_AS_RETURNED = _function(
    "F6",
    "result-as-returned",
    "a ToolContext parameter receives the call's context; what the function returns is the "
    "call's result: a str or a ToolResult as it is, anything else as JSON (None is null); "
    "an exception is an error result `ExcType: message`",
)
SYNC_CALL_NOT_ABANDONED = _function(
    "F7",
    "sync-call-not-abandoned",
    "a plain `def` runs in a worker thread, and a cancel does not abandon it: the call "
    "stays open until the function returns, and its value is the call's result",
)

PROPERTIES: tuple[Property, ...] = (
    SCHEMA_FROM_SIGNATURE,
    SIGNATURE_REFUSED,
    ARGUMENTS_CONVERTED,
    INVALID_ARGUMENTS_REFUSED,
    RESULT_AS_RETURNED,
    SYNC_CALL_NOT_ABANDONED,
)
