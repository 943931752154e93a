"""What an agent has been told but has not yet delivered to its model. Pure; no trio import.

Two FIFOs:

- prompts: one prompt is taken per turn, oldest first (one send, one turn);
- step input: steering and injected context, all taken at the next step boundary, in the
  order they were accepted.

Steering differs from context in two ways the agent enforces, not the inbox: steering keeps
a turn going and is re-queued as a prompt if a turn ends without taking it; context never
wakes anything and waits for whichever step comes next.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from .._model._seam import Message

__all__ = ["Inbox", "InboxMessage", "MessageKind", "context_of"]

MessageKind = Literal["prompt", "steering", "context"]


@dataclass(frozen=True, slots=True)
class InboxMessage:
    id: str
    content: str
    kind: MessageKind
    system: bool = False  # injected context that reaches the model as a system message
    durable: bool = False  # a prompt with a `prompt/queued` record: its drop is recorded too


class Inbox:
    __slots__ = ("_prompts", "_step_input")

    def __init__(self) -> None:
        # A list, not a deque: an empty deque allocates a 64-slot block, which is most of an
        # idle agent's inbox; queues are short, so popping the head is cheap.
        self._prompts: list[InboxMessage] = []
        self._step_input: list[InboxMessage] = []

    def push(self, message: InboxMessage) -> None:
        if message.kind == "prompt":
            self._prompts.append(message)
        else:
            self._step_input.append(message)

    @property
    def has_prompts(self) -> bool:
        return bool(self._prompts)

    def pop_prompt(self) -> InboxMessage | None:
        """The oldest queued prompt, removed, or None."""
        return self._prompts.pop(0) if self._prompts else None

    def claim_step_input(self) -> list[InboxMessage]:
        """Every pending steering and context message, in acceptance order, removed."""
        claimed, self._step_input = self._step_input, []
        return claimed

    @property
    def has_steering(self) -> bool:
        return any(m.kind == "steering" for m in self._step_input)

    @property
    def has_work(self) -> bool:
        """Whether anything that would make the agent run is pending (context is not work)."""
        return bool(self._prompts) or self.has_steering

    def work_ids(self) -> frozenset[str]:
        """Ids of queued prompts and steering: what a cancel would drop."""
        return frozenset(m.id for m in self if m.kind != "context")

    def discard_work(self, only: frozenset[str] | None = None) -> list[InboxMessage]:
        """Remove and return queued prompts and steering (what a cancel drops), all of it or
        `only` those ids; context is kept."""

        def dropped(m: InboxMessage) -> bool:
            return m.kind != "context" and (only is None or m.id in only)

        out = [m for m in self._step_input if dropped(m)]
        out.extend(m for m in self._prompts if dropped(m))
        self._prompts = [m for m in self._prompts if not dropped(m)]
        self._step_input = [m for m in self._step_input if not dropped(m)]
        return out

    def requeue_steering(self) -> list[InboxMessage]:
        """Turn unconsumed steering into prompts at the head of the queue, in order.

        Steering was addressed to work that has just ended, so it is the most immediate
        thing to do next; each steering message becomes its own prompt (one message, one
        turn), keeping its id.
        """
        steering = [m for m in self._step_input if m.kind == "steering"]
        if not steering:
            return []
        self._step_input = [m for m in self._step_input if m.kind == "context"]
        prompts = [InboxMessage(m.id, m.content, "prompt") for m in steering]
        self._prompts[0:0] = prompts
        return prompts

    def __iter__(self) -> Iterator[InboxMessage]:
        """Pending messages: step input first (it is delivered first), then prompts."""
        yield from self._step_input
        yield from self._prompts

    def __len__(self) -> int:
        return len(self._prompts) + len(self._step_input)


def context_of(message: Message) -> tuple[str, bool]:
    """What `inject(message)` queues: the content, and whether it reaches the model as a
    system message. Raises ValueError for a role other than "user" or "system" or a message
    carrying tool calls, TypeError for anything but a `Message` with str content."""
    if not isinstance(message, Message):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"inject() takes a Message or a str, got {type(message).__name__}")
    if message.role not in ("user", "system"):
        raise ValueError(
            f"inject() takes context as a 'user' or 'system' message, got role "
            f"{message.role!r}; model and tool turns come from the model and the tools"
        )
    if message.tool_calls or message.call_id is not None:
        raise ValueError(
            "inject() takes context without tool calls or a call_id; "
            "model and tool turns come from the model and the tools"
        )
    if not isinstance(message.content, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"inject() takes a Message whose content is a str, got {type(message.content).__name__}"
        )
    return message.content, message.role == "system"
