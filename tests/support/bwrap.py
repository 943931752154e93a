"""bubblewrap and slirp4netns for the test suite: found on PATH, else installed, else the
tests that need them fail (a skip is not a pass). The shell runs commands sandboxed by
default, each with a network of its own through slirp4netns, so every test that runs a
command needs them.

As root it is installed with apt-get (after an `apt-get update` when the first try fails);
otherwise its package is downloaded and unpacked into a cache directory, whose `usr/bin` is
put first on PATH for this process and the processes it starts (the CLI tests' servers).
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess

__all__ = ["ensure_bwrap"]

CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
UNPACKED = CACHE / "trio-agents-tests" / "bubblewrap"
APT_TIMEOUT = 600  # seconds: a slow mirror, not a hang


def _run(*argv: str, cwd: pathlib.Path | None = None) -> bool:
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, timeout=APT_TIMEOUT, check=False, text=True
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


PACKAGES = ("bubblewrap", "slirp4netns")  # the sandbox, and each command's network (D494)


def _install_as_root() -> None:
    env = ["env", "DEBIAN_FRONTEND=noninteractive"]
    if not _run(*env, "apt-get", "install", "-y", "-q", *PACKAGES):
        _run(*env, "apt-get", "update", "-q")
        _run(*env, "apt-get", "install", "-y", "-q", *PACKAGES)


def _unpack_for_this_user() -> None:
    UNPACKED.mkdir(parents=True, exist_ok=True)
    binary = UNPACKED / "usr" / "bin" / "bwrap"
    if not (binary.exists() and (binary.parent / "slirp4netns").exists()):
        download = UNPACKED / "download"
        download.mkdir(exist_ok=True)
        # slirp4netns needs libslirp, which a machine without it lacks too.
        if _run("apt-get", "download", *PACKAGES, "libslirp0", cwd=download):
            for deb in download.glob("*.deb"):
                _run("dpkg", "-x", str(deb), str(UNPACKED))
    if binary.exists():
        os.environ["PATH"] = f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        libraries = [str(p) for p in (UNPACKED / "usr" / "lib").glob("*-linux-gnu")]
        if libraries:
            known = os.environ.get("LD_LIBRARY_PATH", "")
            os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([*libraries, *filter(None, [known])])


def ensure_bwrap() -> tuple[str | None, str]:
    """(the bwrap path, "") once bubblewrap is on PATH and can make a sandbox here; else
    (None, what is missing)."""
    from trio_agents._shell._sandbox import probe_now

    if shutil.which("bwrap") is None or shutil.which("slirp4netns") is None:
        # The test workers (pytest-xdist) each ask; one installs while the others wait:
        # two apt-get runs at once would fail on dpkg's lock.
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / "trio-agents-tests.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if shutil.which("bwrap") is None or shutil.which("slirp4netns") is None:
                if os.geteuid() == 0:
                    _install_as_root()
                else:
                    _unpack_for_this_user()
    verdict = probe_now(None)  # also warms the library's cache: no trio test waits for it
    return verdict.bwrap, verdict.reason
