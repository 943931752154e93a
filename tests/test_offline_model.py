"""The offline model decides from the last prompt and the tool results after it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from trio_agents import AgentOptions, Message, ModelChunk, ModelRequest, TextDelta, ToolCall
from trio_agents._model._offline import OfflineModel


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


class TailOnly(Sequence[Message]):
    """A long history that may be read backwards only: reading it from the start fails."""

    def __init__(self, tail: list[Message]) -> None:
        self.tail = tail

    def __len__(self) -> int:
        return 10_000 + len(self.tail)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        raise AssertionError("the offline model read the history by index")

    def __iter__(self) -> Iterator[Message]:
        raise AssertionError("the offline model read the whole history")

    def __reversed__(self) -> Iterator[Message]:
        return reversed(self.tail)


async def test_an_echo_reads_only_the_tail_of_a_long_history() -> None:
    messages = TailOnly([Message("assistant", "earlier"), Message("user", "hi", source="prompt")])
    request = ModelRequest(messages, [], AgentOptions())
    reply = [chunk async for chunk in OfflineModel().stream(request)]
    text = "".join(c.text for c in reply if isinstance(c, TextDelta))
    assert text.endswith("echo: hi")
