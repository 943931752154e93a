"""Peers: run.py's turn and cancel figures, measured on pydantic-ai and openai-agents.

    python benchmarks/peers.py [--repeat 5] [--quick] [--fresh]

The work is the same as in run.py: a model that answers at once (text, or one call of a no-op
tool per step for `tool_steps` steps, then text), a tool that only yields to the event loop, and
a model call held forever to cancel. Each peer runs on asyncio, one `asyncio.run` per
measurement. A peer that is not installed is skipped: it is imported only inside the functions
that measure it, so this module imports without either.

API, for the runner:

    available() -> {peer: installed version or None}
    turn_seconds(peer, tool_steps, turns, *, history=True) -> mean seconds per turn
    cancel_seconds(peer, rounds) -> mean seconds from cancelling a held turn to the run done

Every measurement checks its own work once, on a warm-up that is not timed: a turn makes
`tool_steps + 1` model calls and `tool_steps` tool calls and answers "ok"; a cancelled run ends
cancelled, with the held model call unwound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import importlib.util
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, cast

if TYPE_CHECKING:
    from agents import AgentOutputSchemaBase, Handoff, ModelSettings, Tool
    from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
    from agents.models.interface import Model, ModelTracing
    from openai.types.responses.response_prompt_param import ResponsePromptParam
    from pydantic_ai.messages import ModelMessage


class PeerInfo(NamedTuple):
    module: str  # the import name
    distribution: str  # the name its version is read under


PEERS: dict[str, PeerInfo] = {
    "pydantic-ai": PeerInfo("pydantic_ai", "pydantic-ai-slim"),
    "openai-agents": PeerInfo("agents", "openai-agents"),
}


def available() -> dict[str, str | None]:
    """Each peer's installed version, or None when it cannot be imported here."""
    versions: dict[str, str | None] = {}
    for name, info in PEERS.items():
        version: str | None = None
        if importlib.util.find_spec(info.module) is not None:
            try:
                version = importlib.metadata.version(info.distribution)
            except importlib.metadata.PackageNotFoundError:
                version = "unknown"
        versions[name] = version
    return versions


def turn_seconds(peer: str, tool_steps: int, turns: int, *, history: bool = True) -> float:
    """Mean seconds per turn over `turns` turns run one after another on one agent.

    With `history` (the default, as trio-agents' agent keeps its conversation) each turn
    continues the previous one's messages, so the history grows as it does in run.py; without
    it every turn starts a fresh conversation. Both peers do work in proportion to the history
    on every turn (pydantic-ai re-scans it per model request; openai-agents copies and
    re-serializes it per run, and `to_input_list()` rebuilds it), so with `history` the mean
    grows with `turns`: compare figures taken at the same `turns`.
    """
    runners: dict[str, Callable[[int, int, bool], Coroutine[Any, Any, float]]] = {
        "pydantic-ai": _pydantic_ai_turns,
        "openai-agents": _openai_agents_turns,
    }
    return asyncio.run(runners[_known(peer)](tool_steps, turns, history))


def cancel_seconds(peer: str, rounds: int) -> float:
    """Mean seconds from `task.cancel()` on a turn held in its model call to the task done."""
    runners: dict[str, Callable[[int], Coroutine[Any, Any, float]]] = {
        "pydantic-ai": _pydantic_ai_cancel,
        "openai-agents": _openai_agents_cancel,
    }
    return asyncio.run(runners[_known(peer)](rounds))


def _known(peer: str) -> str:
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; known: {', '.join(PEERS)}")
    return peer


# -- shared ----------------------------------------------------------------------------------


class BenchmarkError(Exception):
    """A measurement did not do the work it claims to time."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise BenchmarkError(message)


@dataclass
class Calls:
    model: int = 0
    tool: int = 0


@dataclass
class Gate:
    """Where a held model call tells the benchmark it has been entered and has unwound."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    never: asyncio.Event = field(default_factory=asyncio.Event)  # never set
    unwound: int = 0

    async def hold(self) -> None:
        self.entered.set()
        try:
            await self.never.wait()
        finally:
            self.unwound += 1
        raise BenchmarkError("the held model call was resumed")


async def _timed_turns(
    turn: Callable[[str], Awaitable[object]], calls: Calls, tool_steps: int, turns: int
) -> float:
    calls.model = calls.tool = 0
    output = await turn("warm up")
    _check(output == "ok", f"a turn answered {output!r}, not 'ok'")
    _check(
        (calls.model, calls.tool) == (tool_steps + 1, tool_steps),
        f"a {tool_steps + 1}-step turn made {calls.model} model calls and {calls.tool} tool "
        f"calls, not {tool_steps + 1} and {tool_steps}",
    )
    start = time.perf_counter()
    for _ in range(turns):
        await turn("go")
    return (time.perf_counter() - start) / turns


async def _timed_cancel(
    run: Callable[[], Coroutine[Any, Any, object]], gate: Gate, rounds: int
) -> float:
    total = 0.0
    for index in range(rounds + 1):  # round 0 is the warm-up, checked and not timed
        gate.entered = asyncio.Event()
        unwound = gate.unwound
        task = asyncio.create_task(run())
        await gate.entered.wait()  # the model call has started and now waits on `never`
        start = time.perf_counter()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        elapsed = time.perf_counter() - start
        if index == 0:
            _check(task.cancelled(), "the cancelled run did not end cancelled")
            _check(gate.unwound == unwound + 1, "the held model call was not unwound")
        else:
            total += elapsed
    return total / rounds


# -- pydantic-ai -----------------------------------------------------------------------------


async def _pydantic_ai_turns(tool_steps: int, turns: int, history: bool) -> float:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    calls = Calls()

    async def instant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.model += 1
        done = since_prompt = 0
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        done += 1
                        since_prompt += 1
                    elif isinstance(part, UserPromptPart):
                        since_prompt = 0
        # A real model reports its usage. Without one, FunctionModel estimates it by counting
        # the words of the whole history on every step: a cost of the test double, not the
        # framework's, so it is not measured.
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        if since_prompt < tool_steps:
            return ModelResponse([ToolCallPart("noop", {}, f"c{done}")], usage=usage)
        return ModelResponse([TextPart("ok")], usage=usage)

    # Named, as otherwise every run inspects the caller's frame to name the agent.
    agent = Agent(FunctionModel(instant), name="bench")

    @agent.tool_plain
    async def noop() -> str:
        """Does nothing."""
        calls.tool += 1
        await asyncio.sleep(0)
        return "ok"

    messages: list[ModelMessage] = []

    async def turn(prompt: str) -> object:
        # History: the previous run's messages go back in as `message_history`, so each turn
        # continues one growing conversation, as trio-agents' agent does.
        nonlocal messages
        result = await agent.run(prompt, message_history=messages)
        if history:
            messages = result.all_messages()
        return result.output

    return await _timed_turns(turn, calls, tool_steps, turns)


async def _pydantic_ai_cancel(rounds: int) -> float:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    gate = Gate()

    async def held(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await gate.hold()
        raise AssertionError("unreachable")

    agent = Agent(FunctionModel(held), name="bench")
    return await _timed_cancel(lambda: agent.run("go"), gate, rounds)


# -- openai-agents ---------------------------------------------------------------------------


def _openai_agents_model(
    respond: Callable[[str | list[TResponseInputItem]], Awaitable[list[TResponseOutputItem]]],
) -> Model:
    """An `agents` Model whose every response is `respond(input)`, with no usage."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage

    class Scripted(Model):
        async def get_response(
            self,
            system_instructions: str | None,
            input: str | list[TResponseInputItem],
            model_settings: ModelSettings,
            tools: list[Tool],
            output_schema: AgentOutputSchemaBase | None,
            handoffs: list[Handoff],
            tracing: ModelTracing,
            *,
            previous_response_id: str | None,
            conversation_id: str | None,
            prompt: ResponsePromptParam | None,
        ) -> ModelResponse:
            return ModelResponse(output=await respond(input), usage=Usage(), response_id=None)

        def stream_response(
            self,
            system_instructions: str | None,
            input: str | list[TResponseInputItem],
            model_settings: ModelSettings,
            tools: list[Tool],
            output_schema: AgentOutputSchemaBase | None,
            handoffs: list[Handoff],
            tracing: ModelTracing,
            *,
            previous_response_id: str | None,
            conversation_id: str | None,
            prompt: ResponsePromptParam | None,
        ) -> AsyncIterator[TResponseStreamEvent]:
            raise NotImplementedError("only Runner.run is measured")

    return Scripted()


async def _openai_agents_turns(tool_steps: int, turns: int, history: bool) -> float:
    from agents import Agent, RunConfig, Runner, function_tool
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    calls = Calls()

    async def instant(input: str | list[TResponseInputItem]) -> list[TResponseOutputItem]:
        calls.model += 1
        done = since_prompt = 0
        for item in [] if isinstance(input, str) else input:
            entry = cast(Mapping[str, Any], item)
            if entry.get("type") == "function_call_output":
                done += 1
                since_prompt += 1
            elif entry.get("role") == "user":
                since_prompt = 0
        if since_prompt < tool_steps:
            call = ResponseFunctionToolCall(
                id=f"fc{done}",
                call_id=f"c{done}",
                type="function_call",
                name="noop",
                arguments="{}",
            )
            return [call]
        text = ResponseOutputText(text="ok", type="output_text", annotations=[], logprobs=[])
        message = ResponseOutputMessage(
            id=f"m{calls.model}",
            type="message",
            role="assistant",
            status="completed",
            content=[text],
        )
        return [message]

    @function_tool
    async def noop() -> str:
        """Does nothing."""
        calls.tool += 1
        await asyncio.sleep(0)
        return "ok"

    agent = Agent(name="bench", model=_openai_agents_model(instant), tools=[noop])
    # One RunConfig for every run: without one, each run builds (and closes) its own model
    # provider. Tracing off, as with it on every run exports spans to OpenAI's backend.
    config = RunConfig(tracing_disabled=True)
    items: list[TResponseInputItem] = []

    async def turn(prompt: str) -> object:
        # History: the previous run's `to_input_list()` plus the new user message, so each turn
        # continues one growing conversation, as trio-agents' agent does.
        nonlocal items
        if not history:
            return (await Runner.run(agent, prompt, run_config=config)).final_output
        result = await Runner.run(
            agent, [*items, {"role": "user", "content": prompt}], run_config=config
        )
        items = result.to_input_list()
        return result.final_output

    return await _timed_turns(turn, calls, tool_steps, turns)


async def _openai_agents_cancel(rounds: int) -> float:
    from agents import Agent, RunConfig, Runner

    gate = Gate()

    async def held(input: str | list[TResponseInputItem]) -> list[TResponseOutputItem]:
        await gate.hold()
        raise AssertionError("unreachable")

    agent = Agent(name="bench", model=_openai_agents_model(held))
    config = RunConfig(tracing_disabled=True)
    return await _timed_cancel(lambda: Runner.run(agent, "go", run_config=config), gate, rounds)


# -- alone -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    from run import summary  # imported here: run.py needs trio-agents, this module does not

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer iterations, for a smoke run")
    parser.add_argument("--fresh", action="store_true", help="a fresh conversation per turn")
    parser.add_argument(
        "--turns", type=int, help="1-step turns per run (3-step: half); default 200, quick 50"
    )
    args = parser.parse_args(argv)
    n = args.repeat
    turns = args.turns or (50 if args.quick else 200)
    rounds = 50 if args.quick else 200
    history = not args.fresh
    print(f"peer benchmarks: median of {n} runs, python {sys.version.split()[0]}")
    conversation = "one per run, growing every turn" if history else "fresh every turn"
    print(f"{turns} 1-step or {turns // 2} 3-step turns a run; conversation: {conversation}")
    for peer, version in available().items():
        print(f"\n{peer} {version or '(not installed)'}")
        if version is None:
            continue
        one = [turn_seconds(peer, 0, turns, history=history) for _ in range(n)]
        three = [turn_seconds(peer, 2, turns // 2, history=history) for _ in range(n)]
        extra = [(t - o) / 2 for t, o in zip(three, one, strict=True)]
        cancel = [cancel_seconds(peer, rounds) for _ in range(n)]
        print(f"  1-step turn           {summary(one, 1e6, 'us')}")
        print(f"  3-step turn           {summary(three, 1e6, 'us')}")
        print(f"  each extra tool step  {summary(extra, 1e6, 'us')}")
        print(f"  cancel -> run done    {summary(cancel, 1e6, 'us')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
