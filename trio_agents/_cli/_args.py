"""The flags and argument types the `trio-agents` subcommands share, and their logging.

Each command keeps its own help text, defaults and choices; what is shared is the flag, its
type and where its value goes.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .._agent._system_prompt import coding_system_prompt
from .._shell._env import check_env_name
from .._shell._sandbox import fallback, mark_warned, probe_now, unavailable
from .._shell._sandbox_policy import SandboxPolicy
from .._store._errors import non_directory_ancestor
from .._store._postgres import is_postgres_url
from .._store._sqlite import default_store_path
from ._model_choice import MODELS

__all__ = [
    "add_max_steps",
    "add_model",
    "add_pass_env",
    "add_sandbox",
    "add_store",
    "add_system_prompt",
    "configure_logging",
    "positive_int",
    "sandbox_policy",
    "store_target",
]


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, or a usage error that says so."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def add_store(
    parser: argparse.ArgumentParser,
    *,
    what: str = "the SQLite session store",
    metavar: str | None = None,
) -> None:
    """`--store`: a path, a `postgresql://` URL (kept as the str), or None when not given
    (meaning `default_store_path()`)."""
    parser.add_argument(
        "--store",
        type=store_target,
        default=None,
        metavar=metavar,
        help=f"{what}, or a postgresql:// URL (default: {default_store_path()})",
    )


def store_target(text: str) -> Path | str:
    """An argparse type: a PostgreSQL URL as it is, anything else a path."""
    if not text:
        # Path("") is the current directory, which the error would then name.
        raise argparse.ArgumentTypeError("an empty value names no file; give a path or a URL")
    return text if is_postgres_url(text) else Path(text)


def store_directory_problem(path: Path) -> str | None:
    """Why a store file the user named cannot be made at `path`, or None. The store makes
    the directories of its default path, but a mistyped `--store` must not make a tree of
    them (D382)."""
    if path.parent.is_dir():
        return None
    blocker = non_directory_ancestor(path)
    if blocker is not None:
        return f"--store {path}: {blocker} is not a directory; give another path"
    return (
        f"--store {path}: its directory {path.parent} does not exist; create it, or give "
        "another path"
    )


def add_model(
    parser: argparse.ArgumentParser, *, default: str, help: str, extra: Sequence[str] = ()
) -> None:
    """`--model`: a name of `MODELS`, or one of `extra` (which the command resolves)."""
    parser.add_argument("--model", choices=[*extra, *sorted(MODELS)], default=default, help=help)


def add_max_steps(
    parser: argparse.ArgumentParser, *, help: str, metavar: str | None = None
) -> None:
    """`--max-steps`: `AgentOptions.max_steps`, None when not given (no limit)."""
    parser.add_argument("--max-steps", type=positive_int, default=None, metavar=metavar, help=help)


def prompt_file(text: str) -> str:
    """An argparse type: the text of a UTF-8 file, or a usage error naming the file and why
    it cannot be read."""
    try:
        return Path(text).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not UTF-8 text") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: {reason}") from None


def add_system_prompt(parser: argparse.ArgumentParser) -> None:
    """`--system-prompt TEXT` or `--system-prompt-file PATH` (one of them): the text sent as
    the system prompt; `coding_system_prompt` (made per session) when neither is given."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--system-prompt",
        metavar="TEXT",
        default=coding_system_prompt,
        help="send TEXT as the system prompt instead of the default one (which names the "
        "working directory, the platform and what each tool is for); '' sends none",
    )
    group.add_argument(
        "--system-prompt-file",
        dest="system_prompt",
        type=prompt_file,
        metavar="PATH",
        default=coding_system_prompt,
        help="send the text of this UTF-8 file as the system prompt instead of the default",
    )


def env_name(text: str) -> str:
    """An argparse type: an environment variable's name, or a usage error that says so."""
    try:
        return check_env_name(text, "name")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_pass_env(parser: argparse.ArgumentParser) -> None:
    """`--pass-env NAME` (repeatable): `ShellExecutor(pass_env=...)`, () when not given."""
    parser.add_argument(
        "--pass-env",
        type=env_name,
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable of the environment to commands as it is (repeatable); "
        "commands get only PATH, HOME, LANG, LC_*, TERM, USER, SHELL, TMPDIR, TZ and a few "
        "more otherwise",
    )


def add_sandbox(parser: argparse.ArgumentParser) -> None:
    """`--allow-unsandboxed` and `--no-network`: how the bash tools' commands are confined."""
    parser.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="run shell commands without a sandbox when bubblewrap is missing or refused "
        "(default: refuse to start)",
    )
    parser.add_argument(
        "--no-network",
        action="store_true",
        help="cut sandboxed shell commands off the network",
    )


def sandbox_policy(command: str, args: argparse.Namespace) -> SandboxPolicy | None:
    """The policy the flags ask for, once bubblewrap was found to work here (checked now, so a
    machine that cannot sandbox is told before anything starts); None after printing the one
    line that says it cannot and how to allow the fallback. A fallback is said on stderr."""
    policy = SandboxPolicy(allow_unsandboxed=args.allow_unsandboxed, network=not args.no_network)
    verdict = probe_now(policy.bwrap)
    if verdict.bwrap is None:
        if not policy.allow_unsandboxed:
            print(f"trio-agents {command}: {unavailable(verdict.reason)}", file=sys.stderr)
            return None
        print(f"trio-agents {command}: {fallback(verdict.reason)}", file=sys.stderr)
        mark_warned()
    return policy


def configure_logging(command: str, level: int) -> None:
    """Log to stderr (stdout may carry a protocol or the chat), each line naming the command."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level,
        format=f"trio-agents {command}: %(levelname)s %(name)s: %(message)s",
    )
