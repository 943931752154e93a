"""The user's credential files, as the sandbox hides them from commands and the file tools
refuse them (D516), and `~` expanded. Pure; no trio import. Shared by the shell and the
tools, which import nothing of each other."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_SECRET_PATHS", "expand_home", "home_directory"]

DEFAULT_SECRET_PATHS: tuple[str, ...] = (
    "~/.ssh",
    "~/.aws",
    "~/.azure",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.pypirc",
    "~/.npmrc",
    "~/.yarnrc",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.pgpass",
    "~/.vault-token",
    "~/.config/git/credentials",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "~/.psql_history",
    "~/.config/openai",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.m2/settings.xml",
    "~/.gem/credentials",
    "~/.config/hub",
    "~/.env",
)
"""The user's credential files and directories hidden from every sandboxed command."""


def expand_home(raw: str, home: str | None) -> str | None:
    """`raw` with a leading `~` replaced by `home`, normalised; None for a `~` path when
    there is no home."""
    if raw == "~" or raw.startswith("~/"):
        if not home:
            return None
        raw = home + raw[1:]
    return os.path.normpath(raw) if os.path.isabs(raw) else None


def home_directory() -> str | None:
    """This process's HOME, if it is an absolute path, normalised; else None."""
    home = os.environ.get("HOME") or None
    return os.path.normpath(home) if home and os.path.isabs(home) else None
