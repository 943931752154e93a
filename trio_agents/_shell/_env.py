"""What a command's environment holds: an allowlist of this process's environment, what the
user passes explicitly, and settings that keep tools quiet. Pure (no trio import).

A name filter ("drop names that contain KEY or TOKEN") lets most real credentials through
(`GITHUB_PAT`, `DATABASE_URL`, `SSH_AUTH_SOCK`, `MYSQL_PWD`, ...), so commands get only the
names a shell needs to behave (D140). A value that carries a credential (a URL with a
userinfo part, `scheme://user:password@host`) is dropped even under an allowed name: only
an explicit pass puts it in (D141).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = [
    "ALLOWED_NAMES",
    "ALLOWED_PREFIXES",
    "QUIET_TOOLS",
    "carries_credentials",
    "check_env_name",
    "command_environment",
]

ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "TZ",
    }
)
ALLOWED_PREFIXES = ("LC_",)
QUIET_TOOLS: Mapping[str, str] = {
    "NO_COLOR": "1",
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}
# `scheme://userinfo@`: a userinfo part is a user name, a token, or user:password; all are
# treated as credentials (a bare user name is rare in the allowed names, a token common).
_USERINFO_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s?#]+@")


def carries_credentials(value: str) -> bool:
    """Whether `value` holds a URL with a userinfo part (`scheme://user:password@host`,
    `scheme://token@host`), anywhere in it."""
    return _USERINFO_URL.search(value) is not None


def check_env_name(name: object, what: str) -> str:
    """`name` if it can be an environment variable's name; else ValueError naming `what`."""
    if not isinstance(name, str) or not name or "=" in name or "\0" in name:
        raise ValueError(
            f"{what} {name!r} is not an environment variable name: give a non-empty string "
            "without '=' or NUL"
        )
    return name


def _allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def command_environment(
    base: Mapping[str, str],
    *,
    pass_env: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a command runs with.

    From `base` (the server's environment): the allowed names (`ALLOWED_NAMES`, and names
    starting with `LC_`) whose value carries no credential; then `QUIET_TOOLS`; then the
    names in `pass_env` that `base` has, as given; then `env`, as given. Explicit passes
    win over everything, credentials included: the user asked for them.
    """
    result = {
        name: value
        for name, value in base.items()
        if _allowed(name) and not carries_credentials(value)
    }
    result.update(QUIET_TOOLS)
    for name in pass_env:
        if name in base:
            result[name] = base[name]
    if env is not None:
        result.update(env)
    return result
