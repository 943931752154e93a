"""The flags and argument types the `trio-agents` subcommands share, and their logging.

Each command keeps its own help text, defaults and choices; what is shared is the flag, its
type and where its value goes.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .._agent._system_prompt import coding_system_prompt
from .._shell._env import check_env_name
from .._shell._sandbox import fallback, mark_warned, probe_now, root_mapping, unavailable
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
        action=_PromptFile,
        metavar="PATH",
        default=coding_system_prompt,
        help="send the text of this UTF-8 file as the system prompt instead of the default",
    )


class _PromptFile(argparse.Action):
    """Reads the file as `prompt_file` does (a usage error naming it when it cannot), stores
    its text as the system prompt, and remembers its path: commands must not rewrite the
    file the agent is steered by (`steering_files`, D493)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(values, str)
        try:
            text = prompt_file(values)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument {option_string}: {exc}")
        setattr(namespace, self.dest, text)
        namespace.system_prompt_file = os.path.abspath(values)


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
    """`--allow-unsandboxed`, `--no-network` and `--expose-home`: how the bash tools'
    commands are confined."""
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
    parser.add_argument(
        "--expose-home",
        type=home_path,
        action="append",
        default=[],
        metavar="PATH",
        help="show this path of your home (e.g. ~/.gitconfig) to commands, read-only; they "
        "see a private, empty HOME otherwise, but for the directories on PATH (repeatable)",
    )


def home_path(text: str) -> str:
    """An argparse type: a path in the user's home as `SandboxPolicy(home=...)` takes it
    (`~/...`); an absolute one inside HOME is turned into that form."""
    home = os.path.normpath(os.path.expanduser("~"))
    if text == "~" or text.startswith("~/"):
        return text
    full = os.path.normpath(os.path.abspath(text))
    if full == home or full.startswith(home.rstrip("/") + "/"):
        return "~" + full[len(home) :] if full != home else "~"
    raise argparse.ArgumentTypeError(
        f"{text!r} is not in your home ({home}): give a path like ~/.gitconfig"
    )


def steering_files(args: argparse.Namespace) -> tuple[str, ...]:
    """The files the agent is steered by that exist (its MCP configuration, its system prompt
    file): shown to commands read-only, so that none can rewrite them (D493)."""
    paths = [*(str(p) for p in getattr(args, "mcp", []) or [])]
    prompt = getattr(args, "system_prompt_file", None)
    if isinstance(prompt, str):
        paths.append(prompt)
    found = [os.path.abspath(p) for p in paths if os.path.isfile(p)]
    return tuple(dict.fromkeys(found))


def sandbox_policy(command: str, args: argparse.Namespace) -> SandboxPolicy | None:
    """The policy the flags ask for, once bubblewrap was found to work here (checked now, so a
    machine that cannot sandbox is told before anything starts); None after printing the one
    line that says it cannot and how to allow the fallback. A fallback is said on stderr."""
    policy = SandboxPolicy(
        allow_unsandboxed=args.allow_unsandboxed,
        network=not args.no_network,
        home=tuple(args.expose_home),
        protected=steering_files(args),
    )
    verdict = probe_now(policy.bwrap)
    if verdict.bwrap is None:
        if not policy.allow_unsandboxed:
            print(f"trio-agents {command}: {unavailable(verdict.reason)}", file=sys.stderr)
            return None
        print(f"trio-agents {command}: {fallback(verdict.reason)}", file=sys.stderr)
        mark_warned()
    elif root_mapping() is not None:
        print(f"trio-agents {command}: {root_mapping()}", file=sys.stderr)
        mark_warned()
    return policy


def configure_logging(command: str, level: int) -> None:
    """Log to stderr (stdout may carry a protocol or the chat), each line naming the command."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level,
        format=f"trio-agents {command}: %(levelname)s %(name)s: %(message)s",
    )
