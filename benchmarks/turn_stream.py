"""What following a turn costs, and what a stream holds for a reader that lags (D290, D291).

One turn of `--steps` steps, each streaming `--pieces` text pieces (all but the last step
call a tool), run three ways on the real clock: with nobody following it (`send` and
`wait_idle`), followed by a reader that keeps up (`async for` over `agent.stream`), and with
a reader that reads nothing until the agent is idle. For the lagging reader it also reports
how long the agent took to go idle (it must not wait for the reader), the most text pieces
the stream held at once, and how many events the reader got in the end.

    python benchmarks/turn_stream.py [--repeat 5] [--steps 10] [--pieces 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import trio

from trio_agents import Event, EventBus, Finish, TextDelta, ToolCall, open_agent
from trio_agents.testing import EchoTool, ScriptedModel, ScriptedStep


def model(steps: int, pieces: int) -> ScriptedModel:
    script: list[ScriptedStep] = []
    for step in range(steps):
        items: list[TextDelta | ToolCall | Finish] = [
            TextDelta(f"w{step}-{i} ") for i in range(pieces)
        ]
        if step < steps - 1:
            items += [ToolCall(f"c{step}", "echo", {"text": "x"}), Finish("tool_calls")]
        else:
            items.append(Finish("stop"))
        script.append(ScriptedStep(tuple(items)))
    return ScriptedModel(script)


async def unfollowed(steps: int, pieces: int) -> dict[str, float]:
    async with open_agent(model(steps, pieces), tools=[EchoTool()]) as agent:
        start = time.perf_counter()
        agent.send("go")
        await agent.wait_idle()
        return {"seconds": time.perf_counter() - start}


async def following(steps: int, pieces: int) -> dict[str, float]:
    async with open_agent(model(steps, pieces), tools=[EchoTool()]) as agent:
        start = time.perf_counter()
        events = 0
        async with agent.stream("go") as turn:
            async for _ in turn:
                events += 1
        return {"seconds": time.perf_counter() - start, "events": events}


async def lagging(steps: int, pieces: int) -> dict[str, float]:
    bus = EventBus()
    async with open_agent(model(steps, pieces), tools=[EchoTool()], events=bus) as agent:
        most = 0
        async with agent.stream("go") as turn:

            def watch(_: Event) -> None:
                nonlocal most
                most = max(most, len(turn._live))  # pyright: ignore[reportPrivateUsage]

            bus.connect(watch)
            start = time.perf_counter()
            await agent.wait_idle()
            idle = time.perf_counter() - start
            events = 0
            async for _ in turn:
                events += 1
        return {"idle_seconds": idle, "most_pieces_held": most, "events": events}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--pieces", type=int, default=2000)
    args = parser.parse_args()
    report: dict[str, dict[str, float]] = {}
    for name, run in (("unfollowed", unfollowed), ("following", following), ("lagging", lagging)):
        runs = [trio.run(run, args.steps, args.pieces) for _ in range(args.repeat)]
        report[name] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    report["pieces"] = {"per_step": args.pieces, "steps": args.steps}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
