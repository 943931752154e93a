"""The shell machine's probe of rule S9: each owner spills into a private directory of its
own, a directory replaced behind the executor's back is refused, and `kill_owned` removes
the owner's directory. Real commands, real directories; the filesystem is looked at in
synchronous helpers between the commands."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat

from trio_agents import ShellExecutor, ShellRequest

from ._shell_probes import big_output
from ._shell_properties import SPILL_DIRECTORY_PER_OWNER

__all__ = ["probe_spill_directories"]

# Tokens no agent of the machine has: their kill_owned kills nothing but removes their spills.
OWNERS = ("trio-agents-probe-owner-1", "trio-agents-probe-owner-2")


async def probe_spill_directories(shell: ShellExecutor) -> None:
    """Two owners each print past the cap; one's directory is then replaced by another at
    the same path, and it prints again; then both owners are closed (`kill_owned`)."""
    if not callable(getattr(shell, "spill_directory", None)):
        SPILL_DIRECTORY_PER_OWNER.fail("the executor has no spill_directory(owner)")
    cap = int(getattr(shell, "max_output_bytes", 64_000))
    lines = big_output(cap).count(b"\n")
    command = f"seq -w 1 {lines}"
    first, second = OWNERS
    paths: dict[str, str | None] = {}
    for owner in OWNERS:
        result = await shell.run(shell.resolve(ShellRequest(command, timeout=30, owner=owner)))
        paths[owner] = result.stdout.spill_path
    directories = _check_separate(shell, paths)
    victim = directories[second]
    moved = _replace(victim)
    # The executor warns of the refusal it is made to make here: not news to the user.
    quiet = _QuietAbout(victim)
    shell_logger = logging.getLogger("trio_agents.shell")
    shell_logger.addFilter(quiet)
    try:
        refused = False
        try:
            shell.spill_directory(second)
        except OSError:
            refused = True
        SPILL_DIRECTORY_PER_OWNER.check(
            refused,
            f"spill_directory({second!r}) handed out {victim} after it was replaced by "
            "another directory at that path",
        )
        result = await shell.run(shell.resolve(ShellRequest(command, timeout=30, owner=second)))
        _check_refused(victim, result.stdout.spill_path)
    finally:
        shell_logger.removeFilter(quiet)
        with contextlib.suppress(OSError):
            os.rmdir(victim)
        shutil.rmtree(moved, ignore_errors=True)
    await shell.kill_owned(first)
    await shell.kill_owned(second)
    _check_removed(first, directories[first])


class _QuietAbout(logging.Filter):
    """Drops the log records that name `path`."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def filter(self, record: logging.LogRecord) -> bool:
        return self.path not in record.getMessage()


def _check_removed(owner: str, directory: str) -> None:
    SPILL_DIRECTORY_PER_OWNER.check(
        not os.path.lexists(directory),
        f"kill_owned({owner!r}) left its spill directory {directory}",
    )


def _check_separate(shell: ShellExecutor, paths: dict[str, str | None]) -> dict[str, str]:
    directories = {owner: shell.spill_directory(owner) for owner in paths}
    for owner, path in paths.items():
        SPILL_DIRECTORY_PER_OWNER.check(
            path is not None and os.path.dirname(path) == directories[owner],
            f"{owner!r}'s output past the cap spilled to {path}, not into its directory "
            f"{directories[owner]}",
        )
        mode = stat.S_IMODE(os.lstat(directories[owner]).st_mode)
        SPILL_DIRECTORY_PER_OWNER.check(
            mode == 0o700, f"{owner!r}'s spill directory has mode {mode:04o}"
        )
    first, second = (directories[owner] for owner in OWNERS)
    SPILL_DIRECTORY_PER_OWNER.check(
        first != second, f"two owners spill into one directory, {first}"
    )
    root = os.path.dirname(first)
    SPILL_DIRECTORY_PER_OWNER.check(
        os.path.dirname(second) == root and stat.S_IMODE(os.lstat(root).st_mode) == 0o700,
        f"the owners' spill directories {first} and {second} are not in one 0700 root",
    )
    return directories


def _replace(directory: str) -> str:
    """Move `directory` aside and make another at its path, as a command could; return
    where the original went."""
    moved = f"{directory}-moved-by-probe"
    os.rename(directory, moved)
    os.mkdir(directory, 0o700)
    return moved


def _check_refused(victim: str, path: str | None) -> None:
    SPILL_DIRECTORY_PER_OWNER.check(
        path is None,
        f"after its spill directory {victim} was replaced, a new spill handed out {path}",
    )
    planted = os.listdir(victim)
    SPILL_DIRECTORY_PER_OWNER.check(
        not planted, f"a spill landed in the directory that replaced {victim}: {planted}"
    )
