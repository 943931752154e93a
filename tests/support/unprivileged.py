"""What the tests that drop root to `nobody` need: the files that user runs or imports (the
package and the distributions it requires, PostgreSQL's binaries) where it may read them.

A checkout made where only root may enter (`mktemp -d`, which is mode 0700, or under a
private home) is closed to `nobody`: initdb fails with `Permission denied` and the package
with `No module named 'trio'`. Then those files are copied, once per test process, into a
directory of that process's own under the temporary directory, open to others and removed
when the process exits (design D380); from a checkout others may enter, nothing is copied.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata

from packaging.requirements import Requirement

__all__ = [
    "check_reachable_by_nobody",
    "copy_python",
    "open_to_nobody",
    "own_directories",
    "own_directory",
    "python_path_for_nobody",
    "readable_by_nobody",
    "remove_copies",
    "requirements",
    "sweep_dead_copies",
]

PREFIX = "trio-agents-open-"
_own: list[pathlib.Path] = []  # this process's directory of copies, once made
_copies: dict[pathlib.Path, pathlib.Path] = {}


def readable_by_nobody(path: str | os.PathLike[str]) -> bool:
    """Whether the user nobody can read `path`, asked of the kernel, as nobody (the modes of
    every directory on the way count). Always True when we are not root: the tests then run
    as ourselves."""
    if os.geteuid() != 0:
        return True
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop root for this test"
    probe = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "test", "-r"]
    absolute = str(pathlib.Path(path).absolute())
    return subprocess.run([*probe, absolute], check=False, timeout=30).returncode == 0


def check_reachable_by_nobody(*files: str | os.PathLike[str]) -> None:
    """Raise AssertionError naming the first of `files` the user nobody cannot read, the
    directory on its way that is closed to others, and what to do."""
    for file in files:
        path = pathlib.Path(file).absolute()
        if readable_by_nobody(path):
            continue
        closed = [d for d in reversed(path.parents) if not d.stat().st_mode & 0o001]
        where = closed[0] if closed else path
        raise AssertionError(
            f"the user nobody, whom these tests run as since they run as root, cannot read "
            f"{path}: {where} is closed to others; clone the checkout into a directory "
            f"others may enter, or `chmod o+x {where}`"
        )


def open_to_nobody(root: pathlib.Path, members: list[str], probe: str) -> pathlib.Path:
    """`root` when nobody can read `root / probe`; otherwise a directory that nobody can
    read, made once in this process, holding copies of `root`'s `members` (relative paths
    of directories) at the same relative places, so that what one finds of another by a
    relative path (as a wheel's binaries find their libraries) is found."""
    root = root.absolute()
    if readable_by_nobody(root / probe):
        return root
    if root not in _copies:
        target = own_directory() / f"{len(_copies)}-{root.name}"
        for member in members:
            shutil.copytree(
                root / member,
                target / member,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        _copies[root] = target
    check_reachable_by_nobody(_copies[root] / probe)
    return _copies[root]


def python_path_for_nobody() -> str | None:
    """None when nobody can import this package and trio where they are; otherwise a
    directory, for PYTHONPATH, holding copies of the package and of every distribution its
    own requirements bring (not the extras'), made once in this process."""
    import trio

    import trio_agents

    package = pathlib.Path(trio_agents.__file__).parent
    if readable_by_nobody(package / "__init__.py") and readable_by_nobody(trio.__file__):
        return None
    key = package / "(requirements)"
    if key not in _copies:
        _copies[key] = copy_python(own_directory() / "python")
    check_reachable_by_nobody(_copies[key] / package.name / "__init__.py")
    return str(_copies[key])


def copy_python(target: pathlib.Path) -> pathlib.Path:
    """Copy into `target` this package and every installed distribution its own
    requirements bring, transitively (not the extras'), laid out as in site-packages, so
    that `target` on PYTHONPATH imports them; `target`."""
    import trio_agents

    package = pathlib.Path(trio_agents.__file__).parent
    shutil.copytree(package, target / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    for dist in requirements("trio-agents"):
        for file in dist.files or ():
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue  # scripts beside the interpreter, and caches
            source = pathlib.Path(str(dist.locate_file(file)))
            if source.is_file():
                (target / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / file)
    return target


def requirements(name: str) -> list[metadata.Distribution]:
    """The installed distributions `name` requires, transitively, without extras."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [name]
    while todo:
        dist = metadata.distribution(todo.pop())
        for line in dist.requires or ():
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            key = requirement.name.lower().replace("_", "-")
            if key not in seen:
                seen[key] = metadata.distribution(requirement.name)
                todo.append(requirement.name)
    return list(seen.values())


def own_directory() -> pathlib.Path:
    """This process's directory of copies: under the temporary directory (open to others),
    named after the process in a file `owner`, removed at the end of the test session
    (`remove_copies`) or else when the process exits; made after removing those of
    processes that died without removing theirs."""
    if not _own:
        sweep_dead_copies()
        path = pathlib.Path(tempfile.mkdtemp(prefix=PREFIX))
        (path / "owner").write_text(str(os.getpid()))
        (path / "made-by").write_text(" ".join(sys.argv))  # to tell whose a leftover is
        path.chmod(0o755)
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _own.append(path)
    return _own[0]


def own_directories() -> list[pathlib.Path]:
    """This process's directory of copies, if it made one."""
    return list(_own)


def remove_copies() -> None:
    """Remove this process's copies (at the end of the test session: an xdist worker may
    end without running `atexit`'s functions)."""
    while _own:
        shutil.rmtree(_own.pop(), ignore_errors=True)
    _copies.clear()


def sweep_dead_copies() -> list[pathlib.Path]:
    """Remove the directories of copies whose process has died; those removed."""
    swept: list[pathlib.Path] = []
    for root in pathlib.Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            owner = int((root / "owner").read_text())
        except (OSError, ValueError):
            continue  # another process's, being made
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(root, ignore_errors=True)
            swept.append(root)
        except PermissionError:
            pass
    return swept
