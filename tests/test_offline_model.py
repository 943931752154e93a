"""The offline model decides from the last prompt and the tool results after it."""

from __future__ import annotations

from trio_agents import AgentOptions, Message, ModelChunk, ModelRequest, TextDelta, ToolCall
from trio_agents._model_offline import OfflineModel


async def chunks(*messages: Message) -> list[ModelChunk]:
    request = ModelRequest(list(messages), [], AgentOptions())
    return [chunk async for chunk in OfflineModel().stream(request)]


async def test_a_command_prompt_calls_the_tool_and_its_answer_is_reported() -> None:
    prompt = Message("user", "/output bash-1", source="prompt")
    (call, _finish) = await chunks(prompt)
    assert isinstance(call, ToolCall)
    assert (call.name, dict(call.arguments)) == ("bash_output", {"job_id": "bash-1"})
    answered = await chunks(
        prompt,
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "out", call_id=call.call_id),
        # A notice that arrived after the tool answered: no second call because of it.
        Message("user", "background job bash-1 finished", source="context"),
    )
    text = "".join(c.text for c in answered if isinstance(c, TextDelta))
    assert text == "tool said:\nout"


async def test_anything_else_is_echoed_and_says_what_it_is() -> None:
    reply = await chunks(Message("user", "hello", source="prompt"))
    text = "".join(c.text for c in reply if isinstance(c, TextDelta))
    assert text.startswith("[offline model")
    assert text.endswith("echo: hello")
