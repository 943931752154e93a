"""The ACP machine's listing of sessions (rule P11): an agent that advertises
`sessionCapabilities.list` lists every session it created, in this process or an earlier
one, exactly once across the pages of one listing, with the `cwd` it was created in; with
`cwd` given, only that directory's sessions; and a session created between two pages makes
the later pages neither repeat nor skip one.

Once an example, the rule may first create enough sessions to need pages (`BULK`, past the
page sizes agents use), and one in another directory, which a listing of the example's
directory must leave out.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from hypothesis import strategies as st
from hypothesis.stateful import precondition

from .._machine import ConformanceMachine, rule
from . import _wire as wire
from ._client import AgentProcess, Answer
from ._properties import SESSIONS_ALL_LISTED, SESSIONS_LISTED

__all__ = ["BETWEEN", "BULK", "Between", "SessionListing"]

BULK = 60  # sessions made at once: past a page of 50, the size the agents we know use
# What happens between the first page and the next: nothing, a session made, or a session
# written to (a prompt): neither may make a later page repeat or skip one.
Between = Literal["nothing", "create", "write"]
BETWEEN: tuple[Between, ...] = ("nothing", "create", "write")
MAX_PAGES = 40  # a listing that goes on past this many pages does not end


class SessionListing(ConformanceMachine):
    """The P11 rule of `AcpMachine`, whose state it uses: `agent`, `sessions`, `log`."""

    can_list: bool
    extra_ids: list[str]
    """The sessions this rule made in the work directory (`new_session` makes the rest)."""
    elsewhere: list[str]
    """Every session this example created in another directory."""
    bulked: bool
    listings: int

    if TYPE_CHECKING:  # of `AcpMachine`
        agent: AgentProcess
        sessions: list[Any]
        log: list[str]
        prompted: set[str]
        lists_unprompted: bool
        touched: set[str]
        one_session: bool

        def _live(self) -> list[Any]: ...
        def _one_session_only(self) -> None: ...
        def prompt(self, session: int, tool: bool) -> None: ...
        def new_session(self) -> None: ...

        served_here: bool

        def _ask(
            self, agent: AgentProcess, method: str, params: Mapping[str, Any], what: str = ""
        ) -> Answer: ...

    def _create(self, cwd: str) -> str | None:
        answer = self._ask(self.agent, "session/new", {"cwd": cwd, "mcpServers": []})
        if answer.error is not None:
            return None
        # This process serves a session now: a later refusal is a limit (D482, D518).
        self.served_here = True
        return str(answer.result["sessionId"])

    async def _create_many(self, cwd: str, count: int) -> tuple[list[str | None], int]:
        """`count` session/new requests sent at once (as an editor restoring its tabs
        would), then their answers: the ids, None for each that failed or got no answer;
        and how many were answered with an error."""
        params: dict[str, Any] = {"cwd": cwd, "mcpServers": []}
        ids = [await self.agent.start_request("session/new", params) for _ in range(count)]
        made: list[str | None] = []
        refused = 0
        for request_id in ids:
            answer = await self.agent.answer(request_id)
            ok = answer is not None and answer.error is None
            refused += answer is not None and answer.error is not None
            made.append(str(answer.result["sessionId"]) if answer is not None and ok else None)
        if any(made):
            self.served_here = True
        return made, refused

    # Twice an example at most: the other rules' windows need the program's steps more.
    @precondition(lambda self: self.can_list and self.listings < 2)
    @rule(bulk=st.booleans(), between=st.sampled_from(BETWEEN), filtered=st.booleans())
    def list_sessions(self, bulk: bool, between: Between, filtered: bool) -> None:
        """session/list, following each `nextCursor` to the end: of the example's work
        directory (`filtered`) or of every directory. With `bulk` (once an example), first
        make enough sessions to need pages, and one in another directory; after the first
        page, `between` makes one more session (`create`), or prompts the oldest live one,
        which writes to it (`write`); the listing that makes pages does both (D449)."""
        self.listings += 1
        workdir = str(self.agent.workdir)
        paged = bulk and not self.bulked and not self.one_session
        if paged:
            self.bulked = True
            if not self._live():
                # A live session older than the bulk, to write to between the pages: it
                # lists on a later page, and a write must not move it out of the listing.
                self.new_session()
            made_many, refused = self.host.call(self._create_many, workdir, BULK)
            unanswered = made_many.count(None) - refused
            SESSIONS_LISTED.check(
                not unanswered,
                lambda: f"{unanswered} of {BULK} session/new sent at once got no answer",
            )
            self.extra_ids.extend(sid for sid in made_many if sid is not None)
            if refused:
                # A limit on a process's sessions, which the spec allows (D482), or sessions
                # lost to the concurrency: one sent alone now tells them apart (D518).
                alone = self._create(workdir)
                SESSIONS_LISTED.check(
                    alone is None,
                    lambda: (
                        f"{refused} of {BULK} session/new sent at once were refused, and one "
                        f"sent alone right after was made ({alone}): a session/new must not "
                        "fail for being sent beside others"
                    ),
                )
                self._one_session_only()
            else:
                other = os.path.join(os.path.dirname(workdir), "elsewhere")
                os.makedirs(other, exist_ok=True)
                made = self._create(other)
                if made is not None:
                    self.elsewhere.append(made)
        # What has a turn that ended before the listing began: a session written to between
        # its pages may have been on no page yet, and one whose prompt was cancelled may
        # hold nothing an agent keeps.
        answered = {str(s.id) for s in self.sessions if s.turns}
        made_here = [str(session.id) for session in self.sessions] + self.extra_ids
        expected = made_here + ([] if filtered else list(self.elsewhere))
        params: dict[str, Any] = {"cwd": workdir} if filtered else {}
        seen: list[tuple[str, object]] = []
        late: list[str] = []
        cursor: object = None
        for number in range(MAX_PAGES):
            asked = dict(params) if cursor is None else {**params, "cursor": cursor}
            what = f" (page {number + 1}{', filtered' if filtered else ''})"
            answer = self._ask(self.agent, "session/list", asked, what)
            SESSIONS_LISTED.check(
                answer.error is None,
                lambda: f"session/list {asked} was answered {answer.error}",  # noqa: B023
            )
            items: list[Any] = wire.dig(answer.result, "sessions") or []
            for item in items:
                seen.append((str(wire.dig(item, "sessionId")), wire.dig(item, "cwd")))
            cursor = wire.dig(answer.result, "nextCursor")
            # The listing that makes pages does both, whatever was drawn: it is the one
            # listing of the example sure to have a later page.
            if number == 0 and (between == "create" or paged):
                made = self._create(workdir)
                if made is not None:
                    self.extra_ids.append(made)
                    late.append(made)
            if number == 0 and (between == "write" or paged) and self._live():
                self.prompt(0, False)
            if cursor is None:
                break
        else:
            SESSIONS_LISTED.fail(f"session/list still gave a nextCursor after {MAX_PAGES} pages")
        self._check_listing(expected, late, seen, filtered, answered)
        self.log.append(f"list{' bulk' if bulk else ''} {between}")

    def _check_listing(
        self,
        expected: list[str],
        late: list[str],
        seen: list[tuple[str, object]],
        filtered: bool,
        answered: set[str],
    ) -> None:
        counts = Counter(sid for sid, _ in seen)
        twice = sorted(sid for sid, n in counts.items() if n > 1)
        where = "of the work directory" if filtered else "of every directory"
        SESSIONS_LISTED.check(
            not twice,
            lambda: (
                f"a listing {where}, followed to its last page, gave {len(seen)} sessions: "
                f"{twice} more than once"
            ),
        )
        # An agent may keep a session only once it holds something (the spec asks for a
        # list, not for every session): one never prompted is missed only by an agent that
        # lists such sessions, as this listing or an earlier one showed (D479). A session
        # loaded or switched holds something too: only an untouched one is evidence.
        self.lists_unprompted = self.lists_unprompted or any(
            sid in counts
            for sid in expected
            if sid not in self.prompted and sid not in self.touched
        )
        owed = [sid for sid in expected if sid in answered or self.lists_unprompted]
        missing = [sid for sid in owed if sid not in counts]
        SESSIONS_ALL_LISTED.check(
            not missing,
            lambda: (
                f"a listing {where}, followed to its last page, gave {len(seen)} sessions: "
                f"not {missing} of the {len(owed)} "
                + ("created" if self.lists_unprompted else "with a turn that ended")
            ),
        )
        if not filtered:
            return
        workdir = os.path.realpath(self.agent.workdir)
        stray = [sid for sid, _ in seen if sid in self.elsewhere]
        others = [
            (sid, cwd)
            for sid, cwd in seen
            if not isinstance(cwd, str) or os.path.realpath(cwd) != workdir
        ]
        SESSIONS_LISTED.check(
            not stray and not others,
            lambda: f"a listing of {workdir} gave sessions of other directories: {stray or others}",
        )
        unknown = [sid for sid, _ in seen if sid not in expected and sid not in late]
        SESSIONS_LISTED.check(
            not unknown,
            lambda: f"a listing of {workdir} gave sessions nobody created there: {unknown}",
        )
