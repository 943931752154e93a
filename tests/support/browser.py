"""A headless Chromium for the tests that look at a page as a person would (the ACP suite's
HTML report): found on PATH, else installed with apt-get as root (after an `apt-get update`
when the first try fails). Where neither works the test fails, saying so: a skip is not a
pass."""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess

__all__ = ["ensure_chromium", "screenshot"]

CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache"))
APT_TIMEOUT = 900  # seconds: a slow mirror, not a hang
NAMES = ("chromium", "chromium-browser", "google-chrome")


def _found() -> str | None:
    return next((path for name in NAMES if (path := shutil.which(name))), None)


def _apt(*argv: str) -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(
            ["apt-get", *argv], capture_output=True, timeout=APT_TIMEOUT, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def ensure_chromium() -> str:
    """The path of a Chromium, installed on first use; AssertionError saying what is missing
    when there is none and it cannot be installed here."""
    found = _found()
    if found is None and os.geteuid() == 0:
        CACHE.mkdir(parents=True, exist_ok=True)
        # Test workers may ask at once: one installs while the others wait (dpkg's lock).
        with open(CACHE / "trio-agents-tests.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = _found()
            if found is None and not _apt("install", "-y", "-q", "chromium"):
                _apt("update", "-q")
                _apt("install", "-y", "-q", "chromium")
            found = _found()
    assert found is not None, (
        "no Chromium here, and it could not be installed (run the tests as root on a Debian "
        "or Ubuntu machine, or install `chromium`)"
    )
    return found


def _headless(browser: str, profile: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile}", "--hide-scrollbars", *args,
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def screenshot(page: pathlib.Path, png: pathlib.Path, size: str = "1400,1000") -> str:
    """Render `page` in a headless Chromium: write its screenshot to `png` and return the
    DOM the browser built from it (as the browser parsed it, not as written)."""
    browser = ensure_chromium()
    profile = png.parent / "chromium-profile"
    url = page.resolve().as_uri()
    shot = _headless(browser, profile, f"--screenshot={png}", f"--window-size={size}", url)
    assert png.exists(), f"Chromium wrote no screenshot: {shot.stderr[-2000:]}"
    dom = _headless(browser, profile, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout
