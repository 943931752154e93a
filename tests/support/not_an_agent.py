"""Targets that are not agents the suite can drive: each must be told so in one line."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any


class Half:
    """Sends, and nothing else."""

    def send(self, content: str) -> str:
        return content


@asynccontextmanager
async def missing_methods(
    model: Any, tools: Any, events: Any, options: Any
) -> AsyncGenerator[Half]:
    """Yields an object without most of the Agent's methods."""
    yield Half()


@asynccontextmanager
async def wrong_signature(model: Any) -> AsyncGenerator[Half]:
    """Cannot be called as factory(model, tools, events, options)."""
    yield Half()
