"""The JUnit XML schema the ACP suite's `--junit-xml` report is validated against: the one
pytest's own tests validate pytest's `--junitxml` output with (Jenkins' xunit plugin's
junit-10.xsd). Taken from the sdist of the pytest this environment runs, which pip brings
from PyPI once into a cache; the schema is not kept in this repository."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

__all__ = ["junit_schema_path"]

_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trio-agents-tests"


def junit_schema_path() -> Path:
    """The path of junit-10.xsd, fetched on first use."""
    version = pytest.__version__
    target = _CACHE / f"junit-10-pytest-{version}.xsd"
    if target.exists():
        return target
    _CACHE.mkdir(parents=True, exist_ok=True)
    archive = _CACHE / f"pytest-{version}.tar.gz"
    if not archive.exists():
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                "--no-binary", ":all:", f"pytest=={version}", "--dest", str(_CACHE),
            ],
            check=True,
        )  # fmt: skip
    with tarfile.open(archive) as sdist:
        member = sdist.extractfile(f"pytest-{version}/testing/example_scripts/junit-10.xsd")
        assert member is not None, f"pytest {version}'s sdist holds no junit-10.xsd"
        data = member.read()
    partial = target.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(target)
    return target
