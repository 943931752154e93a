"""Tools from typed functions (rules F4-F7): the schema a signature makes, the refusals at
decoration, argument validation, the ToolContext, sync functions in a worker thread, and a
real Agent calling them."""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import pathlib
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

import pytest
import trio
import trio.testing

from agent_conformance import history_problems
from trio_agents import (
    FunctionTool,
    OfflineModel,
    OpenAICompatibleModel,
    ToolContext,
    ToolResult,
    ToolSpec,
    function_tool,
    open_agent,
)
from trio_agents._tool._docstring import Docstring, parse_docstring
from trio_agents.testing import ScriptedModel, reply, tool_step

from .support.helpers import of_type, turn_ends
from .support.sse_server import DONE, Reply, finish, serve, text, tool_delta

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONTEXT = ToolContext("agent-1", "call-7", 2, 3)


def checkout_env() -> dict[str, str]:
    """The environment for a child Python that imports this checkout's trio_agents."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@dataclasses.dataclass
class Place:
    city: str
    country: str = "NO"


@function_tool
async def forecast(
    place: Place,
    days: Annotated[int, "how many days, from today"],
    unit: Unit = Unit.CELSIUS,
    hours: list[int] | None = None,
    *,
    detail: Literal["short", "long"] = "short",
    context: ToolContext,
) -> dict[str, Any]:
    """Forecast the weather at a place.

    Only a few days ahead.

    Args:
        place: where.
        days: this text loses to the Annotated one.
        unit (Unit): the unit of the
            temperatures.
        context: not in the schema.

    Returns:
        the forecast.
    """
    await trio.lowlevel.checkpoint()
    return {"city": place.city, "days": days, "unit": unit, "hours": hours, "call": context.call_id}


def test_F4_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    assert isinstance(forecast, FunctionTool)
    assert forecast.name == "forecast"
    assert forecast.description == "Forecast the weather at a place.\n\nOnly a few days ahead."
    assert forecast.parameters == {
        "$defs": {
            "Place": {
                "additionalProperties": False,  # a nested object is held to its fields too
                "properties": {
                    "city": {"type": "string"},
                    "country": {"default": "NO", "type": "string"},
                },
                "required": ["city"],
                "title": "Place",
                "type": "object",
            },
            "Unit": {"enum": ["celsius", "fahrenheit"], "title": "Unit", "type": "string"},
        },
        "additionalProperties": False,
        "properties": {
            "place": {"$ref": "#/$defs/Place", "description": "where."},
            "days": {"description": "how many days, from today", "type": "integer"},
            "unit": {
                "$ref": "#/$defs/Unit",
                "default": "celsius",
                "description": "the unit of the temperatures.",
            },
            "hours": {
                "anyOf": [{"items": {"type": "integer"}, "type": "array"}, {"type": "null"}],
                "default": None,
            },
            "detail": {"default": "short", "enum": ["short", "long"], "type": "string"},
        },
        "required": ["place", "days"],
        "type": "object",
    }


def test_F4_options_a_sync_function_and_a_sphinx_docstring() -> None:
    def lookup(term: str, limit: float = 2.5, /) -> str:
        """Look a term up.

        :param term: the word.
        :param limit: at most this many.
        :returns: the entry.
        """
        return term

    plain = function_tool(lookup)
    named = function_tool(name="find", description="Find it.")(lookup)
    assert (plain.name, plain.description) == ("lookup", "Look a term up.")
    assert (named.name, named.description, named.function) == ("find", "Find it.", lookup)
    assert plain.parameters["properties"] == {
        "term": {"description": "the word.", "type": "string"},
        "limit": {"default": 2.5, "description": "at most this many.", "type": "number"},
    }
    assert plain.parameters["required"] == ["term"]

    def nothing() -> None:
        pass

    assert function_tool(nothing).parameters == {
        "additionalProperties": False,
        "properties": {},
        "type": "object",
    }


class Greeter:
    """A greeter (the class's text, not the tool's)."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, who: str, context: ToolContext | None = None) -> str:
        """Greet someone.

        Args:
            who: whom to greet.
        """
        await trio.lowlevel.checkpoint()
        self.count += 1
        return f"hi {who} from {context.call_id if context else None}"

    async def reset(self, to: int = 0) -> int:
        """Reset the count."""
        await trio.lowlevel.checkpoint()
        self.count = to
        return to


async def _scaled(factor: int, value: float) -> float:
    """Scale a value."""
    await trio.lowlevel.checkpoint()
    return factor * value


async def test_F4_callable_objects_bound_methods_and_partials_are_read_through() -> None:
    greeter = Greeter()
    greet = function_tool(greeter, name="greet")
    reset = function_tool(greeter.reset)
    double = function_tool(functools.partial(_scaled, 2), name="double")
    assert (greet.description, reset.description, double.description) == (
        "Greet someone.",
        "Reset the count.",
        "Scale a value.",
    )
    assert greet.parameters["properties"] == {
        "who": {"description": "whom to greet.", "type": "string"}
    }
    assert reset.parameters["properties"] == {"to": {"default": 0, "type": "integer"}}
    assert double.parameters["required"] == ["value"]
    assert await greet({"who": "Ada"}, CONTEXT) == "hi Ada from call-7"
    assert await reset({"to": 5}, CONTEXT) == "5"
    assert greeter.count == 5
    assert await double({"value": 1.5}, CONTEXT) == "3.0"


class Opaque:
    pass


def _star(*names: str) -> None: ...
def _double_star(**options: str) -> None: ...
def _untyped(path, mode: str) -> None: ...  # type: ignore[no-untyped-def]
def _opaque(thing: Opaque) -> None: ...
def _callable(hook: Callable[[], None]) -> None: ...
def _bad_default(when: object = Opaque()) -> None: ...
def _two_contexts(a: ToolContext, b: ToolContext) -> None: ...
def _unresolved(x: int) -> None: ...


_unresolved.__annotations__["x"] = "NotDefinedAnywhere"  # a hint that names nothing


def _generator(n: int) -> Iterator[int]:
    yield n


def _stale_doc(limit: int) -> None:
    """Args:
    lmit: a typo.
    """


REFUSED: list[tuple[Callable[..., Any], tuple[str, ...]]] = [
    (_star, ("_star", "*names")),
    (_double_star, ("_double_star", "**options")),
    (_untyped, ("_untyped", "'path'", "no type hint")),
    (_opaque, ("_opaque", "'thing'", "Opaque")),
    (_callable, ("_callable", "'hook'")),
    (_bad_default, ("_bad_default", "'when'", "default")),
    (_two_contexts, ("_two_contexts", "'b'", "ToolContext")),
    (_unresolved, ("_unresolved", "NotDefinedAnywhere")),
    (_generator, ("_generator", "generator")),
    (_stale_doc, ("_stale_doc", "'lmit'", "docstring")),
    (Opaque, ("Opaque", "not a function")),
]


@pytest.mark.parametrize(("function", "names"), REFUSED)
def test_F4_a_signature_without_a_schema_is_refused_naming_the_function_and_parameter(
    function: Callable[..., Any], names: tuple[str, ...]
) -> None:
    with pytest.raises(TypeError) as info:
        function_tool(function)
    message = str(info.value)
    assert message.startswith("function_tool: ")
    assert "\n" not in message
    for name in names:
        assert name in message


def test_F4_a_name_endpoints_refuse_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"'<lambda>'.*pass name="):
        function_tool(lambda: None)
    with pytest.raises(ValueError, match="'two words'"):
        function_tool(name="two words")(_opaque)


async def test_F5_invalid_arguments_are_an_error_result_and_the_function_is_not_called() -> None:
    calls: list[tuple[int, Unit]] = []

    @function_tool
    async def scale(
        factor: int,
        unit: Unit = Unit.CELSIUS,
        place: Place | None = None,
        hours: tuple[int, ...] = (),
    ) -> str:
        calls.append((factor, unit))
        await trio.lowlevel.checkpoint()
        return "scaled"

    cases: dict[str, tuple[object, str]] = {
        "wrong type, wrong enum, unknown": (
            {"factor": "three", "unit": "kelvin", "colour": 1},
            "invalid arguments for scale (it was not run): 'factor': Input should be a valid "
            "integer, unable to parse string as an integer, got \"three\"; 'unit': Input should "
            "be 'celsius' or 'fahrenheit', got \"kelvin\"; 'colour' is not an argument (it "
            "takes factor, unit, place, hours)",
        ),
        "missing": ({}, "invalid arguments for scale (it was not run): 'factor' is required"),
        "inside an object": (
            {"factor": 1, "place": {"country": "SE", "zip": "1"}, "hours": [1, "x"]},
            "invalid arguments for scale (it was not run): 'place.city' is required; "
            "'place.zip' is not a field of its object; 'hours[1]': Input should be a valid "
            'integer, unable to parse string as an integer, got "x"',
        ),
        "not an object": (
            ["factor", 3],
            "invalid arguments for scale (it was not run): the arguments must be a JSON "
            'object, got ["factor", 3]',
        ),
    }
    for arguments, expected in cases.values():
        with trio.testing.assert_checkpoints():
            result = await scale(arguments, CONTEXT)  # type: ignore[arg-type]
        assert result == ToolResult(expected, is_error=True)
    assert calls == []
    # What is valid reaches the function converted to the annotated types.
    assert await scale({"factor": "3", "unit": "fahrenheit"}, CONTEXT) == "scaled"
    assert calls == [(3, Unit.FAHRENHEIT)]


@pytest.mark.realtime
async def test_F6_a_tool_context_parameter_receives_the_calls_context() -> None:
    seen: list[ToolContext] = []

    @function_tool
    def where(context: ToolContext, /, label: str) -> dict[str, Any]:
        seen.append(context)
        return {"label": label, "turn": context.turn}

    assert "context" not in where.parameters["properties"]
    model = ScriptedModel([tool_step(("where", {"label": "x"})), reply("done")])
    async with open_agent(model, tools=[where], session="s-ctx") as agent:
        agent.send("go")
        await agent.wait_idle()
    (call,) = of_type(agent, "tool/call")
    assert seen == [ToolContext("s-ctx", str(call["call_id"]), 1, 1)]
    # A value other than a str is answered as JSON.
    assert of_type(agent, "tool/result")[0]["content"] == '{"label":"x","turn":1}'


@pytest.mark.realtime
async def test_F7_a_sync_function_runs_in_a_worker_thread_without_blocking_trio() -> None:
    entered, release = threading.Event(), threading.Event()
    threads: list[int] = []

    @function_tool
    def blocking(seconds: float) -> str:
        threads.append(threading.get_ident())
        entered.set()
        return "released" if release.wait(seconds) else "timed out"

    async with trio.open_nursery() as nursery:
        results: list[ToolResult | str] = []

        async def call() -> None:
            results.append(await blocking({"seconds": 10}, CONTEXT))

        nursery.start_soon(call)
        # trio goes on while the function blocks its thread: it is this task that lets
        # the function return.
        assert await trio.to_thread.run_sync(entered.wait, 10)
        release.set()
    assert results == ["released"]
    assert threads != [threading.get_ident()]


@pytest.mark.realtime
async def test_F7_a_cancel_waits_for_a_sync_function_and_records_its_result() -> None:
    entered, release = threading.Event(), threading.Event()
    returned: list[str] = []

    @function_tool
    def side_effect(name: str) -> str:
        entered.set()
        release.wait(10)
        returned.append(name)
        return f"wrote {name}"

    model = ScriptedModel([tool_step(("side_effect", {"name": "f.txt"})), reply("not asked")])
    async with open_agent(model, tools=[side_effect]) as agent:
        agent.send("go")
        await trio.to_thread.run_sync(entered.wait, 10)
        agent.cancel("stop")
        await trio.testing.wait_all_tasks_blocked()
        # The thread is not abandoned: the call is still open while the function runs.
        assert of_type(agent, "tool/result") == []
        assert of_type(agent, "turn/end") == []
        release.set()
        await agent.wait_idle()
    assert returned == ["f.txt"]
    (result,) = of_type(agent, "tool/result")
    assert (result["content"], result["is_error"]) == ("wrote f.txt", False)
    assert turn_ends(agent) == [{"kind": "aborted", "reason": "stop", "cause": "user"}]
    assert len(model.requests) == 1
    assert history_problems(agent.session.records, allow_open_turn=False) == []


async def test_function_tools_serve_a_real_agent_through_open_agent() -> None:
    @function_tool
    async def divide(a: float, b: float) -> float:
        """Divide a by b."""
        await trio.lowlevel.checkpoint()
        return a / b

    model = ScriptedModel(
        [
            tool_step(
                ("divide", {"a": 1, "b": 4}),
                ("divide", {"a": 1}),
                ("divide", {"a": 1, "b": 0}),
                ("forecast", {"place": {"city": "Oslo"}, "days": 2}),
            ),
            reply("done"),
        ]
    )
    async with open_agent(model, tools=[divide, forecast]) as agent:
        agent.send("go")
        await agent.wait_idle()
    assert model.requests[0].tools == (
        ToolSpec("divide", "Divide a by b.", divide.parameters),
        ToolSpec("forecast", forecast.description, forecast.parameters),
    )
    results = [(r["content"], r["is_error"]) for r in of_type(agent, "tool/result")]
    calls = [c["call_id"] for c in of_type(agent, "tool/call")]
    by_call = dict(zip([r["call_id"] for r in of_type(agent, "tool/result")], results, strict=True))
    assert [by_call[c] for c in calls] == [
        ("0.25", False),
        ("invalid arguments for divide (it was not run): 'b' is required", True),
        ("ZeroDivisionError: float division by zero", True),
        (f'{{"city":"Oslo","days":2,"unit":"celsius","hours":null,"call":"{calls[3]}"}}', False),
    ]
    # The model read every answer, the error ones included.
    answers = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert sorted(answers) == sorted(content for content, _ in results)
    assert turn_ends(agent) == [{"kind": "completed"}]


async def test_the_offline_model_calls_a_function_tool() -> None:
    async with open_agent(OfflineModel(), tools=[forecast]) as agent:
        agent.send('/tool forecast {"place": {"city": "Bergen"}, "days": "1"}')
        await agent.wait_idle()
    assert '"city":"Bergen","days":1' in str(of_type(agent, "tool/result")[0]["content"])


@pytest.mark.subprocess
def test_the_example_program_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "function_tool.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env=checkout_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[1] == "  -> ok: 42"
    assert lines[3].startswith("  -> error: invalid arguments for add (it was not run): 'a': ")
    assert lines[5].startswith("  -> ok: hello (call ")
    assert "'required': ['a']" in lines[6]


def test_the_contracts_example_runs_and_prints_what_it_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (ROOT / "docs" / "contract.md").read_text()
    section = text.split("\n## Tools from functions\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/contract.md#tools-from-functions", "exec"), {"__name__": "doc"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [
        "False 42",
        "True invalid arguments for add (it was not run): 'a': Input should be a valid "
        'integer, unable to parse string as an integer, got "two"',
        "False hi (call offline-3)",
    ]
    said = " ".join(section.split("It prints", 1)[1].split())
    assert " ".join(printed[3].split()) in said


def test_the_docstring_reader_takes_google_and_sphinx_sections() -> None:
    google = parse_docstring(
        """Do a thing.

        Second paragraph.

        Args:
            first (int): one line.
            second: two lines,
                joined.
            *rest: starred names lose their stars.

        Keyword Args:
            flag: a keyword.

        Example:
            not: a parameter, an example.

        Returns:
            nothing: also not a parameter.
        """
    )
    assert google.description == "Do a thing.\n\nSecond paragraph."
    assert google.parameters == {
        "first": "one line.",
        "second": "two lines, joined.",
        "rest": "starred names lose their stars.",
        "flag": "a keyword.",
    }
    sphinx = parse_docstring(
        "Do it.\n\n:param int first: typed.\n:param second: spans\n    two lines.\n:rtype: str\n"
    )
    assert (sphinx.description, sphinx.parameters) == (
        "Do it.",
        {"first": "typed.", "second": "spans two lines."},
    )
    assert parse_docstring(None) == parse_docstring("") == Docstring()


@pytest.mark.subprocess
def test_pydantic_is_imported_with_the_first_function_tool_not_with_the_package() -> None:
    code = (
        "import sys, trio_agents\n"
        "assert 'pydantic' not in sys.modules, 'import trio_agents pays for pydantic'\n"
        "def f(x: int) -> int:\n    return x\n"
        "trio_agents.function_tool(f)\n"
        "assert 'pydantic' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=checkout_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr


async def test_the_schema_and_the_error_line_go_over_the_wire_to_an_openai_endpoint() -> None:
    @function_tool
    async def book(room: Annotated[str, "the room's name"], hours: int = 1) -> str:
        """Book a meeting room."""
        await trio.lowlevel.checkpoint()
        return f"booked {room} for {hours}h"

    def calls(*arguments: str) -> Reply:
        steps = [
            tool_delta(i, id=f"c{i}", name="book", arguments=a) for i, a in enumerate(arguments)
        ]
        return Reply(body=[*steps, finish("tool_calls"), DONE])

    replies = (
        calls('{"room": "Ada", "hours": "two"}'),
        calls('{"room": "Ada", "hours": 2}'),
        Reply(body=[text("Booked."), finish("stop"), DONE]),
    )
    async with serve(*replies) as server:
        model = OpenAICompatibleModel("m", base_url=server.base_url, api_key="k")
        async with open_agent(model, tools=[book]) as agent:
            agent.send("book Ada for two hours")
            await agent.wait_idle()
    first, second, third = (r.body for r in server.requests)
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "book",
                "description": "Book a meeting room.",
                "parameters": {
                    "additionalProperties": False,
                    "properties": {
                        "room": {"description": "the room's name", "type": "string"},
                        "hours": {"default": 1, "type": "integer"},
                    },
                    "required": ["room"],
                    "type": "object",
                },
            },
        }
    ]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c0",
        "content": "invalid arguments for book (it was not run): 'hours': Input should be a "
        'valid integer, unable to parse string as an integer, got "two"',
    }
    assert third["messages"][-1]["content"] == "booked Ada for 2h"
    assert turn_ends(agent) == [{"kind": "completed"}]
