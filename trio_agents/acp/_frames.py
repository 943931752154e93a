"""The server's outgoing frames: encoded lines, and streamed text not yet encoded, which
the writer merges into one update per run of chunks of one message of one session. Pure; no
trio import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from . import _jsonrpc as rpc
from . import _mapping as m

__all__ = ["FRAME_OVERHEAD", "Outgoing", "Text", "encode", "size", "update_frame"]

FRAME_OVERHEAD: Final = 64  # bytes counted per queued item besides its text


@dataclass(slots=True)
class Text:
    """Streamed text not yet encoded: the writer merges a run of these for one session."""

    session_id: str
    text: str
    message_id: str


Outgoing = bytes | Text


def encode(frames: list[Outgoing]) -> bytes:
    """The frames as one write. A run of text chunks of one session becomes one update:
    a model that streams faster than the client reads costs one frame, not one per chunk."""
    out: list[bytes] = []
    run: list[str] = []
    run_of: tuple[str, str] | None = None  # the session and message of the run

    def flush_run() -> None:
        if run_of is not None:
            session_id, message_id = run_of
            out.append(update_frame(session_id, m.agent_text_update("".join(run), message_id)))
        run.clear()

    for frame in frames:
        if isinstance(frame, Text):
            if (frame.session_id, frame.message_id) != run_of:
                flush_run()
                run_of = (frame.session_id, frame.message_id)
            run.append(frame.text)
        else:
            flush_run()
            run_of = None
            out.append(frame)
    flush_run()
    return b"".join(out)


def size(frame: Outgoing) -> int:
    """What a queued frame counts against the output budget (its text, as UTF-8)."""
    if isinstance(frame, Text):
        return len(frame.text.encode("utf-8", "surrogatepass")) + FRAME_OVERHEAD
    return len(frame) + FRAME_OVERHEAD


def update_frame(session_id: str, update: Mapping[str, Any]) -> bytes:
    return rpc.encode_notification("session/update", {"sessionId": session_id, "update": update})
