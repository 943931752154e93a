"""What a sandboxed command may see, and the `bwrap` command line that enforces it. Pure: no
trio, no file system access (the caller says which hidden paths are directories).

bubblewrap applies its mount options in order and a later mount over the same path wins, so
the order below is the policy: the whole file system read-only, a fresh /proc and /dev, a
private /tmp, then the writable directories (the command's workdir first, which may lie under
/tmp), then the exposed read-only paths, and the hidden paths last, so a secret inside the
workdir is hidden too. A hidden directory that contains the workdir is not hidden as a whole
(that would hide the workdir); the paths inside it that must be hidden are listed on their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._util import check_bool, check_strings

__all__ = ["DEFAULT_SECRET_PATHS", "SandboxPolicy", "bwrap_argv", "hidden_targets"]

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
)
"""The user's credential files and directories hidden from every sandboxed command."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """How the shell executor confines each command in a bubblewrap (`bwrap`) sandbox.

    secret_paths: files and directories hidden from commands (`~` is the user's home);
        a directory becomes an empty tmpfs, a file reads as empty. Missing ones are skipped.
    hidden: more paths hidden the same way (the runtime adds its store's directory).
    writable: directories commands may write to, besides their workdir.
    read_only: paths re-exposed read-only after the hiding of /tmp (e.g. a tool cache).
    network: False cuts commands off the network (`--unshare-net`).
    allow_unsandboxed: when bwrap is missing or namespaces are refused, run commands without
        a sandbox (saying so once in the log) instead of raising SandboxUnavailableError.
    bwrap: the bwrap executable (None: `bwrap` on PATH).
    """

    secret_paths: tuple[str, ...] = DEFAULT_SECRET_PATHS
    hidden: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    network: bool = True
    allow_unsandboxed: bool = False
    bwrap: str | None = None

    def __post_init__(self) -> None:
        # Checked here, since a mistake weakens the sandbox without a word: a str is read
        # as its characters (`writable="//"` binds `/` writable), `network="no"` is true,
        # and a relative hidden path used to be skipped (D383).
        for name in ("secret_paths", "hidden", "writable", "read_only"):
            paths = check_strings(f"SandboxPolicy {name}", getattr(self, name))
            home_ok = name in ("secret_paths", "hidden")
            for path in paths:
                if not (
                    os.path.isabs(path) or (home_ok and (path == "~" or path.startswith("~/")))
                ):
                    start = "absolute or start with ~/" if home_ok else "absolute"
                    raise ValueError(f"SandboxPolicy {name}: {path!r} must be {start}")
            object.__setattr__(self, name, paths)
        check_bool("SandboxPolicy network", self.network)
        check_bool("SandboxPolicy allow_unsandboxed", self.allow_unsandboxed)
        if self.bwrap is not None and not (isinstance(self.bwrap, str) and self.bwrap):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"SandboxPolicy bwrap must be a path or None, got {self.bwrap!r}")


def _inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or below it (both absolute and normalised)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def hidden_targets(
    policy: SandboxPolicy, extra: Iterable[str], home: str | None
) -> tuple[str, ...]:
    """Every path the policy hides, absolute and normalised, `~` expanded with `home` (a
    `~` path is dropped when there is no home), duplicates removed, in order."""
    seen: dict[str, None] = {}
    for raw in (*policy.secret_paths, *policy.hidden, *extra):
        if raw == "~" or raw.startswith("~/"):
            if not home:
                continue
            raw = home + raw[1:]
        if os.path.isabs(raw):
            seen.setdefault(os.path.normpath(raw), None)
    return tuple(seen)


def bwrap_argv(
    bwrap: str,
    policy: SandboxPolicy,
    *,
    command: Sequence[str],
    workdir: str,
    hidden: Mapping[str, bool],
    exposed: Iterable[str] = (),
    as_root: bool = False,
) -> list[str]:
    """The argv that runs `command` in `workdir` under `policy`.

    `hidden` maps each existing path to hide to whether it is a directory (the caller has
    looked; bwrap cannot mount over a path that does not exist). `exposed` are paths shown
    read-only for this command only (e.g. its own session's spill directory). `as_root`:
    this process runs as root, whose capabilities bwrap keeps in the sandbox unless told.
    """
    workdir = os.path.normpath(workdir)
    argv = [
        bwrap,
        # Run by root, bwrap leaves the command every capability: with CAP_SYS_ADMIN it can
        # remount / writable, unmount /proc to see the host's, or mount a cgroup whose
        # release_agent the kernel runs outside every namespace, which nothing here would
        # own (D384). Unprivileged, bwrap drops them itself (and a setuid bwrap refuses
        # the option from a user who is not root).
        *(("--cap-drop", "ALL") if as_root else ()),
        # A PID namespace of its own: nothing inside sees or signals a process outside, and
        # when its first process (bwrap's init) dies the kernel kills everything inside, so
        # `setsid` and daemons cannot escape. --die-with-parent ties that init to us.
        "--unshare-pid",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--setenv",
        "TMPDIR",
        "/tmp",
    ]
    if not policy.network:
        argv.append("--unshare-net")
    for path in (workdir, *policy.writable):
        argv += ["--bind", path, path]
    for path in policy.read_only:
        argv += ["--ro-bind", path, path]
    for path, is_dir in hidden.items():
        if is_dir and _inside(workdir, path):
            continue  # hiding it would hide the workdir; its secrets are listed on their own
        argv += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
    # Last, so a hidden directory that holds one (the spill root holds every session's
    # directory) still shows this command its own.
    for path in exposed:
        argv += ["--ro-bind", path, path]
    argv += ["--chdir", workdir, "--", *command]
    return argv
