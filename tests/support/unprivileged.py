"""What the tests that drop root to `nobody` need: the files that user runs or imports (the
checkout, the virtual environment's packages, PostgreSQL's binaries) open to it.

A checkout made where only root may enter (`mktemp -d`, which is mode 0700, or under a
private home) cannot be run as `nobody`; those tests then fail with errors that do not say
why (`Permission denied` on initdb, `No module named 'trio'`). This says why, in one line.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

__all__ = ["check_reachable_by_nobody"]


def check_reachable_by_nobody(*files: str | os.PathLike[str]) -> None:
    """Raise AssertionError naming the first of `files` the user nobody cannot read (asked
    of the kernel, as nobody), the directory on its way that is closed to others, and what
    to do. Does nothing when we are not root (the tests then run as ourselves)."""
    if os.geteuid() != 0:
        return
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop root for this test"
    for file in files:
        path = pathlib.Path(file).absolute()
        probe = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "test", "-r"]
        if subprocess.run([*probe, str(path)], check=False, timeout=30).returncode == 0:
            continue
        closed = [d for d in reversed(path.parents) if not d.stat().st_mode & 0o001]
        where = closed[0] if closed else path
        raise AssertionError(
            f"the user nobody, whom these tests run as since they run as root, cannot read "
            f"{path}: {where} is closed to others; clone the checkout into a directory "
            f"others may enter, or `chmod o+x {where}`"
        )
