"""This distribution's version, as `trio-agents --version` and ACP's `initialize` report it.

A constant rather than `importlib.metadata.version()`: importing `importlib.metadata` costs
about 20 ms of every start (it brings `email`, `zipfile` and `csv`), a tenth of the ACP
server's spawn-to-initialize (D379). `pyproject.toml` holds the same string; a test pins
the two, and the installed metadata, together.
"""

from __future__ import annotations

from typing import Final

__all__ = ["VERSION"]

VERSION: Final = "0.1.0"
