"""The ACP machine's prompts with context (rule P18): a second text block, a `resource_link`
and an embedded `resource`, each carrying a mark of its own, and what the model was shown.

A link names a file in the session's cwd (`inside`), the same file as an editor holds it
with unsaved changes (`edited`: the client's `fs/read_text_file` answers other text than
the disk's), a file outside the cwd (`outside`) or one that does not exist (`missing`). The
model's requests must hold each text block's text, an embedded text resource's text (when
the agent advertises `promptCapabilities.embeddedContext`; an agent that does not is sent
none), and for each link its URI (its file name) or the text it names. A link outside the
cwd, a missing file and a blob may fail the prompt (an agent may refuse them); a file
inside may not.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from .._machine import ConformanceMachine, rule
from ._client import AgentProcess, Answer
from ._endpoint import Say, ScriptedEndpoint
from ._properties import CLIENT_TEXT_USED, PROMPT_REACHES_MODEL

__all__ = ["EMBEDDED", "LINKS", "Embedded", "Link", "PromptContext"]

Link = Literal["none", "inside", "edited", "outside", "missing"]
Embedded = Literal["none", "text", "blob"]
# "none" last: the simplest examples, which every run begins with, draw the first of each,
# and a context prompt without its context checks the least of the rule (D484).
LINKS: tuple[Link, ...] = ("edited", "inside", "outside", "missing", "none")
EMBEDDED: tuple[Embedded, ...] = ("text", "blob", "none")


class PromptContext(ConformanceMachine):
    """The P18 rule of `AcpMachine`, whose state it uses: `agent`, `endpoint`, `log`."""

    embedded_context: bool
    """The last `initialize` advertised `promptCapabilities.embeddedContext`."""

    if TYPE_CHECKING:  # of `AcpMachine`
        agent: AgentProcess
        tokens: itertools.count[int]
        log: list[str]
        dir: Path

        @property
        def endpoint(self) -> ScriptedEndpoint: ...

        def _live(self) -> list[Any]: ...
        def _pick(self, index: int) -> Any: ...
        def _token(self, session: Any) -> str: ...
        def _unanswered(self, agent: AgentProcess, what: str) -> Any: ...

        async def _send_prompt(
            self,
            session: Any,
            token: str,
            then: bytes = b"",
            blocks: Sequence[dict[str, Any]] = (),
        ) -> int: ...

        def _expect_end_turn(
            self, session: Any, token: str, answer: Answer | None, reply: str
        ) -> None: ...

    @precondition(lambda self: bool(self._live()))
    @rule(
        session=st.integers(0, 2),
        link=st.sampled_from(LINKS),
        embedded=st.sampled_from(EMBEDDED),
    )
    def prompt_with_context(self, session: int, link: Link, embedded: Embedded) -> None:
        """A prompt of two text blocks, a resource link and an embedded resource: what the
        model is shown holds each."""
        chosen = self._pick(session)
        token = self._token(chosen)
        if not self.embedded_context:
            embedded = "none"
        self.host.call(self._context_prompt, chosen, token, link, embedded)
        self.log.append(f"context-{link}-{embedded}")

    async def _context_prompt(
        self, session: Any, token: str, link: Link, embedded: Embedded
    ) -> None:
        agent, endpoint = self.agent, self.endpoint
        number = token.rsplit("-", 1)[1]
        second = f"second-mark-{number}"
        blocks: list[dict[str, Any]] = [{"type": "text", "text": second}]
        marks: list[tuple[str, ...]] = [(second,)]
        on_disk = f"disk-mark-{number}"
        held = f"editor-mark-{number}"
        name = f"linked-{number}.txt"
        path = (self.dir if link == "outside" else agent.workdir) / name
        if link != "none":
            if link != "missing":
                path.write_text(f"{on_disk}\n")
            if link == "edited":
                agent.buffers[path] = f"{held}\n"
            blocks.append({"type": "resource_link", "uri": path.as_uri(), "name": name})
            marks.append((name, on_disk, held))
        if embedded != "none":
            uri = (agent.workdir / f"embedded-{number}.txt").as_uri()
            resource: dict[str, Any] = (
                {"uri": uri, "text": f"embedded-mark-{number}", "mimeType": "text/plain"}
                if embedded == "text"
                else {
                    "uri": uri,
                    "blob": base64.b64encode(b"\x00\x01binary").decode(),
                    "mimeType": "application/octet-stream",
                }
            )
            blocks.append({"type": "resource", "resource": resource})
            if embedded == "text":
                marks.append((f"embedded-mark-{number}",))
        reply = f"reply {token} done"
        endpoint.scripts[token] = (Say(reply),)
        shown_from, read_from = len(endpoint.bodies), len(agent.reads)
        request_id = await self._send_prompt(session, token, blocks=blocks)
        answer = await agent.answer(request_id)
        if answer is None:
            self._unanswered(agent, f"session/prompt {token} (session {session.id})")
        assert answer is not None
        may_refuse = link in ("outside", "missing") or embedded == "blob"
        if answer.error is not None and may_refuse:
            return
        PROMPT_REACHES_MODEL.check(
            answer.error is None,
            lambda: (
                f"prompt {token} of session {session.id}, with a link to a file in its cwd"
                f"{' and an embedded text resource' if embedded == 'text' else ''}, was "
                f"answered {answer.error}"
            ),
        )
        self._expect_end_turn(session, token, answer, reply)
        shown = "\n".join(endpoint.bodies[shown_from:])
        for alternatives in marks:
            if not any(mark in shown for mark in alternatives):
                PROMPT_REACHES_MODEL.fail(
                    f"prompt {token} of session {session.id} held "
                    + " or ".join(repr(m) for m in alternatives)
                    + f"; no model request of its turn did ({len(endpoint.bodies) - shown_from}"
                    " requests)"
                )
        if link == "edited" and path in agent.reads[read_from:]:
            CLIENT_TEXT_USED.check(
                held in shown,
                lambda: (
                    f"prompt {token} linked {path}, whose text the agent asked the client "
                    f"for (fs/read_text_file answered {held!r}, the editor's unsaved text); "
                    "the model was not shown it"
                    + (f" but was shown the disk's {on_disk!r}" if on_disk in shown else "")
                ),
            )
