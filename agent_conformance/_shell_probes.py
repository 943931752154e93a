"""The shell machine's foreground probes: single `run(spec)` calls on real processes, each
checked at once against rule S1 or S5. What the job's environment holds (a secret-bearing
environment is put in place for the example) and whether its stdin is closed; what a stream
past the in-memory cap keeps and spills; how a command that outlives its timeout ends, one
that ignores SIGTERM included (in `_shell_kill_probes`)."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
from collections.abc import Awaitable, Callable, Generator, Mapping
from contextlib import contextmanager
from typing import Protocol

import trio

from trio_agents import ShellExecutor, ShellRequest, ToolResult

from ._shell_properties import (
    BASH_RESULT_ERROR,
    ENV_PASSED_EXPLICITLY,
    ENV_SCRUBBED,
    OUTCOME_FIELDS,
    OUTPUT_SPILLED_PRIVATELY,
    OUTPUT_TAIL_KEPT,
    STDIN_CLOSED,
)

__all__ = [
    "PASSED",
    "PROBE_SET",
    "big_output",
    "env_differences",
    "probe_environment",
    "probe_output",
    "secret_environment",
]

# The first ones contain KEY, SECRET, TOKEN or PASSWORD somewhere, in some case; the rest
# are real credentials' names that contain none of them; the last are allowed names (LC_*)
# whose values carry a credential (a URL with a user name or a password).
SECRETS: Mapping[str, str] = {
    name: f"trio-agents-probe-value-{index}"
    for index, name in enumerate(
        (
            "MY_SERVICE_API_KEY",
            "my_api_key",
            "GithubToken",
            "DB_PASSWORD_FILE",
            "SECRETS",
            "x_Key_y",
            "KEYBOARD",
            "tokenizer_dir",
            "PassWord",
            "GITHUB_PAT",
            "SSH_AUTH_SOCK",
            "MYSQL_PWD",
            "NPM_CONFIG__AUTH",
        )
    )
} | {
    "DATABASE_URL": "postgres://probe:trio-agents-probe-db@db.invalid/x",
    "HTTPS_PROXY": "http://probe:trio-agents-probe-proxy@proxy.invalid:3128",
    "LC_TRIO_AGENTS_PROBE_URL": "https://probe:trio-agents-probe-lc@host.invalid/",
    # A token alone as the user name, under a scheme with a +; and a user:password URL with
    # an upper-case scheme inside a longer value: S1's `scheme://user@` forms, anywhere.
    "LC_TRIO_AGENTS_PROBE_USER": "git+https://trio-agents-probe-user@host.invalid/r.git",
    "LC_TRIO_AGENTS_PROBE_MIXED": "see HTTPS://probe:trio-agents-probe-mixed@host.invalid/ too",
}
INNOCENT = ("LC_TRIO_AGENTS_PLAIN", "trio-agents-plain-visible")  # allowed: LC_*
# Named in the built-in target's pass_env: a credential URL, passed all the same (S8).
PASSED = ("TRIO_AGENTS_PROBE_PASSED", "https://probe:trio-agents-probe-passed@host.invalid/")
PROBE_SET = ("TRIO_AGENTS_PROBE_SET", "probe-set-value")  # in the built-in target's env
OUTSIDER = ("PLAIN_VALUE", "trio-agents-plain-outside")  # no credential, not allowed either
# An allowed name this process sets that S1 then sets itself: the fixed values must win.
INHERITED_TERM = ("TERM", "xterm-trio-agents-probe")
# What every command's environment holds after the allowed names, unless the user passed
# another value (S8).
FIXED_ENV = {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
CREDENTIAL = re.compile(r"KEY|SECRET|TOKEN|PASSWORD", re.IGNORECASE)
STDIN_WAIT = 2  # seconds a job's read of stdin may block before it counts as open
PAST_TIMEOUT = 0.05  # seconds: the foreground timeout of the commands that outlive it


@contextmanager
def secret_environment() -> Generator[None]:
    """This process's environment (which the executor's commands get an allowlist of) holds
    credentials, an innocent allowed name and an innocent other one, until the block ends."""
    added = {
        **SECRETS,
        INNOCENT[0]: INNOCENT[1],
        OUTSIDER[0]: OUTSIDER[1],
        PASSED[0]: PASSED[1],
        INHERITED_TERM[0]: INHERITED_TERM[1],
    }
    saved = {name: os.environ.get(name) for name in added}
    os.environ.update(added)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


async def probe_environment(shell: ShellExecutor) -> None:
    """A command reads its stdin (EOF at once when closed) and prints its environment: no
    credential's name, and no credential, may be in it, nor a name outside the allowlist;
    the innocent allowed name is."""
    command = f"read -r -t {STDIN_WAIT} _; printf 'stdin=%s\\0' $?; env -0"
    result = await shell.run(shell.resolve(ShellRequest(command, timeout=STDIN_WAIT + 30)))
    text = result.stdout.text
    if result.stdout.truncated and result.stdout.spill_path is not None:
        # A large environment: the complete stream is in the spill file (S5).
        spill = trio.Path(result.stdout.spill_path)
        text = await spill.read_text(encoding="utf-8", errors="replace")
    entries = text.split("\0")
    status = entries[0].removeprefix("stdin=")
    # `read` answers 1 at end of input, more than 128 when its timeout expired.
    STDIN_CLOSED.check(
        status == "1",
        lambda: (
            f"a command's read of stdin returned status {status!r}, not end of input at "
            "once (1): stdin was open"
        ),
    )
    names: dict[str, str] = {}
    for entry in entries[1:]:
        name, equals, value = entry.partition("=")
        if equals:
            names[name] = value
    leaked = sorted(name for name in names if CREDENTIAL.search(name) or name in SECRETS)
    ENV_SCRUBBED.check(not leaked, f"a command's environment held {leaked}")
    values = sorted(n for n, v in SECRETS.items() if v in text)
    ENV_SCRUBBED.check(not values, f"a command's environment held the values of {values}")
    _check_passed(shell, names)
    ENV_SCRUBBED.check(
        OUTSIDER[0] not in names,
        f"a command's environment held {OUTSIDER[0]}, a name outside the allowlist",
    )
    ENV_SCRUBBED.check(
        names.get(INNOCENT[0]) == INNOCENT[1],
        f"a command's environment lost {INNOCENT[0]}, an allowed name (LC_*) with a plain value",
    )
    passed: set[str] = {*getattr(shell, "pass_env", ())}
    passed.update(getattr(shell, "env", None) or {})
    fixed = {n: v for n, v in FIXED_ENV.items() if n not in passed}
    wrong = env_differences(fixed, names)
    ENV_SCRUBBED.check(
        not wrong,
        lambda: (
            f"a command's environment has {wrong}, with "
            f"{INHERITED_TERM[0]}={INHERITED_TERM[1]!r} in this process's"
        ),
    )


def env_differences(wanted: Mapping[str, str], seen: Mapping[str, str]) -> str:
    """Each name of `wanted` that `seen` lacks or holds otherwise, as `NAME='value' (expected
    'other')`, joined by commas; "" when none."""
    return ", ".join(
        f"{n}={seen.get(n)!r} (expected {v!r})"
        for n, v in sorted(wanted.items())
        if seen.get(n) != v
    )


def _check_passed(shell: ShellExecutor, names: Mapping[str, str]) -> None:
    """S8: what the executor says it passes (`pass_env`, `env`: nothing for an executor
    without them) reaches the command as it is."""
    expected = {
        name: os.environ[name] for name in getattr(shell, "pass_env", ()) if name in os.environ
    }
    expected.update(getattr(shell, "env", None) or {})
    wrong = sorted(name for name, value in expected.items() if names.get(name) != value)
    ENV_PASSED_EXPLICITLY.check(
        not wrong,
        lambda: (
            f"a command's environment lost or changed {wrong}, passed explicitly: "
            + ", ".join(f"{n}={names.get(n)!r} (expected {expected[n]!r})" for n in wrong)
        ),
    )


@functools.cache
def big_output(cap: int) -> bytes:
    """`seq -w 1 N` for the smallest power of two N whose output is past `cap`."""
    count = 1
    while True:
        width = len(str(count))
        data = "".join(f"{i:0{width}d}\n" for i in range(1, count + 1)).encode()
        if len(data) > cap:
            return data
        count *= 2


async def probe_output(shell: ShellExecutor, *, at_cap: bool = False) -> None:
    """A command prints past the cap on stdout, one line on stderr, and exits 3: stdout keeps
    its tail and spills all of it to a private file; stderr keeps everything. `at_cap`: it
    prints exactly the cap instead, which is not past it: all kept, nothing spilled."""
    cap = int(getattr(shell, "max_output_bytes", 64_000))
    expected = b"x" * cap if at_cap else big_output(cap)
    if at_cap:
        command = f"head -c {cap} /dev/zero | tr '\\0' x; echo err-line >&2; exit 3"
    else:
        lines = expected.count(b"\n")
        command = f"seq -w 1 {lines}; echo err-line >&2; exit 3"
    result = await shell.run(shell.resolve(ShellRequest(command, timeout=30)))
    OUTCOME_FIELDS.check(
        (result.exit_code, result.signal, result.timed_out, result.cancelled)
        == (3, None, False, False),
        lambda: (
            f"a command that exited 3 within its timeout reported exit_code="
            f"{result.exit_code} signal={result.signal} timed_out={result.timed_out} "
            f"cancelled={result.cancelled}"
        ),
    )
    err = result.stderr
    OUTCOME_FIELDS.check(
        (err.text, err.truncated, err.spill_path, err.total_bytes)
        == ("err-line\n", False, None, 9),
        lambda: (
            f"stderr of 9 bytes, under the cap, reported text={err.text!r} "
            f"truncated={err.truncated} spill_path={err.spill_path} total_bytes={err.total_bytes}"
        ),
    )
    try:
        if at_cap:
            out = result.stdout
            seen = (len(out.text), out.truncated, out.spill_path, out.total_bytes)
            OUTPUT_TAIL_KEPT.check(
                seen == (cap, False, None, cap) and out.text.encode() == expected,
                lambda: (
                    f"a stream of exactly the cap ({cap} bytes), not past it, reported "
                    f"(len(text), truncated, spill_path, total_bytes) = {seen}, not "
                    f"({cap}, False, None, {cap})"
                ),
            )
        else:
            _check_tail(result.stdout, expected, cap)
            _check_spill(result.stdout, expected)
    finally:
        # Checked, so of no more use: spills would pile up over the examples.
        if result.stdout.spill_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(result.stdout.spill_path)


class StreamOutput(Protocol):
    """What the contract says a `RunResult` keeps of one output stream."""

    @property
    def text(self) -> str: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def spill_path(self) -> str | None: ...
    @property
    def total_bytes(self) -> int: ...


def _check_tail(out: StreamOutput, expected: bytes, cap: int) -> None:
    text = out.text.encode()
    last = expected.splitlines(keepends=True)[-1]
    OUTPUT_TAIL_KEPT.check(
        out.truncated and out.total_bytes == len(expected),
        lambda: (
            f"a stream of {len(expected)} bytes past the cap of {cap} reported "
            f"truncated={out.truncated} total_bytes={out.total_bytes}"
        ),
    )
    OUTPUT_TAIL_KEPT.check(
        0 < len(text) <= cap and expected.endswith(text),
        lambda: (
            f"a stream of {len(expected)} bytes past the cap of {cap} kept {len(text)} "
            f"bytes in memory, starting {text[:20]!r} and ending {text[-20:]!r}: not its last "
            f"bytes (the stream ends {expected[-20:]!r})"
        ),
    )
    OUTPUT_TAIL_KEPT.check(
        text.endswith(last), lambda: f"the kept tail does not end with the last line {last!r}"
    )


def _check_spill(out: StreamOutput, expected: bytes) -> None:
    path = out.spill_path
    if path is None:
        OUTPUT_SPILLED_PRIVATELY.fail(f"a stream of {len(expected)} bytes past the cap has no file")
    with open(path, "rb") as spilled:
        content = spilled.read()
    OUTPUT_SPILLED_PRIVATELY.check(
        content == expected,
        lambda: (
            f"the spill file {path} holds {len(content)} bytes, not the complete stream of "
            f"{len(expected)} in order"
        ),
    )
    mode = stat.S_IMODE(os.stat(path).st_mode)
    OUTPUT_SPILLED_PRIVATELY.check(mode == 0o600, f"the spill file {path} has mode {mode:04o}")
    directory = os.path.dirname(path)
    dir_mode = stat.S_IMODE(os.stat(directory).st_mode)
    OUTPUT_SPILLED_PRIVATELY.check(
        dir_mode == 0o700, f"the spill directory {directory} has mode {dir_mode:04o}"
    )
    OUTPUT_SPILLED_PRIVATELY.check(
        os.stat(path).st_uid == os.getuid(), f"the spill file {path} belongs to another user"
    )
    # What the name holds beyond what anyone knows (the pid, the stream, a job id, the
    # extension) must be a long random part.
    name = os.path.basename(path)
    known = rf"{os.getpid()}|stdout|stderr|bash-\d+|\.log$|\.txt$|[^0-9A-Za-z]"
    rest = re.sub(known, "", name)
    OUTPUT_SPILLED_PRIVATELY.check(
        len(rest) >= 12,
        f"the spill file is named {name!r}: beyond the pid and the stream it holds only "
        f"{rest!r}, which can be guessed",
    )


# Foreground `bash` commands and whether each result must be an error: it exits 0, exits
# non-zero, dies of a signal, or outlives its timeout (a short one: it costs that long).
BASH_OUTCOMES: tuple[tuple[str, int | None, bool], ...] = (
    ("printf 'fine'", None, False),
    ("printf 'partial'; exit 3", None, True),
    ("printf 'dying'; kill -KILL $$", None, True),
    ("printf 'slow'; exec sleep 30", 300, True),
)


async def probe_bash_results(
    call: Callable[[dict[str, object]], Awaitable[ToolResult]],
) -> None:
    """Each command of BASH_OUTCOMES through the `bash` tool: its result is an error result
    exactly when the command did not exit 0."""
    for command, timeout_ms, error in BASH_OUTCOMES:
        arguments: dict[str, object] = {"command": command, "description": "a probe"}
        if timeout_ms is not None:
            arguments["timeout_ms"] = timeout_ms
        result = await call(arguments)
        if result.is_error != error:
            limit = f" (timeout_ms {timeout_ms})" if timeout_ms is not None else ""
            BASH_RESULT_ERROR.fail(
                f"bash {command!r}{limit} answered {result!r}, "
                f"{'not ' if error else ''}an error result"
            )
